"""PPO's update with one learner and with ``--num-learners 2`` (issue 50), side by side in one run.

For each buffer size, the same trajectories (17 floats observed, 6 continuous actions: Hopper's
sizes; the network 2 x 256) go to a PPOTrainer alone and to one whose LearnerGroup has a second
learner process (gloo over a file store); each update (3 epochs, minibatches of buffer / 4 rows,
gradient clipping on) is timed from ``update()``'s call to its return, medians of ``--updates``
updates after one warm-up. Printed: ms per update, the 2-learner time over the 1-learner time,
the bytes all-reduced per update (float32 gradients of every parameter, once per minibatch) and
the bytes scattered to the second learner (its shard, rank 0's weights and Adam state).

Every learner runs one torch thread (what a run on 2 cores gives its one trainer): two learners
use both cores for the gradient passes, while rank 0 alone computes the values and advantages
over the whole buffer, pickles and scatters the shard, and every minibatch waits for the
all-reduce. Where the ratio is above 1 it is the group's overhead.

    python bench/speed/learners.py [--buffers 2048 16384] [--updates 5]
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import sys
import tempfile
import time

if os.path.realpath(sys.path[0] or os.curdir) == os.path.dirname(os.path.realpath(__file__)):  # run as a script:
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # bench.* from the root

import numpy as np  # noqa: E402
import torch  # noqa: E402
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, ObservationSpec, ObservationType  # noqa: E402
from mlagents_envs.base_env import DimensionProperty as D  # noqa: E402

from ml_arl.core.experience import Trajectory  # noqa: E402
from ml_arl.results.summary_writers import StatsReporter  # noqa: E402
from ml_arl.settings import build_run_options  # noqa: E402
from ml_arl.trainers.learner_group import LearnerGroup, spec_of, states_of  # noqa: E402
from ml_arl.trainers.learner_protocol import ShardMessage  # noqa: E402
from ml_arl.trainers.ppo.trainer import PPOTrainer  # noqa: E402
from ml_arl.trainers.tensor_batches import to_numpy  # noqa: E402

OBS, ACT, STEPS = 17, 6, 64
SPEC = BehaviorSpec([ObservationSpec((OBS,), (D.NONE,), ObservationType.DEFAULT, "v")], ActionSpec(ACT, ()))
EPOCHS = 3


def trajectories(rows: int, seed: int) -> list[Trajectory]:
    rng = np.random.default_rng(seed)
    return [
        Trajectory(
            behavior="B", agent_id=f"0-{k}", obs=[rng.normal(size=(STEPS, OBS)).astype(np.float32)],
            next_obs=[rng.normal(size=(OBS,)).astype(np.float32)], continuous=rng.normal(size=(STEPS, ACT)).astype(np.float32),
            discrete=np.zeros((STEPS, 0), np.int32), allowed=None, log_prob=rng.normal(-1.5, 0.3, size=(STEPS, ACT)).astype(np.float32),
            rewards=rng.normal(size=STEPS).astype(np.float32), group_rewards=np.zeros(STEPS, np.float32), group_id=0,
            done=k % 4 == 0, interrupted=False, policy_version=0,
        )
        for k in range(rows // STEPS)
    ]


def trainer(buffer: int) -> PPOTrainer:
    section = {"hyperparameters": {"batch_size": buffer // 4, "buffer_size": buffer, "num_epoch": EPOCHS, "max_grad_norm": 0.5},
               "network_settings": {"hidden_units": 256, "num_layers": 2, "normalize": True}}
    settings = build_run_options({"behaviors": {"B": section}}, {}, "bench").behaviors["B"]
    torch.manual_seed(0)
    return PPOTrainer("B", settings, SPEC, StatsReporter("B", []), None, torch.device("cpu"), seed=1)


def timed_updates(ppo: PPOTrainer, buffer: int, updates: int) -> float:
    times = []
    for k in range(updates + 1):
        for traj in trajectories(buffer, k):
            ppo.add_experience(traj)
        t0 = time.perf_counter()
        ppo.update()
        if k:  # the first is a warm-up (and the group's join)
            times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def scattered_bytes(ppo: PPOTrainer, buffer: int) -> int:
    """What one ShardMessage to the second learner pickles to, for a buffer of this size."""
    for traj in trajectories(buffer, 99):
        ppo.add_experience(traj)
    data = ppo._with_advantages()
    ppo.buffer.clear()
    half = data.select(torch.arange(buffer // 2, buffer))
    modules, optimizers = states_of(*ppo._group_state())
    message = ShardMessage(spec_of("B", ppo.settings, SPEC), to_numpy(half), 0.2, 0.0, 3e-4, buffer // 8, 1, modules, optimizers)
    return len(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--buffers", type=int, nargs="+", default=[2048, 16384], help="buffer sizes, rows (default: 2048 16384)")
    parser.add_argument("--updates", type=int, default=5, help="timed updates per case (default: 5)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| buffer (rows) | minibatch | 1 learner (ms/update) | 2 learners (ms/update) | 2 / 1 | all-reduced per update | scattered per update |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for buffer in args.buffers:
        alone = trainer(buffer)
        one = timed_updates(alone, buffer, args.updates)
        grouped = trainer(buffer)
        with tempfile.TemporaryDirectory(prefix="bench-learners-") as logs:
            group = LearnerGroup(2, logs)
            grouped.learners = group
            try:
                two = timed_updates(grouped, buffer, args.updates)
            finally:
                group.close()
        params = sum(p.numel() for p in alone.network.parameters())
        reduced = 4 * params * EPOCHS * 4  # float32, every parameter, 4 minibatches a epoch
        sent = scattered_bytes(alone, buffer)
        print(f"| {buffer:,} | {buffer // 4:,} | {one:.1f} | {two:.1f} | {two / one:.2f}x | {reduced / 1e6:.2f} MB "
              f"({params:,} parameters x {EPOCHS * 4} minibatches) | {sent / 1e6:.2f} MB |")


if __name__ == "__main__":
    main()
