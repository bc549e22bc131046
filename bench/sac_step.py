"""Milliseconds per SAC gradient step (``SACTrainer.update``), no environment.

Builds the SAC trainer of a config's behavior for a Pendulum-like spec (3 floats observed, one
continuous action, or --obs/--actions), fills its replay buffer with random 200-step
trajectories, then times bursts of ``--steps`` gradient steps through ``update()`` (sampling,
losses, the three optimizers, the soft update and the stats, as in a run), ``--repeats`` times,
and prints each burst's ms per step (wall-clock, and CPU time of the process: steadier on a
shared machine) and their medians. ``--profile`` prints cProfile's top
functions for one more burst.

    PYTHONPATH=. python bench/sac_step.py [--config config/sac/Pendulum.yaml] [--steps 200] [--repeats 7] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
from typing import Optional

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--config", default=os.path.join(ROOT, "config", "sac", "Pendulum.yaml"))
    p.add_argument("--behavior", default="Pendulum")
    p.add_argument("--obs", type=int, default=3)
    p.add_argument("--actions", type=int, default=1)
    p.add_argument("--steps", type=int, default=200, help="gradient steps per timed burst")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, help="torch threads (default: what arl-learn sets)")
    p.add_argument("--profile", action="store_true")
    args = p.parse_args(argv)

    import torch
    from mlagents_envs.base_env import ActionSpec, BehaviorSpec

    from ml_arl.config_file import load_config_file
    from ml_arl.messages import Trajectory
    from ml_arl.run.controller import set_torch_threads
    from ml_arl.settings import build_run_options
    from ml_arl.stats import StatsReporter
    from ml_arl.trainers.sac import SACTrainer

    set_torch_threads()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    options = build_run_options(load_config_file(args.config)[0], {}, args.config)
    settings = options.behaviors[args.behavior]
    from ml_arl.envs.games.builtin import vector_obs_spec

    spec = BehaviorSpec([vector_obs_spec(args.obs)], ActionSpec(args.actions, ()))
    trainer = SACTrainer(args.behavior, settings, spec, StatsReporter(args.behavior, []), None, torch.device("cpu"))
    rng = np.random.default_rng(0)
    n = 200
    for k in range(25):  # 5000 experiences
        trainer.add_experience(Trajectory(
            args.behavior, f"0-{k}", [rng.standard_normal((n, args.obs)).astype(np.float32)],
            [rng.standard_normal(args.obs).astype(np.float32)],
            np.tanh(rng.standard_normal((n, args.actions))).astype(np.float32), np.zeros((n, 0), np.int32), None,
            np.zeros(n, np.float32), rng.standard_normal(n).astype(np.float32), np.zeros(n, np.float32), 0,
            True, True, 0,
        ))
    trainer.step = len(trainer.replay)
    spu = trainer.hp.steps_per_update

    def burst() -> tuple[float, float]:
        trainer.step += int(args.steps * spu)
        start, start_cpu = time.perf_counter(), time.process_time()
        before = trainer.update_steps
        trainer.update()
        taken = max(trainer.update_steps - before, 1)
        return (time.perf_counter() - start) * 1000.0 / taken, (time.process_time() - start_cpu) * 1000.0 / taken

    burst()  # warm-up
    wall, cpu = zip(*(burst() for _ in range(args.repeats)))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {args.config}: batch {trainer.hp.batch_size}, "
          f"{settings.network_settings.num_layers} x {settings.network_settings.hidden_units} {settings.network_settings.activation}")
    print("ms per gradient step, wall: " + " ".join(f"{t:.2f}" for t in wall) + f"; median {statistics.median(wall):.2f}")
    print("ms per gradient step, CPU:  " + " ".join(f"{t:.2f}" for t in cpu) + f"; median {statistics.median(cpu):.2f}")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        burst()
        prof.disable()
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
