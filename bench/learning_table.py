"""Steps and wall-clock to the success threshold, per trainer type and option (the README's
learning table): each learning task of the test suite, run for several seeds, one run at a time,
each in a fresh process.

A run trains in-process (``manager: inprocess``) with the test's hyperparameters and ends once
solved: its environment stops it, as a Ctrl-C does, when the last 20 episode returns (POCA: the
last 20 agents' successes) average above the task's ``solved_at``; otherwise it trains on to the
test's ``max_steps``. "steps" is the trainer's step count at the end, "seconds" the wall-clock
of the run from building the controller to its return (imports excluded). A run counts as
solved when the mean of its last 5 returns is above the test's threshold (ML-Agents' criterion).

    python bench/learning_table.py                 # every task, seeds 0 1 2
    python bench/learning_table.py --only sac      # tasks whose name contains "sac"
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

GOAL_REACH = "tests.simple_envs:goal_reach"
PPO = {"trainer_type": "ppo", "hyperparameters": {"learning_rate": 5.0e-3, "learning_rate_schedule": "constant",
                                                  "batch_size": 16, "buffer_size": 64},
       "network_settings": {"num_layers": 1, "hidden_units": 32}}
SAC = {"trainer_type": "sac", "hyperparameters": {"learning_rate": 5.0e-3, "learning_rate_schedule": "constant",
                                                  "batch_size": 8, "buffer_init_steps": 100, "buffer_size": 5000,
                                                  "tau": 0.01, "init_entcoef": 0.01},
       "network_settings": {"num_layers": 1, "hidden_units": 16}}


@dataclass
class Task:
    name: str  # trainer and option
    env: str  # what it learns, in words
    env_path: str
    env_args: list[str]
    settings: dict[str, Any]  # default_settings
    behavior: str = "GoalReach"
    threshold: float = 0.9  # on the mean of the last 5 returns
    solved_at: float = 0.9  # the run stops once the last 20 average above it


def _merge(base: dict[str, Any], **extra: Any) -> dict[str, Any]:
    out = {**base, **extra}
    if "hyperparameters" in extra:
        out["hyperparameters"] = {**base.get("hyperparameters", {}), **extra["hyperparameters"]}
    if "network_settings" in extra:
        out["network_settings"] = {**base.get("network_settings", {}), **extra["network_settings"]}
    return out


def _tasks() -> list[Task]:
    memory = {"memory": {"memory_size": 16, "sequence_length": 16}}
    images = ["continuous=0", "discrete=1", "step_size=0.5", "vectors=0", "images=1"]
    visual_ppo = _merge(PPO, hyperparameters={"learning_rate": 3.0e-4}, max_steps=900)
    tasks = [
        Task("ppo, continuous", "GoalReach 1-D", GOAL_REACH, ["continuous=1"], _merge(PPO, max_steps=1000)),
        Task("ppo, discrete", "GoalReach 1-D", GOAL_REACH, ["continuous=0", "discrete=1"], _merge(PPO, max_steps=1000)),
        Task("sac, continuous", "GoalReach 1-D", GOAL_REACH, ["continuous=1"], _merge(SAC, max_steps=1000)),
        Task("sac, discrete", "GoalReach 1-D", GOAL_REACH, ["continuous=0", "discrete=1"], _merge(SAC, max_steps=1000)),
        Task("sac, continuous 2-D", "GoalReach 2-D", GOAL_REACH, ["continuous=2", "step_size=0.8"],
             _merge(SAC, max_steps=6000, hyperparameters={"buffer_init_steps": 2000}), threshold=0.8, solved_at=0.8),
        Task("sac, images", "GoalReach, 20x20 image", GOAL_REACH, ["continuous=1", "vectors=0", "images=1"],
             _merge(SAC, max_steps=1000, hyperparameters={"batch_size": 16, "learning_rate": 3e-4})),
    ]
    for trainer, base in (("ppo", PPO), ("sac", SAC)):
        for signal in ("curiosity", "rnd"):
            signals = {"extrinsic": {"gamma": 0.99}, signal: {"gamma": 0.99, "strength": 0.01, "encoding_size": 32}}
            tasks.append(Task(f"{trainer} + {signal}", "GoalReach 1-D", GOAL_REACH, ["continuous=1"],
                              _merge(base, max_steps=1000, reward_signals=signals)))
    for encoder, size in (("nature_cnn", "[36, 36, 3]"), ("resnet", "[36, 36, 3]"), ("match3", "[5, 5, 5]")):
        tasks.append(Task(f"ppo, {encoder}", f"GoalReach, image {size}", GOAL_REACH, [*images, f"image_size={size}"],
                          _merge(visual_ppo, network_settings={"num_layers": 1, "hidden_units": 32, "vis_encode_type": encoder}),
                          threshold=0.5))
    ppo_memory = {"trainer_type": "ppo", "max_steps": 6000,
                  "hyperparameters": {"learning_rate": 1.0e-3, "learning_rate_schedule": "constant", "batch_size": 64, "buffer_size": 128},
                  "network_settings": {"num_layers": 1, "hidden_units": 32, **memory}}
    for kind, args in (("continuous", ["continuous=1"]), ("discrete", ["continuous=0", "discrete=1"])):
        tasks.append(Task(f"ppo + memory, {kind}", "GoalReach, goal shown 2 steps", GOAL_REACH,
                          [*args, "show_goal_steps=2"], ppo_memory, solved_at=0.95))
    poca = {"trainer_type": "poca", "time_horizon": 64, "max_steps": 6000,
            "hyperparameters": {"learning_rate": 5e-3, "learning_rate_schedule": "constant", "batch_size": 64, "buffer_size": 256},
            "network_settings": {"hidden_units": 32, "num_layers": 1}}
    for variant, behavior in (("continuous", "GroupReach"), ("discrete", "GroupReachDiscrete")):
        tasks.append(Task(f"poca, {variant}", "GroupReach, groups of 2", "tests.simple_envs:group_reach",
                          [f"variant={variant}", "n_groups=4"], poca, behavior=behavior))
    return tasks


def _run(task: Task, seed: int, queue: Any) -> None:
    """One run, in a fresh process: puts (steps, seconds, last-5 mean) on ``queue``."""
    import numpy as np

    from ml_arl.settings import build_run_options
    from ml_arl.trainer_controller import TrainerController
    from tests import simple_envs

    with tempfile.TemporaryDirectory() as tmp:
        config = {
            "env_settings": {"env_path": task.env_path, "env_args": [*task.env_args, f"solved_at={task.solved_at}"], "manager": "inprocess",
                             "seed": seed + 1},
            "checkpoint_settings": {"results_dir": tmp, "run_id": "bench"},
            "default_settings": {"summary_freq": 1000, "checkpoint_interval": 100000, **task.settings},
            "behaviors": {},
        }
        simple_envs.GROUP_REACH_ENVS.clear()
        started = time.perf_counter()
        controller = TrainerController(build_run_options(config, {}, "bench"))
        controller.start_learning()
        seconds = time.perf_counter() - started
        if simple_envs.GROUP_REACH_ENVS:
            returns = list(simple_envs.GROUP_REACH_ENVS[-1].final_rewards)
        else:
            returns = list(controller.managers[task.behavior].recent_rewards)
        last5 = float(np.mean(returns[-5:])) if len(returns) >= 5 else float("-inf")
        queue.put((int(controller.trainers[task.behavior].step), seconds, last5))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--only", default="", help="run the tasks whose name contains this")
    args = parser.parse_args()
    import os

    import torch

    print(f"cpus {os.cpu_count()}, torch {torch.__version__}, load average {os.getloadavg()[0]:.1f} at the start")
    print("| trainer, option | task | steps (median) | seconds (median) | solved |")
    print("|---|---|---|---|---|")
    ctx = mp.get_context("spawn")
    for task in _tasks():
        if args.only not in task.name:
            continue
        results = []
        for seed in args.seeds:
            queue = ctx.Queue()
            proc = ctx.Process(target=_run, args=(task, seed, queue))
            proc.start()
            results.append(queue.get(timeout=900))
            proc.join(timeout=60)
        steps = statistics.median(r[0] for r in results)
        seconds = statistics.median(r[1] for r in results)
        solved = sum(r[2] > task.threshold for r in results)
        print(f"| {task.name} | {task.env} | {steps:.0f} | {seconds:.1f} | {solved}/{len(results)} |", flush=True)


if __name__ == "__main__":
    main()
