"""Environment steps per second of the acting pipeline, next to the env's own limit.

Workload: builtin:Trivial (8 floats observed, 2 continuous actions, 4 agents per env, episodes
of 100 steps). The limit is the same env stepped in one process with random actions in a tight
loop. The pipeline is what a training run does minus the updates: worker processes step their
env with the policy's actor (default network: 2 x 128), assemble trajectories (time_horizon 64),
ship them to the main process, which routes them through each behavior's AgentManagerQueue to a
trainer that consumes them. Printed: steps/s and the ratio to the limit, medians of --repeats.

``--visual``: the same for ``Images`` below (an 84x84x3 float image per agent, 16 agents, 2
continuous actions), the actor with the default network's simple encoder; each worker count runs
twice, observations through shared memory (the default) and pickled
(``env_settings.observation_memory_mb: 0``), and the copies each observation takes on its way to
the trainer's batch are printed beside them (ml_arl.acting.observation_slots).

``--breakdown``: where an environment step's CPU goes on Trivial: one worker's loop
(``EnvRunner.run`` in this process) whole, with the AgentProcessor a no-op, and with the muscle
a no-op too, in microseconds per step; the whole loop again with two copies running at once in
processes of their own (what two workers get from the machine's cores); and the main process's
CPU per step with 2 workers.

    python bench/speed/pipeline.py [--seconds 5] [--repeats 3] [--workers 1 2 4 8] [--visual | --breakdown]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

import numpy as np
import torch
from mlagents_envs.base_env import (
    ActionSpec,
    ActionTuple,
    BehaviorSpec,
    DimensionProperty,
    ObservationSpec,
    ObservationType,
)

from ml_arl.acting.env_runner import EnvRunner
from ml_arl.core.env_factory import EnvFactory
from ml_arl.envs.backends.env_manager import EnvManager
from ml_arl.envs.backends.inprocess_env_manager import InProcessEnvManager
from ml_arl.envs.backends.subprocess_env_manager import SubprocessEnvManager
from ml_arl.envs.games.builtin import Trivial, _VectorBatchEnv
from ml_arl.envs.sources import resolve_env
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import EnvSettings, TrainerSettings
from ml_arl.trainers.ppo.trainer import PPOTrainer
from ml_arl.training.policy_message import policy_message
from ml_arl.training.router import AgentManager

IMAGE = (84, 84, 3)
# copies of each observation between the environment's array and the trainer's batch
COPIES = {
    "shared": "2: into its slot (worker), into the batch (trainer)",
    "pickled": "4: into its slot, pickled, unpickled, into the batch",
}


class Images(_VectorBatchEnv):
    """An 84x84x3 float image per agent (a fixed picture, brightened by the agent's position),
    2 continuous actions, episodes of 100 steps: the copies of a visual task at little cost of its own."""

    behavior_name = "Images"

    def __init__(self, n_agents: int = 16, max_episode_steps: int = 100, seed: int = 0):
        super().__init__(ActionSpec(2, ()), 1, n_agents, max_episode_steps, seed)
        picture = ObservationSpec(IMAGE, (DimensionProperty.NONE,) * 3, ObservationType.DEFAULT, "camera")
        self._spec = BehaviorSpec([picture], ActionSpec(2, ()))
        self.picture = self.rng.random((1, *IMAGE), dtype=np.float32) * 0.5
        self.position = np.zeros(n_agents, np.float32)

    def _reset_agents(self, idx: np.ndarray) -> None:
        self.position[idx] = 0.0

    def _observe(self) -> np.ndarray:
        return self.picture + np.clip(self.position, 0.0, 0.5)[:, None, None, None]  # a fresh array, as an env gives

    def _advance(self, actions: ActionTuple) -> tuple[np.ndarray, np.ndarray]:
        self.position += 0.01 * actions.continuous[:, 0]
        return -np.abs(self.position - 0.25), np.zeros(self.n_agents, dtype=bool)


def limit_steps_per_second(seconds: float, visual: bool = False) -> float:
    env: _VectorBatchEnv = Images() if visual else Trivial(n_agents=4, max_episode_steps=100, seed=0)
    env.reset()
    spec = env.behavior_specs[env.behavior_name]
    steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(100):
            decision, _terminal = env.get_steps(env.behavior_name)
            env.set_actions(env.behavior_name, spec.action_spec.random_action(len(decision)))
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


def pipeline_steps_per_second(n_workers: int, seconds: float, inprocess: bool = False, visual: bool = False,
                              shared: bool = True) -> float:
    settings = EnvSettings(num_envs=n_workers, env_path="builtin:Trivial", timeout_wait=60,
                           observation_memory_mb=1024 if shared else 0)
    factory = EnvFactory("bench Images", Images) if visual else resolve_env("builtin:Trivial")
    manager: EnvManager = (InProcessEnvManager if inprocess else SubprocessEnvManager)(factory, settings, 0)
    return measure_pipeline(manager, "Images" if visual else "Trivial", seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--visual", action="store_true", help="the Images task, shared and pickled observations")
    parser.add_argument("--breakdown", action="store_true", help="microseconds per step: worker loop parts, main process")
    args = parser.parse_args()
    torch.set_num_threads(1)
    np.random.seed(0)
    if args.visual:
        visual(args)
        return
    if args.breakdown:
        breakdown(args)
        return

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


def worker_loop_us(seconds: float, without: str = "") -> float:
    """Microseconds per step of one worker's loop on Trivial (``EnvRunner.run``, 16 steps a call),
    in this process; ``without``: "processor" or "muscle" (and processor) replaced by no-ops."""
    env = Trivial(n_agents=4, max_episode_steps=100, seed=0)
    runner = EnvRunner(env, 0, 0)
    settings = TrainerSettings()
    trainer = PPOTrainer("Trivial", settings, runner.specs["Trivial"], StatsReporter("Trivial", []), None,
                         torch.device("cpu"), training=False)
    runner.set_policy("Trivial", policy_message(trainer.policy_snapshot(), settings, None, collect=True))
    if without:
        for proc in runner.processors.values():
            proc.add_experiences = lambda *a: None  # type: ignore[method-assign]
    if without == "muscle":
        muscle = runner.muscles["Trivial"]
        info = muscle.act([np.zeros((4, 8), np.float32)], None)
        muscle.act = lambda *a, **k: info  # type: ignore[method-assign]
    runner.run(100)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        steps += runner.run(16).env_steps
    return 1e6 * (time.perf_counter() - t0) / steps


LOOP_CODE = "from bench.speed.pipeline import worker_loop_us; print(worker_loop_us({seconds}))"


def two_at_once_us(seconds: float) -> float:
    """``worker_loop_us`` in two processes of their own at the same time (two workers' loops on
    the machine's cores): the slower one's microseconds per step."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cmd = [sys.executable, "-c", LOOP_CODE.format(seconds=seconds)]
    procs = [subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [proc.communicate(timeout=120 + 4 * seconds)[0] for proc in procs]
    return max(float(out.strip().splitlines()[-1]) for out in outs)


def breakdown(args: argparse.Namespace) -> None:
    rows: dict[str, list[float]] = {"whole": [], "processor a no-op": [], "muscle and processor no-ops": []}
    main_us, together = [], []
    for _ in range(args.repeats):
        together.append(two_at_once_us(args.seconds))
        rows["whole"].append(worker_loop_us(args.seconds))
        rows["processor a no-op"].append(worker_loop_us(args.seconds, "processor"))
        rows["muscle and processor no-ops"].append(worker_loop_us(args.seconds, "muscle"))
        cpu0, wall0 = time.process_time(), time.perf_counter()
        rate = pipeline_steps_per_second(2, args.seconds)
        main_us.append(1e6 * (time.process_time() - cpu0) / (rate * (time.perf_counter() - wall0)))
    print("one worker's loop on Trivial, us per env step (medians):")
    for name, values in rows.items():
        print(f"  {name:<30} {statistics.median(values):6.1f}")
    whole, no_proc, neither = (statistics.median(v) for v in rows.values())
    print(f"  so: AgentProcessor {whole - no_proc:.1f}, muscle {no_proc - neither:.1f}, environment and loop {neither:.1f}")
    print(f"  whole, two loops at once in processes of their own (the slower): {statistics.median(together):.1f}"
          f" ({statistics.median(together) / whole:.2f}x alone)")
    print(f"main process CPU per env step with 2 workers: {statistics.median(main_us):.1f} us")


def visual(args: argparse.Namespace) -> None:
    """Each worker count with shared and with pickled observations, interleaved per repeat."""
    limits = [limit_steps_per_second(args.seconds, visual=True) for _ in range(args.repeats)]
    limit = statistics.median(limits)
    print(f"limit (Images stepped alone, random actions): {limit:,.0f} env steps/s  (runs: {', '.join(f'{x:,.0f}' for x in limits)})")
    print(f"{'pipeline':<26} {'env steps/s':>12} {'of limit':>9}  copies per observation")
    for n in args.workers:
        runs: dict[str, list[float]] = {"shared": [], "pickled": []}
        for _ in range(args.repeats):
            for how in runs:
                runs[how].append(pipeline_steps_per_second(n, args.seconds, visual=True, shared=how == "shared"))
        for how, values in runs.items():
            med = statistics.median(values)
            print(f"{f'subprocess, N={n}, {how}':<26} {med:>12,.0f} {med / limit:>8.0%}  {COPIES[how]}")
        print(f"{'':<26} shared / pickled: {statistics.median(runs['shared']) / statistics.median(runs['pickled']):.2f}x")


if __name__ == "__main__":
    main()
