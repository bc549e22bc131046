"""Environment steps per second of the acting pipeline, next to the env's own limit.

Workload: builtin:Trivial (8 floats observed, 2 continuous actions, 4 agents per env, episodes
of 100 steps). The limit is the same env stepped in one process with random actions in a tight
loop. The pipeline is what a training run does minus the updates: worker processes step their
env with the policy's actor (default network: 2 x 128), assemble trajectories (time_horizon 64),
ship them to the main process, which routes them through each behavior's AgentManagerQueue to a
trainer that consumes them. Printed: steps/s and the ratio to the limit, medians of --repeats.

    python bench/speed/pipeline.py [--seconds 5] [--repeats 3] [--workers 1 2 4 8]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import numpy as np
import torch

from ml_arl.envs.backends.env_manager import EnvManager
from ml_arl.envs.backends.inprocess_env_manager import InProcessEnvManager
from ml_arl.envs.backends.subprocess_env_manager import SubprocessEnvManager
from ml_arl.envs.games.builtin import Trivial
from ml_arl.envs.sources import resolve_env
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import EnvSettings, TrainerSettings
from ml_arl.trainers.ppo.trainer import PPOTrainer
from ml_arl.training.router import AgentManager, policy_message


def limit_steps_per_second(seconds: float) -> float:
    env = Trivial(n_agents=4, max_episode_steps=100, seed=0)
    env.reset()
    spec = env.behavior_specs["Trivial"]
    steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(100):
            decision, _terminal = env.get_steps("Trivial")
            env.set_actions("Trivial", spec.action_spec.random_action(len(decision)))
            env.step()
        steps += 100
    return steps / (time.perf_counter() - t0)


def measure_pipeline(manager: EnvManager, behavior: str, seconds: float) -> float:
    """Env steps/s of ``manager``'s workers acting for ``behavior`` (a PPO actor, default network),
    their trajectories routed through an AgentManager to a trainer that takes them without
    updating, for ``seconds`` after a warm-up; closes ``manager``."""
    trainer_settings = TrainerSettings()
    try:
        specs = manager.start()
        stats = StatsReporter(behavior, [])
        trainer = PPOTrainer(behavior, trainer_settings, specs[behavior], stats, None, torch.device("cpu"), training=False)
        agent_manager = AgentManager(behavior, stats, threaded=False, stop_event=threading.Event())
        trainer.subscribe_trajectory_queue(agent_manager.trajectory_queue)
        manager.set_policy(behavior, policy_message(trainer.policy_snapshot(), trainer_settings, None, collect=True))
        for _ in range(5):  # warm up: workers started, first batches through
            manager.step()
        steps = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for batch in manager.step():
                steps += batch.env_steps
                agent_manager.add_trajectories(batch.trajectories, lambda: None)
                agent_manager.record_episodes(batch.episodes)
            trainer.advance()
        return steps / (time.perf_counter() - t0)
    finally:
        manager.close()


def pipeline_steps_per_second(n_workers: int, seconds: float, inprocess: bool = False) -> float:
    settings = EnvSettings(num_envs=n_workers, env_path="builtin:Trivial", timeout_wait=60)
    factory = resolve_env("builtin:Trivial")
    manager: EnvManager = (InProcessEnvManager if inprocess else SubprocessEnvManager)(factory, settings, 0)
    return measure_pipeline(manager, "Trivial", seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    args = parser.parse_args()
    torch.set_num_threads(1)
    np.random.seed(0)

    rows: list[tuple[str, float, float]] = []
    limits = [limit_steps_per_second(args.seconds) for _ in range(args.repeats)]
    limit = statistics.median(limits)
    print(f"limit (one process, random actions): {limit:,.0f} env steps/s  (runs: {', '.join(f'{x:,.0f}' for x in limits)})")
    inproc = statistics.median(pipeline_steps_per_second(1, args.seconds, inprocess=True) for _ in range(args.repeats))
    rows.append(("in-process, 1 env", inproc, inproc / limit))
    for n in args.workers:
        runs = [pipeline_steps_per_second(n, args.seconds) for _ in range(args.repeats)]
        med = statistics.median(runs)
        rows.append((f"subprocess, N={n}", med, med / limit))
    print(f"{'pipeline':<20} {'env steps/s':>12} {'of limit':>9}")
    for name, sps, ratio in rows:
        print(f"{name:<20} {sps:>12,.0f} {ratio:>8.0%}")


if __name__ == "__main__":
    main()
