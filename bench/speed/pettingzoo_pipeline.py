"""Environment steps per second of MPE2 simple_spread (3 agents, 25-step episodes) through
ml_arl's subprocess acting pipeline, next to the env stepped alone.

Alone: ``mpe2.simple_spread_v3.parallel_env()`` stepped in one process with random actions in a
tight loop (resets included), no adapter. Adapter: the same through ml_arl's PettingZoo BaseEnv
(ml_arl.envs.adapters.pettingzoo_env), random actions, one process. Pipeline: what a training run does
minus the updates: worker processes step the env through the adapter with the policy's actor
(default network: 2 x 128), assemble trajectories, ship them to the main process, which routes
them through the behavior's AgentManagerQueue to a trainer that consumes them. Printed: env
steps/s (one step moves all 3 agents) and the ratio to the env alone, medians of --repeats
rounds (each round runs every measurement once; ratios are taken within a round).

    python bench/speed/pettingzoo_pipeline.py [--seconds 5] [--repeats 5] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ml_arl.envs.adapters.pettingzoo_env import make_pettingzoo_env
from ml_arl.envs.backends.subprocess_env_manager import SubprocessEnvManager
from ml_arl.envs.sources import resolve_env
from ml_arl.settings import EnvSettings

if Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:  # run as a script:
    sys.path[0] = str(Path(__file__).resolve().parents[2])  # import bench.* from the repository root, not from this folder

from bench.speed.pipeline import measure_pipeline  # noqa: E402

SOURCE = "pettingzoo:mpe2.simple_spread_v3"
BEHAVIOR = "agent"


def alone_steps_per_second(seconds: float) -> float:
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env()
    env.reset(seed=0)
    spaces = {a: env.action_space(a) for a in env.possible_agents}
    rng = np.random.default_rng(0)
    steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(100):
            env.step({a: int(rng.integers(spaces[a].n)) for a in env.agents})
            if not env.agents:
                env.reset()
        steps += 100
    return steps / (time.perf_counter() - t0)


def adapter_steps_per_second(seconds: float) -> float:
    env = make_pettingzoo_env("mpe2.simple_spread_v3", seed=0)
    env.reset()
    spec = env.behavior_specs[BEHAVIOR]
    steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(100):
            decision, _terminal = env.get_steps(BEHAVIOR)
            env.set_actions(BEHAVIOR, spec.action_spec.random_action(len(decision)))
            env.step()
        steps += 100
    return steps / (time.perf_counter() - t0)


def pipeline_steps_per_second(n_workers: int, seconds: float) -> float:
    settings = EnvSettings(num_envs=n_workers, env_path=SOURCE, timeout_wait=60)
    manager = SubprocessEnvManager(resolve_env(SOURCE), settings, 0)
    return measure_pipeline(manager, BEHAVIOR, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, nargs="+", default=[1])
    args = parser.parse_args()
    torch.set_num_threads(1)

    # one round = every measurement once, back to back, so that a busy machine slows a round's
    # measurements alike; each ratio is taken within its round, then the median over rounds
    names = ["alone", "adapter, 1 process", *(f"subprocess, N={n}" for n in args.workers)]
    runs: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(args.repeats):
        runs["alone"].append(alone_steps_per_second(args.seconds))
        runs["adapter, 1 process"].append(adapter_steps_per_second(args.seconds))
        for n in args.workers:
            runs[f"subprocess, N={n}"].append(pipeline_steps_per_second(n, args.seconds))
    alone = runs["alone"]
    print(f"simple_spread alone (random actions): {statistics.median(alone):,.0f} env steps/s "
          f"(runs: {', '.join(f'{x:,.0f}' for x in alone)})")
    print(f"{'pipeline':<20} {'env steps/s':>12} {'of alone':>9}  runs (ratio per round)")
    for name in names[1:]:
        ratios = [x / a for x, a in zip(runs[name], alone)]
        print(f"{name:<20} {statistics.median(runs[name]):>12,.0f} {statistics.median(ratios):>8.0%}  "
              f"{', '.join(f'{x:,.0f} ({r:.0%})' for x, r in zip(runs[name], ratios))}")


if __name__ == "__main__":
    main()
