"""One learner of ``--num-learners`` (rank 1..N-1; ml_arl.trainers.learner_group), a process of its
own: ``python -m ml_arl.trainers.learner_main INIT_METHOD RANK WORLD [TIMEOUT_S]`` (or a Ray actor, ml_arl.trainers.ray_learners).

It joins the gloo group, then takes one message at a time from rank 0: a ``ShardMessage`` builds
the brain's replica the first time it names it, loads rank 0's weights and optimizer state, and
runs the update over its shard, all-reducing each minibatch's gradients with the others;
a ``KeepAlive`` is only that, ``StopLearners`` ends it. What it raises is printed with its traceback to its log (stdout), and it
exits 1: rank 0's next collective fails and names this log. It exits too when rank 0's process is
gone (its collective fails).
"""

from __future__ import annotations

import logging
import os
import sys
import traceback

import torch
import torch.distributed as dist

from ml_arl.core.behavior_specs import spec_from_plain
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import TrainerSettings
from ml_arl.trainers.learner_collectives import COLLECTIVE_TIMEOUT_S, join_group
from ml_arl.trainers.learner_protocol import KeepAlive, ReplayShardMessage, ShardMessage, StopLearners
from ml_arl.trainers.trainer import Trainer, trainer_class

logger = logging.getLogger("ml_arl.learner")


def serve(init_method: str, rank: int, world: int, timeout_s: float = COLLECTIVE_TIMEOUT_S) -> None:
    torch.set_num_threads(1)
    join_group(init_method, rank, world, timeout_s)
    replicas: dict[str, Trainer] = {}
    while True:
        box: list[object] = [None]
        dist.scatter_object_list(box, None, src=0)
        message = box[0]
        if isinstance(message, StopLearners):
            break
        if isinstance(message, KeepAlive):
            continue
        assert isinstance(message, (ShardMessage, ReplayShardMessage)), f"unexpected message {type(message).__name__}"
        spec = message.learner
        trainer = replicas.get(spec.behavior)
        if trainer is None:
            settings = TrainerSettings.model_validate(spec.settings)
            trainer = trainer_class(settings, spec.behavior)(
                spec.behavior, settings, spec_from_plain(spec.spec), StatsReporter(spec.behavior, []), None,
                torch.device("cpu"), training=True,
            )
            replicas[spec.behavior] = trainer
        trainer.descend_shard(message, rank, world)  # type: ignore[attr-defined]
    dist.destroy_process_group()


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s [learner] %(message)s")
    init_method, rank, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    timeout_s = float(sys.argv[4]) if len(sys.argv) > 4 else COLLECTIVE_TIMEOUT_S
    print(f"learner {rank} of {world}: pid {os.getpid()}", flush=True)
    try:
        serve(init_method, rank, world, timeout_s)
    except Exception as err:  # noqa: BLE001 - printed whole to the learner's log, rank 0 names it
        traceback.print_exc()
        print(f"learner {rank}: {type(err).__name__}: {err}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
