"""The collectives every learner of ``--num-learners`` calls (rank 0 in ml_arl.trainers.learner_group,
the others in ml_arl.trainers.learner_main): joining the gloo group, the gradients' all-reduce, and the all-gather of
reward signals' normaliser statistics."""

from __future__ import annotations

import datetime
import pickle
import time
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np
import torch
import torch.distributed as dist

COLLECTIVE_TIMEOUT_S = 600.0  # the join, and one collective, with a learner that stopped answering (a dead one fails at once)
KEEPALIVE_S = 120.0  # rank 0 sends a KeepAlive when it has sent nothing for this long (well inside the timeout)
WAIT_SLICE_S = 1.0  # with a liveness check, a collective is waited for in slices this long, the check between them


def finish(work: Any, check: Optional[Callable[[], None]], timeout_s: float = COLLECTIVE_TIMEOUT_S) -> None:
    """Wait for an asynchronous collective. With ``check`` (rank 0's: it raises when a learner is gone),
    in slices of WAIT_SLICE_S with the check between them, at most ``timeout_s`` in all: a learner that
    is gone ends the wait even when gloo has not seen its connection close."""
    if check is None:
        work.wait()
        return
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            work.wait(timeout=datetime.timedelta(seconds=WAIT_SLICE_S))
            return
        except RuntimeError as err:
            if "timed out" not in str(err).lower() or time.monotonic() > deadline:
                raise
        check()


def scatter_objects(objects: Sequence[object], check: Optional[Callable[[], None]], timeout_s: float = COLLECTIVE_TIMEOUT_S) -> None:
    """Rank 0's side of ``dist.scatter_object_list`` (``objects[r]`` to rank r; the learners receive with
    scatter_object_list itself), the same three collectives on the same bytes (pickled, padded to the
    largest, then each one's length), each waited for with ``finish`` and ``check``: torch's own waits
    without a deadline of ours, and its broadcast to a learner that was gone was seen waiting out
    the collective's timeout."""
    payloads = [pickle.dumps(obj) for obj in objects]
    size = max(len(p) for p in payloads)
    padded = []
    for payload in payloads:
        tensor = torch.zeros(size, dtype=torch.uint8)
        tensor[: len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
        padded.append(tensor)
    finish(dist.broadcast(torch.tensor([size], dtype=torch.long), src=0, async_op=True), check, timeout_s)
    finish(dist.scatter(torch.empty(size, dtype=torch.uint8), scatter_list=padded, src=0, async_op=True), check, timeout_s)
    lengths = [torch.tensor([len(p)], dtype=torch.long) for p in payloads]
    finish(dist.scatter(torch.tensor([0], dtype=torch.long), scatter_list=lengths, src=0, async_op=True), check, timeout_s)


def all_reduce_mean(params: Sequence[torch.Tensor], world: int, check: Optional[Callable[[], None]] = None) -> None:
    """Every learner's gradients of ``params`` summed in one all-reduce and divided by ``world``
    (the parameters without a gradient, the same on every learner, are left out); ``check``: finish's."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    finish(dist.all_reduce(flat, async_op=True), check)
    flat /= world
    offset = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[offset : offset + n].view_as(g))
        offset += n


def all_gather(x: torch.Tensor, world: int, check: Optional[Callable[[], None]] = None) -> list[torch.Tensor]:
    """``x`` from every learner (each the same shape), in rank order; ``check``: finish's."""
    out = [torch.empty_like(x) for _ in range(world)]
    finish(dist.all_gather(out, x.contiguous(), async_op=True), check)
    return out


def seed_learner(seed: int, rank: int) -> None:
    """A learner's torch generator from (a seed rank 0 sent with the update, its rank): what it draws
    at random in an update (SAC's action noise, GAIL's expert rows and penalty points) differs from
    every other learner's, and is the same from run to run (``--deterministic``)."""
    torch.manual_seed(int(np.random.SeedSequence([seed, rank]).generate_state(1)[0]))


def join_group(init_method: str, rank: int, world: int, timeout_s: float = COLLECTIVE_TIMEOUT_S) -> None:
    """Join the gloo group at ``init_method`` (``file://`` on one machine, ``tcp://`` on Ray); a
    collective (the join among them) fails after ``timeout_s`` without its peers."""
    dist.init_process_group(
        "gloo", init_method=init_method, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=timeout_s),
    )
