"""The guarded Grid2Op operator against a learned opponent, over seeds: config/grid2op/case14-guarded-adversarial.yaml
(docs/grid2op.md, "Against a learned opponent").

Each seed is one ``arl-learn`` run of the config (a process of its own, ``--seed``, run id ``adv<seed>``): the
Operator learns against random line attacks, then the matrix plays each operator (learned, the reconnect rule,
the greedy teacher) against ``random_line_attack`` and against its best response (a fresh Opponent trained
against that operator alone). The demonstrations its behavioral cloning reads are recorded first, once, on
``--demo-seed`` (20, a seed not reported on), as bench/learning/grid2op_survival.py records them.

The table gives each operator's mean return (steps the grid survived, arl-report's figure) in each column: the
mean of the per-seed means, its 95 % t-interval over the seeds, the per-seed means, and the paired difference
from grid2op_reconnect (per seed, the difference of the two means over the seed's replayed episodes; its mean
and t-interval over the seeds).

    python bench/learning/grid2op_adversarial.py --seeds 0 1 2 3 4 --jobs 3 --results-dir runs
    python bench/learning/grid2op_adversarial.py --seeds 0 1 2 3 4 --results-dir runs --report-only   # read the runs there
"""

from __future__ import annotations

import argparse
import datetime
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
if Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:  # run as a script:
    sys.path[0] = str(ROOT)  # import bench.* from the repository root, not from this folder

from bench.common.runner import Run, add_seeds_argument, run_grid  # noqa: E402
from bench.learning.grid2op_survival import RULE, interval, record_demos  # noqa: E402

CONFIG = ROOT / "config/grid2op/case14-guarded-adversarial.yaml"
COLUMNS = ("random_line_attack", "best_response")


def cells(database: Path) -> dict[tuple[str, str], list[float]]:
    """(operator, column) -> the Operator's test returns in that matrix cell of one run."""
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT phase, env_reward FROM episodes WHERE behavior = 'Operator' AND mode = 'test' "
                          "AND phase LIKE 'matrix.%'").fetchall()
    out: dict[tuple[str, str], list[float]] = {}
    for phase, value in rows:
        name = phase.split(".", 1)[1]
        if name.startswith("br-Opponent-vs-"):
            key = (name.removeprefix("br-Opponent-vs-"), "best_response")
        else:
            key = (name.removesuffix("-vs-random_line_attack"), "random_line_attack")
        out.setdefault(key, []).append(float(value))
    return out


def run_seed(config: Path, seed: int, results: Path) -> float:
    """One arl-learn run of ``config`` (run id adv<seed>); its wall-clock."""
    started = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "ml_arl.cli.learn", str(config), "--run-id", f"adv{seed}", "--seed", str(seed),
         "--results-dir", str(results), "--force"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"seed {seed}: arl-learn exited {proc.returncode}:\n{proc.stdout[-3000:]}")
    return time.time() - started


def table(per_seed: dict[tuple[str, str], list[float]], operators: list[str]) -> list[str]:
    lines = [f"| Operator | column | mean return | 95 % t-interval over seeds | per seed | paired difference from {RULE} |",
             "|---|---|---|---|---|---|"]
    for column in COLUMNS:
        for operator in operators:
            values = per_seed[(operator, column)]
            mean, _, half = interval(values)
            paired = ""
            if operator != RULE:
                diff, _, dhalf = interval([a - b for a, b in zip(values, per_seed[(RULE, column)])])
                paired = f"{diff:+.1f} [{diff - dhalf:+.1f}, {diff + dhalf:+.1f}]"
            lines.append(f"| {operator} | {column} | {mean:.1f} | [{mean - half:.1f}, {mean + half:.1f}] "
                         f"| {' / '.join(f'{v:.1f}' for v in values)} | {paired} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_seeds_argument(parser, [0, 1, 2, 3, 4])
    parser.add_argument("--results-dir", required=True, help="where the runs go (adv<seed>) and the demonstrations (demos/)")
    parser.add_argument("--jobs", type=int, default=1, help="seeds at once")
    parser.add_argument("--demo-seed", type=int, default=20, help="the seed the teacher's demonstrations are recorded on")
    parser.add_argument("--report-only", action="store_true", help="read the runs already in --results-dir; run nothing")
    args = parser.parse_args(argv)
    if args.demo_seed in args.seeds:
        raise SystemExit(f"--demo-seed {args.demo_seed} is one of the seeds reported on; pick another")
    results = Path(args.results_dir).resolve()
    config = yaml.safe_load(CONFIG.read_text())
    operators = list(config["phases"][-1]["matrix"]["Operator"])

    if not args.report_only:
        results.mkdir(parents=True, exist_ok=True)
        demos = results / "demos"
        if not (demos / "Operator.demo").is_file():
            started = time.time()
            record_demos(results, args.demo_seed)
            print(f"demonstrations: grid2op_greedy, seed {args.demo_seed}, {time.time() - started:.0f} s", flush=True)
        for behavior in config["behaviors"].values():  # the config with the recorded demonstrations' folder
            if "behavioral_cloning" in behavior:
                behavior["behavioral_cloning"]["demo_path"] = str(demos)
        path = results / "case14-guarded-adversarial.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))

        def report(run: Run, wall: float) -> None:
            print(f"seed {run.seed}: {wall:.0f} s", flush=True)

        run_grid(lambda run: run_seed(path, run.seed, results), seeds=args.seeds, on_result=report, jobs=args.jobs)

    per_seed: dict[tuple[str, str], list[float]] = {(o, c): [] for o in operators for c in COLUMNS}
    for seed in args.seeds:
        found = cells(results / f"adv{seed}" / "results.sqlite")
        for key in per_seed:
            if not found.get(key):
                raise SystemExit(f"adv{seed}: no test episodes of {key[0]} against {key[1]}; did its run finish?")
            per_seed[key].append(statistics.fmean(found[key]))
        counts = sorted({len(found[key]) for key in per_seed})
        print(f"seed {seed}: " + "; ".join(f"against {c}: " + ", ".join(f"{o} {per_seed[(o, c)][-1]:.1f}" for o in operators)
                                           for c in COLUMNS)
              + f" ({'-'.join(map(str, counts[::max(len(counts) - 1, 1)]))} episodes a cell)")

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print()
    print(f"python bench/learning/grid2op_adversarial.py --seeds {' '.join(map(str, args.seeds))} --demo-seed {args.demo_seed}")
    print(f"{datetime.date.today().isoformat()}, commit {commit}, {os.cpu_count()} CPU cores; "
          f"best responses {config['phases'][-1]['best_response']}")
    print()
    print("\n".join(table(per_seed, operators)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
