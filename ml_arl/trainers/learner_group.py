"""Data-parallel learners on torch.distributed (issue 50): ``--num-learners N``.

Rank 0 is the run's own process: its trainer collects every trajectory, computes values and GAE
advantages over the whole buffer (and normalises the advantages there, as one learner would),
then splits the rows into N equal shards and scatters shards 1..N-1 to the other learners
(``learner_main``, one process each, started with the run), each with rank 0's weights and
optimizer state. Every learner then runs the same epochs over its own shard, minibatches of
batch_size / N rows in an order drawn from (seed, rank). After each ``backward()`` one all-reduce
sums the flattened gradients, which are divided by N and then clipped; every learner steps the
same Adam from the same state with the same gradient, so their weights stay equal, and rank 0
publishes the policy and writes checkpoints, TensorBoard and the store as ever. With equal
shards, N learners on minibatches of B / N give the update one learner makes on minibatches of B
made of those shards (tests/trainers/test_learners.py checks it to float tolerance).

The group is gloo over a file store in the run's temporary folder: on one machine, with nothing
listening on a port. A learner that fails or dies ends the run with one line naming it and where
its log is; the checkpoints are rank 0's, written as ever (to a temporary file, then renamed), so
``--resume`` continues from the last one. Closing asks each learner to stop, waits, then
terminates and kills.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import torch
import torch.distributed as dist

from ml_arl.core.exceptions import ConfigError, LearnerError
from ml_arl.settings import TrainerSettings
from ml_arl.trainers.learner_collectives import (
    COLLECTIVE_TIMEOUT_S,
    KEEPALIVE_S,
    all_gather,
    all_reduce_mean,
    join_group,
    scatter_objects,
)
from ml_arl.trainers.learner_protocol import KeepAlive, LearnerSpec, StopLearners
from ml_arl.trainers.optimizers import Adam

logger = logging.getLogger(__name__)

GROUPED_TRAINERS = ("ppo", "sac", "poca")  # the trainers that update in a group (a ``learners`` attribute, ``descend_shard``)
STOP_TIMEOUT_S = 10.0
# a collective that fails because a peer died can fail before that peer's exit is visible here (gloo sees the reset
# connection first): the member is looked for this long before the failure is said without it
DEATH_GRACE_S = 3.0


def learner_problem(settings: TrainerSettings, brain: str, device: torch.device) -> Optional[str]:
    """Why ``--num-learners`` > 1 cannot train this behavior yet (one line), or None."""
    reasons = [
        (settings.trainer_type not in GROUPED_TRAINERS, f"trainer_type {settings.trainer_type}"),
        (settings.network_settings.memory is not None, "network_settings.memory"),
        (settings.self_play is not None, "self_play"),
        (device.type != "cpu", f"device {device}"),
    ]
    why = next((text for bad, text in reasons if bad), None)
    if why is None:
        return None
    return (f"behaviors.{brain}: --num-learners > 1 does not support {why} yet (PPO, SAC and POCA without memory or "
            "self-play, on the CPU); use --num-learners 1")


class _Processes:
    """The learners as processes of this machine (``python -m ml_arl.trainers.learner_main``)."""

    def __init__(self, init_method: str, world: int, log_dir: str, timeout_s: float):
        self.logs = [os.path.join(log_dir, f"learner-{rank}.log") for rank in range(1, world)]
        self.procs: list[subprocess.Popen[bytes]] = []
        for rank, log in zip(range(1, world), self.logs):
            with open(log, "wb") as out:
                cmd = [sys.executable, "-m", "ml_arl.trainers.learner_main", init_method, str(rank), str(world), str(timeout_s)]
                self.procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        logger.debug("Started %d learner process(es); logs in %s", world - 1, log_dir)

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def dead(self, during: str) -> Optional[str]:
        for rank, (proc, log) in enumerate(zip(self.procs, self.logs), start=1):
            code = proc.poll()
            if code is not None:
                how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
                last = _last_line(log)
                return f"learner {rank} stopped {during} ({how}){': ' + last if last else ''}; its log: {log}"
        return None

    def stop(self) -> None:
        """Wait for each (it was asked to stop), then terminate, then kill."""
        for proc in self.procs:
            for step in (None, proc.terminate, proc.kill):
                if step is not None:
                    step()
                try:
                    proc.wait(STOP_TIMEOUT_S)
                    break
                except subprocess.TimeoutExpired:
                    continue


class LearnerGroup:
    """Rank 0's end of the group: the other learners, the scatter, the all-reduce. ``on_ray``: the
    learners are Ray actors of the run's Ray (``manager: ray``), placed by Ray and joined over TCP
    (ml_arl.trainers.ray_learners); otherwise processes of this machine joined over a file store."""

    def __init__(self, world: int, log_dir: Optional[str] = None, on_ray: bool = False,
                 timeout_s: float = COLLECTIVE_TIMEOUT_S, keepalive_s: float = KEEPALIVE_S):
        if world < 2:
            raise ConfigError([f"torch_settings.num_learners: a group needs 2 or more learners, got {world}"])
        self.world = world
        self.rank = 0
        self.timeout_s, self.keepalive_s = timeout_s, keepalive_s
        self._folder = tempfile.mkdtemp(prefix="ml_arl-learners-")
        self.store_path = os.path.join(self._folder, "store")
        self._lock = threading.Lock()  # one message or update at a time: collectives of two would interleave
        self._joined = False
        self._join_error: Optional[BaseException] = None
        self._keepalive_error: Optional[LearnerError] = None
        self._last_sent = time.monotonic()
        self._closing = threading.Event()
        self._join_done = threading.Event()
        self.keepalives = 0  # KeepAlive messages sent
        self.members: Any
        if on_ray:
            from ml_arl.trainers.ray_learners import RayLearners

            self.init_method = RayLearners.init_method()
            self.members = RayLearners(self.init_method, world, timeout_s)
        else:
            self.init_method = f"file://{self.store_path}"
            self.members = _Processes(self.init_method, world, log_dir or self._folder, timeout_s)
        # joined now, not at the first update: a learner waits for rank 0 at most timeout_s, and the
        # first update can be further away than that (a large buffer, a slow environment)
        self._joiner = threading.Thread(target=self._join_and_keep_alive, name="learner-group", daemon=True)
        self._joiner.start()

    @property
    def procs(self) -> list[subprocess.Popen[bytes]]:
        return list(getattr(self.members, "procs", []))

    def _join_and_keep_alive(self) -> None:
        """The group's thread: join, then send a KeepAlive whenever nothing was sent for ``keepalive_s``
        (each learner waits for its next message at most ``timeout_s``, and updates can be further
        apart than that). A failure is kept and raised by the next update."""
        try:
            join_group(self.init_method, 0, self.world, self.timeout_s)
            self._joined = True
        except (RuntimeError, ValueError) as err:
            self._join_error = err
            return
        finally:
            self._join_done.set()
        while not self._closing.wait(max(self._last_sent + self.keepalive_s - time.monotonic(), 0.0)):
            with self._lock:
                if self._closing.is_set() or self._keepalive_error is not None:
                    return
                if time.monotonic() - self._last_sent < self.keepalive_s:
                    continue
                try:
                    self._check_members("while waiting for an update")
                    scatter_objects([None, *([KeepAlive()] * (self.world - 1))], self._idle_check)
                    self._last_sent = time.monotonic()
                    self.keepalives += 1
                except LearnerError as gone:
                    self._keepalive_error = gone
                    logger.warning("%s; the run's next update ends it", gone)
                    return
                except (RuntimeError, ValueError) as err:
                    self._keepalive_error = self._failure("while waiting for an update", err)
                    logger.warning("%s; the run's next update ends it", self._keepalive_error)
                    return

    def _join(self) -> None:
        """Wait for the group's thread to have joined (at most the join's own timeout, and a little)."""
        self._join_done.wait(self.timeout_s + 30.0)
        if self._join_error is not None:
            raise self._failure("while joining the learner group", self._join_error)
        if not self._joined:
            raise LearnerError(f"the learner group did not form within {self.timeout_s + 30.0:.0f} s")

    def _guarded(self, call, during: str) -> None:  # type: ignore[no-untyped-def]
        try:
            call()
        except (RuntimeError, ValueError) as err:
            raise self._failure(during, err) from None

    def _failure(self, during: str, err: BaseException) -> LearnerError:
        deadline = time.monotonic() + DEATH_GRACE_S
        dead = self.members.dead(during)
        while dead is None and time.monotonic() < deadline:
            time.sleep(0.1)
            dead = self.members.dead(during)
        if dead is not None:
            return LearnerError(dead)
        return LearnerError(f"the learner group failed {during}: {str(err).splitlines()[0] if str(err) else type(err).__name__}")

    def update(self, messages: Sequence[object], descend) -> None:  # type: ignore[no-untyped-def]
        """Scatter ``messages`` (one per learner 1..N-1), then run ``descend()`` here as every
        learner runs its own (with ``reduce`` all-reducing each minibatch's gradients)."""
        self._join()
        with self._lock:
            if self._keepalive_error is not None:
                raise self._keepalive_error
            # a learner gone since the last update: gloo's scatter to it can wait out the collective's timeout
            # (seen: the broadcast of the shards' sizes to a SIGKILLed learner waited until the test's deadline)
            self._check_members("before its shard")
            try:
                self._guarded(lambda: scatter_objects([None, *messages], self._shard_check), "while receiving its shard")
                self._guarded(descend, "during an update")
            finally:
                self._last_sent = time.monotonic()

    def reduce(self, params: Sequence[torch.Tensor]) -> None:
        all_reduce_mean(params, self.world, self._check_members)

    def gather(self, x: torch.Tensor) -> list[torch.Tensor]:
        return all_gather(x, self.world, self._check_members)

    def _shard_check(self) -> None:
        self._check_members("while receiving its shard")

    def _idle_check(self) -> None:
        self._check_members("while waiting for an update")

    def _check_members(self, during: str = "during an update") -> None:
        """LearnerError when a learner is gone: before a scatter, and from inside a collective that waits
        on it (its exit seen here before gloo sees its connection close, or never: the collective would
        wait out its timeout)."""
        dead = self.members.dead(during)
        if dead is not None:
            raise LearnerError(dead)

    def close(self) -> None:
        """Ask every learner to stop, wait, then terminate and kill what is left."""
        self._closing.set()
        if self._joined and self._keepalive_error is None and self.members.alive():
            try:
                with self._lock:
                    scatter_objects([None, *([StopLearners()] * (self.world - 1))], self._idle_check, STOP_TIMEOUT_S)
            except (RuntimeError, ValueError, LearnerError):
                logger.debug("the learners did not take the stop", exc_info=True)
        self.members.stop()
        self._joiner.join(STOP_TIMEOUT_S)  # (a join still under way fails once the learners are gone)
        if self._joined and dist.is_initialized():
            # after a learner was lost, a collective left waiting on it may never end, and the group's
            # destructor joins gloo's threads that run it: destroyed in a thread of its own, waited for a while
            closer = threading.Thread(target=dist.destroy_process_group, name="learner-group-close", daemon=True)
            closer.start()
            closer.join(STOP_TIMEOUT_S)
            if closer.is_alive():
                logger.warning("the learner group's gloo threads did not stop within %.0f s; left to the process's exit",
                               STOP_TIMEOUT_S)
        self._joined = False
        for remove in (lambda: os.unlink(self.store_path), lambda: os.rmdir(self._folder)):
            try:
                remove()
            except OSError:
                pass


def _last_line(path: str) -> str:
    try:
        with open(path, "rb") as f:
            lines = [line.strip() for line in f.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def spec_of(behavior: str, settings: TrainerSettings, spec: object) -> LearnerSpec:
    from ml_arl.core.behavior_specs import spec_to_plain

    return LearnerSpec(behavior, settings.model_dump(mode="json"), spec_to_plain(spec))  # type: ignore[arg-type]


def numpy_state(module: torch.nn.Module) -> dict[str, np.ndarray]:
    """A module's tensors as numpy (a reward signal's ``_extra_state``, its optimizer, travels on its own)."""
    return {k: v.detach().cpu().numpy().copy() for k, v in module.state_dict().items() if isinstance(v, torch.Tensor)}


_MOMENTS = ("exp_avg", "exp_avg_sq", "step")


def optimizer_state(opt: Adam) -> dict[str, list[np.ndarray]]:
    """An Adam's moments and step counters as numpy (its lr travels on its own)."""
    tensors = (opt.exp_avgs, opt.exp_avg_sqs, opt.state_steps)
    return {name: [t.detach().cpu().numpy().copy() for t in part] for name, part in zip(_MOMENTS, tensors)}


def states_of(modules: dict[str, torch.nn.Module], optimizers: dict[str, Adam]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What every learner starts an update from: each module's state_dict and each Adam's state."""
    return {k: numpy_state(m) for k, m in modules.items()}, {k: optimizer_state(o) for k, o in optimizers.items()}


def load_states(modules: dict[str, torch.nn.Module], optimizers: dict[str, Adam], module_states: dict[str, Any],
                optimizer_states: dict[str, Any], device: torch.device) -> None:
    """``states_of``'s output, sent by rank 0, into this learner's replica."""
    for name, module in modules.items():
        missing, unexpected = module.load_state_dict({k: torch.as_tensor(v) for k, v in module_states[name].items()}, strict=False)
        missing = [k for k in missing if not k.endswith("_extra_state")]
        if missing or unexpected:
            raise RuntimeError(f"rank 0's state of {name} does not fit this learner's: missing {missing}, unexpected {unexpected}")
    for name, opt in optimizers.items():
        parts = (opt.exp_avgs, opt.exp_avg_sqs, opt.state_steps)
        for moment, target in zip(_MOMENTS, parts):
            for k, value in enumerate(optimizer_states[name][moment]):
                target[k] = torch.as_tensor(value, device=device).clone()
