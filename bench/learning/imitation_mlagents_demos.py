"""GAIL plus behavioral cloning (no extrinsic reward) from demonstrations made the way ML-Agents'
own learning tests make them (tests/data/record_mlagents_fixture_demos.py: ML-Agents 1.1.0's
writer, no terminal records, 100 records), on two 1-D tasks: GoalReach (ML-Agents' test_gail
task) and Momentum (tests/support/momentum_env.py, the action a force). ML-Agents' test_gail
protocol: its test hyperparameters (tests/trainers/test_signals_learning.py's PPO and SAC), 500
steps, the mean of the last 5 episode returns, 0.9 to pass. The tests run seed 1; this runs more.

    python bench/learning/imitation_mlagents_demos.py                       # seeds 1-5, both trainers, both tasks
    python bench/learning/imitation_mlagents_demos.py --trainers sac --seeds 6 7 8 9 10
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:  # run as a script:
    sys.path[0] = str(ROOT)  # import bench.* and tests.* from the repository root, not from this folder

from bench.common.runner import Run, add_seeds_argument, run_grid  # noqa: E402

TASKS = {
    "GoalReach": ("tests.support.simple_envs:goal_reach", ["continuous=1"], ROOT / "tests/data/goal_reach_mlagents.demo"),
    "Momentum": ("tests.support.momentum_env:momentum", [], ROOT / "tests/data/momentum_mlagents.demo"),
}


def one(run: Run) -> float:
    """One run's score: the mean of its last 5 episode returns at step 500."""
    logging.disable(logging.WARNING)
    from ml_arl.settings import build_run_options
    from ml_arl.training.controller import TrainerController
    from tests.support.simple_envs import last5
    from tests.trainers.test_signals_learning import TRAINERS

    env_path, env_args, demo = TASKS[run.task]
    with tempfile.TemporaryDirectory() as tmp:
        config = {
            "env_settings": {"env_path": env_path, "env_args": env_args, "manager": "inprocess", "seed": run.seed},
            "checkpoint_settings": {"results_dir": tmp, "run_id": "imitate"},
            "default_settings": {**TRAINERS[run.config], "summary_freq": 100, "max_steps": 500,
                                 "reward_signals": {"gail": {"encoding_size": 32, "demo_path": str(demo)}},
                                 "behavioral_cloning": {"demo_path": str(demo), "steps": 1000}},
            "behaviors": {},
        }
        controller = TrainerController(build_run_options(config, {}, "bench"))
        controller.start_learning()
        return last5(list(next(iter(controller.managers.values())).recent_rewards))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_seeds_argument(parser, [1, 2, 3, 4, 5])
    parser.add_argument("--trainers", nargs="+", default=["ppo", "sac"], choices=["ppo", "sac"])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    results = run_grid(one, tasks=args.tasks, seeds=args.seeds, configs=args.trainers, jobs=args.jobs, fresh_process=True,
                       on_result=lambda run, score: print(f"{run.task} {run.config} seed {run.seed}: {score:.2f}", flush=True))
    print("\n| task | trainer | seeds | last-5 return per seed | passed (> 0.9) | mean |\n|---|---|---|---|---:|---:|")
    for task in args.tasks:
        for trainer in args.trainers:
            scores = [score for run, score in results if run.task == task and run.config == trainer]
            shown = " / ".join(f"{s:.2f}" for s in scores)
            seeds = ",".join(map(str, args.seeds))
            print(f"| {task} | {trainer} | {seeds} | {shown} | {sum(s > 0.9 for s in scores)} of {len(scores)} | "
                  f"{statistics.mean(scores):.2f} |")


if __name__ == "__main__":
    main()
