"""Steps and wall-clock to the success threshold, per trainer type and option (docs/benchmarks.md's
learning table): each learning task of the test suite, run for several seeds, one run at a time,
each in a fresh process.

A run trains in-process (``manager: inprocess``) with the test's hyperparameters and ends once
solved: a callback stops it (ml_arl.training.callbacks.StopOnReward; the run saves, as for Ctrl-C) when the
last 20 episode returns (POCA: the last 20 agents' successes) average above the task's
``solved_at``; otherwise it trains on to the test's ``max_steps``. "steps" is the trainer's step count at the end, "seconds" the wall-clock
of the run from building the controller to its return (imports excluded). A run counts as
solved when the mean of its last 5 returns is above the test's threshold (ML-Agents' criterion).

    python bench/learning/learning_table.py                 # every task, seeds 0 1 2
    python bench/learning/learning_table.py --only sac      # tasks whose name contains "sac"
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:  # run as a script:
    sys.path[0] = str(ROOT)  # import bench.* and tests.* from the repository root, not from this folder
elif str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common.runner import Run, add_seeds_argument, run_grid  # noqa: E402

# the reward-signal tests' PPO and SAC settings (ML-Agents' test hyperparameters)
from tests.trainers.test_signals_learning import PPO, SAC  # noqa: E402

GOAL_REACH = "tests.support.simple_envs:goal_reach"


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
    # or the whole config from a test's own builder: ("tests.module:function", args after the results folder)
    builder: tuple[str, tuple[Any, ...]] = ("", ())
    demos: bool = False  # record the goal-reaching expert first; "DEMO" in settings stands for its folder


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
    for trainer, base in (("ppo", PPO), ("sac", SAC)):
        imitation = {"reward_signals": {"gail": {"encoding_size": 32, "demo_path": "DEMO"}},
                     "behavioral_cloning": {"demo_path": "DEMO", "steps": 1000}}
        tasks.append(Task(f"{trainer} + gail + behavioral_cloning", "GoalReach 1-D, demos recorded with --record-demo", GOAL_REACH,
                          ["continuous=1"], _merge(base, max_steps=500, **imitation), demos=True))
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
        tasks.append(Task(f"poca, {variant}", "GroupReach, groups of 2", "tests.support.simple_envs:group_reach",
                          [f"variant={variant}", "n_groups=4"], poca, behavior=behavior, solved_at=1.0))  # successes are +-1.06: every one of the last 20
    varlen_ppo = {"learning_rate": 3e-3, "learning_rate_schedule": "constant", "batch_size": 64, "buffer_size": 256, "beta": 1e-3}
    varlen_sac = {"learning_rate": 1e-3, "learning_rate_schedule": "constant", "batch_size": 16, "buffer_init_steps": 100,
                  "buffer_size": 5000, "tau": 0.01, "init_entcoef": 0.01, "steps_per_update": 2}
    small = {"num_layers": 1, "hidden_units": 32}
    entities = "EntityReach, goal among 1-4 entities"
    tasks += [
        Task("ppo, variable-length obs", entities, "", [], {}, behavior="EntityReach",
             builder=("tests.networks.test_varlen:_config", ("ppo", [], 6000, varlen_ppo, small)), solved_at=0.95),
        Task("sac, variable-length obs", entities + " (discrete)", "", [], {}, behavior="EntityReach",
             builder=("tests.networks.test_varlen:_config", ("sac", ["vectors=0", "continuous=0", "discrete=1"], 3000,
                                                     varlen_sac, {"num_layers": 1, "hidden_units": 16}))),
        Task("poca, variable-length obs", entities + " (group of 2)", "", [], {}, behavior="EntityReach",
             builder=("tests.networks.test_varlen:_config", ("poca", ["grouped=true", "n_agents=2"], 6000, varlen_ppo, small)), solved_at=0.95),
    ]
    sac_memory = {"learning_rate": 5.0e-3, "batch_size": 64, "buffer_size": 5000, "buffer_init_steps": 100, "tau": 0.01, "init_entcoef": 0.01}
    for kind in ("continuous=1", "discrete=1"):
        tasks.append(Task(f"sac + memory, {kind.split('=')[0]}", "GoalReach, goal shown 2 steps", "", [], {},
                          builder=("tests.trainers.test_memory:_memory_config", ("sac", kind, 2000, sac_memory))))
    tasks.append(Task("poca + memory", "GoalReach, goal shown 2 steps", "", [], {},
                      builder=("tests.trainers.test_memory:_memory_config",
                               ("poca", "continuous=1", 6000, {"learning_rate": 1.0e-3, "batch_size": 64, "buffer_size": 128}))))
    goal_ppo = {"learning_rate": 3e-3, "learning_rate_schedule": "constant", "batch_size": 64, "buffer_size": 256, "beta": 1e-3}
    for trainer, conditioning, actions, hyper, steps in (
        ("ppo", "hyper", ["continuous=1"], goal_ppo, 6000), ("ppo", "hyper", ["continuous=0", "discrete=1"], goal_ppo, 6000),
        ("ppo", "none", ["continuous=0", "discrete=1"], goal_ppo, 6000), ("sac", "hyper", ["continuous=1"], SAC["hyperparameters"], 2000),
    ):
        kind = "continuous" if actions == ["continuous=1"] else "discrete"
        tasks.append(Task(f"{trainer}, goal_conditioning_type {conditioning}, {kind}", "GoalReach, goal as GOAL_SIGNAL",
                          "tests.support.goal_envs:goal_signal_reach", actions,
                          {"trainer_type": trainer, "max_steps": steps, "hyperparameters": hyper,
                           "network_settings": {"num_layers": 2, "hidden_units": 16, "goal_conditioning_type": conditioning}},
                          solved_at=0.95))
    return tasks


def _record_expert(tmp: str) -> str:
    """The goal-reaching expert (tests.support.plugins) acting with --inference --record-demo: its .demo folder."""
    from ml_arl.settings import build_run_options
    from ml_arl.training.controller import TrainerController

    config = {
        "env_settings": {"env_path": GOAL_REACH, "env_args": ["continuous=1"], "manager": "inprocess", "seed": 7},
        "checkpoint_settings": {"results_dir": tmp, "run_id": "expert", "inference": True, "record_demo": f"{tmp}/demos"},
        "default_settings": {"trainer_type": "tests.support.plugins:GoalExpertTrainer", "max_steps": 600, "summary_freq": 100},
        "behaviors": {},
    }
    TrainerController(build_run_options(config, {}, "bench")).start_learning()
    return f"{tmp}/demos"


def _with_demos(value: Any, folder: str) -> Any:
    if isinstance(value, dict):
        return {k: _with_demos(v, folder) for k, v in value.items()}
    return folder if value == "DEMO" else value


def _config(task: Task, tmp: str, seed: int) -> dict[str, Any]:
    if task.builder[0]:
        import importlib

        module, name = task.builder[0].split(":")
        config: dict[str, Any] = getattr(importlib.import_module(module), name)(Path(tmp), *task.builder[1])
        config["env_settings"]["seed"] = seed + 1
        config["checkpoint_settings"] = {"results_dir": tmp, "run_id": "bench"}
        config["default_settings"].update({"summary_freq": 1000, "checkpoint_interval": 100000})
        return config
    return {
        "env_settings": {"env_path": task.env_path, "env_args": list(task.env_args), "manager": "inprocess",
                         "seed": seed + 1},
        "checkpoint_settings": {"results_dir": tmp, "run_id": "bench"},
        "default_settings": {"summary_freq": 1000, "checkpoint_interval": 100000,
                             **(_with_demos(task.settings, _record_expert(tmp)) if task.demos else task.settings)},
        "behaviors": {},
    }


def _run(run: Run) -> tuple[int, float, float]:
    """One run (the runner starts it in a fresh process): (steps, seconds, last-5 mean)."""
    import numpy as np

    from ml_arl.settings import build_run_options
    from ml_arl.training.controller import TrainerController
    from tests.support import simple_envs

    task: Task = run.task
    with tempfile.TemporaryDirectory() as tmp:
        config = _config(task, tmp, run.seed)
        simple_envs.GROUP_REACH_ENVS.clear()
        grouped = config["env_settings"]["env_path"].endswith(":group_reach")
        stop = (simple_envs.stop_when_groups_solved(task.solved_at) if grouped
                else simple_envs.stop_when_solved(task.solved_at, task.behavior))
        started = time.perf_counter()
        controller = TrainerController(build_run_options(config, {}, "bench"), callbacks=stop)
        controller.start_learning()
        seconds = time.perf_counter() - started
        if simple_envs.GROUP_REACH_ENVS:
            returns = list(simple_envs.GROUP_REACH_ENVS[-1].final_rewards)
        else:
            returns = list(controller.managers[task.behavior].recent_rewards)
        last5 = float(np.mean(returns[-5:])) if len(returns) >= 5 else float("-inf")
        return int(controller.trainers[task.behavior].step), seconds, last5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_seeds_argument(parser, [0, 1, 2])
    parser.add_argument("--only", default="", help="run the tasks whose name contains this")
    args = parser.parse_args()
    import os

    import torch

    print(f"cpus {os.cpu_count()}, torch {torch.__version__}, load average {os.getloadavg()[0]:.1f} at the start")
    print("| trainer, option | task | steps (median) | seconds (median) | solved |")
    print("|---|---|---|---|---|")
    tasks = [task for task in _tasks() if args.only in task.name]
    done: dict[str, list[tuple[int, float, float]]] = {task.name: [] for task in tasks}

    def report(run: Run, result: tuple[int, float, float]) -> None:  # a task's row once its last seed is in
        task: Task = run.task
        results = done[task.name]
        results.append(result)
        if len(results) < len(args.seeds):
            return
        steps = statistics.median(r[0] for r in results)
        seconds = statistics.median(r[1] for r in results)
        solved = sum(r[2] > task.threshold for r in results)
        print(f"| {task.name} | {task.env} | {steps:.0f} | {seconds:.1f} | {solved}/{len(results)} |", flush=True)

    run_grid(_run, tasks=tasks, seeds=args.seeds, fresh_process=True, timeout=900, on_result=report)


if __name__ == "__main__":
    main()
