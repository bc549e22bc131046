"""Environment steps per second of the full acting pipeline: subprocess workers vs Ray actors.

Workload and pipeline as bench/speed/pipeline.py (builtin:Trivial, 4 agents per env, the default 2 x
128 actor acting in the workers, trajectories of 64 steps shipped to the main process and
routed through the AgentManagerQueue to a PPO trainer that consumes them, no updates), with N
workers on this machine, on the subprocess backend and on the Ray backend (a local Ray instance
on loopback, started once before the Ray runs; its start is not timed, each run's actor start is
not timed either). Printed: the median of --repeats runs of --seconds each, and Ray / subprocess.

    python bench/speed/ray_scale.py [--seconds 4] [--repeats 3] [--workers 1 2 4] [--steps-per-message 16]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ml_arl.envs.backends.env_manager import EnvManager
from ml_arl.envs.backends.ray_env_manager import RayEnvManager, connect
from ml_arl.envs.backends.subprocess_env_manager import SubprocessEnvManager
from ml_arl.envs.sources import resolve_env
from ml_arl.settings import EnvSettings

if Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:  # run as a script:
    sys.path[0] = str(Path(__file__).resolve().parents[2])  # import bench.* from the repository root, not from this folder

from bench.speed.pipeline import measure_pipeline  # noqa: E402


def steps_per_second(backend: str, n_workers: int, seconds: float, steps_per_message: int = 16) -> float:
    """``steps_per_message`` 0: not set (each backend's default: 16 steps per message for subprocess
    workers, as many as make a call last about 10 ms for Ray actors)."""
    chosen = {"steps_per_message": steps_per_message} if steps_per_message else {}
    settings = EnvSettings(num_envs=n_workers, env_path="builtin:Trivial", timeout_wait=120, manager=backend, **chosen)
    factory = resolve_env("builtin:Trivial")
    manager: EnvManager = (RayEnvManager if backend == "ray" else SubprocessEnvManager)(factory, settings, 0)
    return measure_pipeline(manager, "Trivial", seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--steps-per-message", type=int, default=16, help="env steps per worker call, both backends (0: each backend's default)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    np.random.seed(0)
    t0 = time.perf_counter()
    connect(None, max(args.workers))  # a local Ray instance on loopback, for every Ray run
    print(f"local Ray instance started in {time.perf_counter() - t0:.1f} s (not counted); {os.cpu_count()} cores")
    print(f"{'N':>3} {'subprocess steps/s':>19} {'Ray steps/s':>12} {'Ray/subprocess':>15}")
    for n in args.workers:
        k = args.steps_per_message
        sub = statistics.median(steps_per_second("subprocess", n, args.seconds, k) for _ in range(args.repeats))
        on_ray = statistics.median(steps_per_second("ray", n, args.seconds, k) for _ in range(args.repeats))
        print(f"{n:>3} {sub:>19,.0f} {on_ray:>12,.0f} {on_ray / sub:>14.2f}x", flush=True)


if __name__ == "__main__":
    main()
