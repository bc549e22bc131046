"""Milliseconds per SAC gradient step (``SACTrainer.update``), no environment.

Builds the SAC trainer of a config's behavior for a Pendulum-like spec (3 floats observed, one
continuous action, or --obs/--actions), fills its replay buffer with random 200-step
trajectories, then times bursts of ``--steps`` gradient steps through ``update()`` (sampling,
losses, the three optimizers, the soft update and the stats, as in a run), ``--repeats`` times,
and prints each burst's ms per step (wall-clock, and CPU time of the process: steadier on a
shared machine) and their medians. ``--profile`` prints cProfile's top
functions for one more burst.

``--sb3`` times Stable-Baselines3's SAC in the same process, bursts interleaved with ours: the same
network (``net_arch`` of the config's layers and units, its activation: swish is torch's SiLU),
batch size, learning rate, tau and gamma, one gradient step per ``SAC.train`` step, a replay
buffer filled with as many random transitions, as many torch threads. It prints both sides'
medians and the ratio ours / SB3 (``pip install -e ".[bench]"`` installs SB3).

    PYTHONPATH=. python bench/speed/sac_step.py [--config config/sac/Pendulum.yaml] [--steps 200] [--repeats 7] [--profile] [--sb3]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, Optional

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
    p.add_argument("--sb3", action="store_true", help="Stable-Baselines3's SAC on the same network, bursts interleaved")
    args = p.parse_args(argv)

    import torch
    from mlagents_envs.base_env import ActionSpec, BehaviorSpec

    from ml_arl.core.experience import Trajectory
    from ml_arl.results.summary_writers import StatsReporter
    from ml_arl.settings import build_run_options
    from ml_arl.settings.config_file import load_config_file
    from ml_arl.trainers.sac.trainer import SACTrainer
    from ml_arl.training.controller import set_torch_threads

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
    # 5000 experiences, or enough for buffer_init_steps and a batch (Hopper-sac.yaml starts after 10,000)
    fill = max(5000, int(trainer.hp.buffer_init_steps) + int(trainer.hp.batch_size))
    for k in range(-(-fill // n)):
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

    sb3 = _sb3_burst(args, settings, trainer.hp, len(trainer.replay)) if args.sb3 else None
    burst()  # warm-up
    if sb3 is not None:
        sb3()
    rounds = []
    for _ in range(args.repeats):  # interleaved: the machine's load falls on both sides alike
        rounds.append((burst(), sb3() if sb3 is not None else None))
    wall, cpu = zip(*(r[0] for r in rounds))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {args.config}: batch {trainer.hp.batch_size}, "
          f"{settings.network_settings.num_layers} x {settings.network_settings.hidden_units} {settings.network_settings.activation}")
    print("ms per gradient step, wall: " + " ".join(f"{t:.2f}" for t in wall) + f"; median {statistics.median(wall):.2f}")
    print("ms per gradient step, CPU:  " + " ".join(f"{t:.2f}" for t in cpu) + f"; median {statistics.median(cpu):.2f}")
    if sb3 is not None:
        import stable_baselines3

        sb_wall, sb_cpu = zip(*(r[1] for r in rounds if r[1] is not None))
        print(f"Stable-Baselines3 {stable_baselines3.__version__} SAC, the same network, batch, threads:")
        print("ms per gradient step, wall: " + " ".join(f"{t:.2f}" for t in sb_wall) + f"; median {statistics.median(sb_wall):.2f}")
        print("ms per gradient step, CPU:  " + " ".join(f"{t:.2f}" for t in sb_cpu) + f"; median {statistics.median(sb_cpu):.2f}")
        print(f"ours / SB3: wall {statistics.median(wall) / statistics.median(sb_wall):.2f}, "
              f"CPU {statistics.median(cpu) / statistics.median(sb_cpu):.2f}")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        burst()
        prof.disable()
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(30)
    return 0


def _sb3_burst(args: argparse.Namespace, settings: Any, hp: Any, transitions: int) -> Callable[[], tuple[float, float]]:
    """A timer of ``args.steps`` gradient steps of Stable-Baselines3's SAC with our config's network,
    batch, learning rate, tau and gamma, on a buffer of ``transitions`` random transitions."""
    import gymnasium
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.logger import Logger

    activations = {"swish": torch.nn.SiLU, "tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}
    net = settings.network_settings
    gamma = settings.reward_signals["extrinsic"].gamma if "extrinsic" in settings.reward_signals else 0.99

    class Spaces(gymnasium.Env):  # type: ignore[misc]
        observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (args.obs,), np.float32)
        action_space = gymnasium.spaces.Box(-1.0, 1.0, (args.actions,), np.float32)

    model = SAC("MlpPolicy", Spaces(), learning_rate=float(hp.learning_rate), buffer_size=max(transitions, 1000),
                batch_size=int(hp.batch_size), tau=float(hp.tau), gamma=float(gamma), learning_starts=0,
                policy_kwargs={"net_arch": [net.hidden_units] * net.num_layers,
                               "activation_fn": activations.get(str(net.activation), torch.nn.ReLU)},
                device="cpu", seed=0)
    model.set_logger(Logger(folder=None, output_formats=[]))
    rng = np.random.default_rng(1)
    for _ in range(transitions):
        model.replay_buffer.add(
            rng.standard_normal((1, args.obs)).astype(np.float32), rng.standard_normal((1, args.obs)).astype(np.float32),
            np.tanh(rng.standard_normal((1, args.actions))).astype(np.float32), rng.standard_normal(1).astype(np.float32),
            np.zeros(1, np.float32), [{}],
        )

    def burst() -> tuple[float, float]:
        start, start_cpu = time.perf_counter(), time.process_time()
        model.train(gradient_steps=args.steps, batch_size=int(hp.batch_size))
        return (time.perf_counter() - start) * 1000.0 / args.steps, (time.process_time() - start_cpu) * 1000.0 / args.steps

    return burst


if __name__ == "__main__":
    sys.exit(main())
