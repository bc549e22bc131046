"""bench/'s one grid runner (bench/common/runner.py) and its shell form (bench/run.py): the order of
the grid, results in grid order with several jobs, a failed run in a fresh process said with its
cause, and placeholders that must be used."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.common.runner import Run, RunFailed, grid, in_fresh_process, run_grid

ROOT = Path(__file__).resolve().parents[2]


def test_the_grid_nests_its_axes_outermost_first() -> None:
    runs = grid(tasks=["a", "b"], seeds=[1, 2], configs=["x"])
    assert [(r.task, r.config, r.seed) for r in runs] == [("a", "x", 1), ("a", "x", 2), ("b", "x", 1), ("b", "x", 2)]
    assert [r.index for r in runs] == [0, 1, 2, 3] and {r.total for r in runs} == {4}
    by_seed = grid(tasks=["a", "b"], seeds=[1, 2], order=("seed", "task", "config"))
    assert [(r.seed, r.task) for r in by_seed] == [(1, "a"), (1, "b"), (2, "a"), (2, "b")]
    assert Run("t", None, 3).label() == "task=t seed=3"
    with pytest.raises(ValueError, match="name each of task, config, seed once"):
        grid(order=("task", "task", "seed"))


def _slow_first(run: Run) -> int:
    time.sleep(0.2 if run.index == 0 else 0.0)  # the first run ends last
    return run.seed * 10


def test_results_come_in_grid_order_with_several_jobs() -> None:
    seen: list[int] = []
    out = run_grid(_slow_first, seeds=[1, 2, 3], jobs=3, on_result=lambda run, result: seen.append(result))
    assert [result for _, result in out] == [10, 20, 30] and seen == [10, 20, 30]


def _fails(run: Run) -> int:
    raise ValueError(f"seed {run.seed} cannot run")


def test_a_run_in_a_fresh_process_reports_its_own_error() -> None:
    with pytest.raises(RunFailed, match="seed=4: ValueError: seed 4 cannot run"):
        in_fresh_process(_fails, Run(seed=4), timeout=120)


def _bench_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": ""})


def test_the_shell_runner_fills_in_each_run_and_refuses_an_unused_axis() -> None:
    dry = _bench_run("--seeds", "1", "2", "--tasks", "A", "--dry-run", "--", "echo", "{task}-{seed}", "{gamma: 0.9}")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.split("\n")[:2] == ['echo A-1 "{gamma: 0.9}"', 'echo A-2 "{gamma: 0.9}"']
    unused = _bench_run("--seeds", "1", "2", "--dry-run", "--", "echo", "same")
    assert unused.returncode == 2 and "--seeds has 2 values but the command has no {seed}" in unused.stderr


def test_bench_readme_lists_every_script() -> None:
    """bench/README.md is the index: every script under bench/ is in it, by its path inside bench/."""
    index = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    scripts = [p.relative_to(ROOT / "bench").as_posix() for p in (ROOT / "bench").rglob("*")
               if p.suffix in (".py", ".sh") and p.name != "__init__.py" and "__pycache__" not in p.parts]
    assert len(scripts) > 30
    missing = [s for s in scripts if s not in index and s.rpartition("/")[2] not in index]
    assert not missing, f"bench/README.md does not list {missing}"
