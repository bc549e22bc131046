"""MuJoCo learning benchmark: arl-learn's PPO and SAC on gymnasium Hopper-v5, HalfCheetah-v5 and
Walker2d-v5 with the configs in config/mujoco/, several seeds, next to published figures.

    pip install -e '.[bench]'            # gymnasium[mujoco]
    python bench/learning/mujoco.py                               # PPO, 3 tasks x 3 seeds x 1M steps
    python bench/learning/mujoco.py --algo sac --tasks Hopper     # SAC on Hopper
    python bench/learning/mujoco.py --steps 500000 --jobs 2 --tasks HalfCheetah Hopper
    python bench/learning/mujoco.py --configs config/mujoco/mlagents-walker --steps 500000   # issue 22's config

Each run is a separate `arl-learn` process (its own results directory under --results-dir); the tasks x
seeds grid goes through bench/common/runner.py, --jobs runs at a time. The
score of a run is the mean episodic return of its last 10% of episodes (the issue's measure; the
published figures below are each paper's own end-of-training mean, over its seeds). The table
prints each seed's score, the mean and standard deviation over seeds, the median wall-clock and
the published anchors for the same task and step count.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
if Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:  # run as a script:
    sys.path[0] = str(ROOT)  # import bench.* from the repository root, not from this folder

from bench.common.runner import add_seeds_argument, run_grid  # noqa: E402

TASKS = ("HalfCheetah", "Hopper", "Walker2d")

# Published figures at 1M environment steps; how each source computes its figure is in
# docs/benchmarks/mujoco.md ("Published anchors"). CleanRL: gymnasium v4, 3 seeds, end of training;
# rl-zoo: one agent (v3), deterministic evaluation; Tianshou: best 10-seed average over training.
ANCHORS = {
    "ppo": {
        "CleanRL PPO (v4)": {"HalfCheetah": 1442.64, "Hopper": 2382.86, "Walker2d": 2287.95},
        "rl-zoo PPO (v3)": {"HalfCheetah": 5819, "Hopper": 2410, "Walker2d": 3479},
        "Tianshou PPO": {"HalfCheetah": 5784, "Hopper": 2609, "Walker2d": 3589, "Ant": 3258},
    },
    "sac": {
        "Tianshou SAC": {"HalfCheetah": 12139, "Hopper": 3542, "Walker2d": 5007},
    },
}


@dataclass
class RunResult:
    task: str
    seed: int
    score: float  # mean return of the last 10% of episodes
    best20: float  # best mean of 20 consecutive episodes
    episodes: int
    wall_s: float


def episode_returns(run_dir: Path) -> list[float]:
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        return [row[0] for row in db.execute("SELECT env_reward FROM episodes ORDER BY id")]


def run_one(algo: str, task: str, seed: int, steps: int, configs: Path, results: Path, extra: list[str]) -> RunResult:
    config = yaml.safe_load((configs / f"{task}-{algo}.yaml").read_text())
    config["behaviors"][task]["max_steps"] = steps
    run_id = f"{task}-{algo}-s{seed}"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(config, f)
        path = f.name
    started = time.perf_counter()
    try:
        cmd = [sys.executable, "-m", "ml_arl.cli.learn", path, "--run-id", run_id, "--seed", str(seed),
               "--results-dir", str(results), "--force", *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    finally:
        os.unlink(path)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{run_id} failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    returns = episode_returns(results / run_id)
    tail = returns[-max(1, len(returns) // 10):]
    windows = [statistics.fmean(returns[i : i + 20]) for i in range(0, max(1, len(returns) - 19))]
    return RunResult(task, seed, statistics.fmean(tail), max(windows), len(returns), wall)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=("ppo", "sac"), default="ppo")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS),
                        help="behaviors with a <Task>-<algo>.yaml in --configs (default: the three MuJoCo tasks)")
    add_seeds_argument(parser, [1, 2, 3])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (each uses num_envs + 1 processes)")
    parser.add_argument("--configs", type=Path, default=ROOT / "config" / "mujoco",
                        help="folder of <Task>-<algo>.yaml files (default: config/mujoco)")
    parser.add_argument("--results-dir", type=Path, default=Path(tempfile.gettempdir()) / "arl-mujoco")
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="after --: more arl-learn flags")
    args = parser.parse_args(argv)
    extra = [a for a in args.extra if a != "--"]
    for task in args.tasks:
        if not (args.configs / f"{task}-{args.algo}.yaml").is_file():
            parser.error(f"--tasks {task}: no {task}-{args.algo}.yaml in {args.configs}")
    configs = args.configs.resolve()
    grid = run_grid(lambda run: run_one(args.algo, run.task, run.seed, args.steps, configs, args.results_dir, extra),
                    tasks=args.tasks, seeds=args.seeds, jobs=args.jobs)
    results = [result for _, result in grid]
    for r in results:
        print(f"{r.task:12s} seed {r.seed}: last-10% return {r.score:8.1f}  best 20-episode mean {r.best20:8.1f}  "
              f"{r.episodes} episodes  {r.wall_s:6.0f} s", flush=True)
    anchors = ANCHORS[args.algo]
    head = f"| task | arl-learn {args.algo.upper()} at {args.steps:,} steps (mean +- sd, {len(args.seeds)} seeds) | median wall-clock |"
    print("\n" + head + "".join(f" {name} at 1M |" for name in anchors))
    print("|---" * (3 + len(anchors)) + "|")
    for task in args.tasks:
        rows = [r for r in results if r.task == task]
        scores = [r.score for r in rows]
        sd = statistics.stdev(scores) if len(scores) > 1 else 0.0
        line = f"| {task} | {statistics.fmean(scores):,.0f} +- {sd:,.0f} | {statistics.median(r.wall_s for r in rows):.0f} s |"
        print(line + "".join(f" {figures[task]:,} |" if task in figures else " - |" for figures in anchors.values()))


if __name__ == "__main__":
    main()
