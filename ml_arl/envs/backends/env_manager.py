"""EnvManager: the interface the TrainerController drives, and the restart quotas.

``start()`` builds the environments and returns their behavior specs; ``set_policy()`` hands
new actor weights to the acting side; ``step()`` blocks (with a deadline) until at least one
environment has a ``StepBatch`` ready and returns all that are ready; ``reset()`` and
``set_environment_parameters()`` reset every environment (the latter with new parameters, or
without a reset, sending them along with the next step request); ``close()`` shuts down.

Failures. Every failure of a worker, while starting, stepping or resetting, goes through
``handle_failure``: a restartable one restarts the worker within the restart quota (ML-Agents'
max_lifetime_restarts, restarts_rate_limit_n per restarts_rate_limit_period_s), anything else
(or a failure beyond the quota) ends the run with one line. On the console a failure is one
line each::

    [WARNING] Restarting worker[0] after UnityEnvironmentException: ... (restart 1 of 10)
    [ERROR] Training stopped: Worker 0 exceeded the allowed number of restarts (...); last failure: ... (traceback in results/<run-id>/run_logs/worker_errors.log)

The worker's traceback goes to ``results/<run-id>/run_logs/worker_errors.log`` (``WorkerErrorLog``:
appended, one entry per failure with time, worker id, what happened and the outcome) and to the
console only with --debug.
"""

from __future__ import annotations

import logging
import os
import time
from abc import ABC, abstractmethod
from collections import defaultdict, deque
from typing import Any, Optional

from mlagents_envs.base_env import BehaviorSpec

from ml_arl.acting.worker_protocol import FailedReply, WorkerCommand, WorkerFailure, WorkerReply
from ml_arl.core.actor_weights import PolicyMessage
from ml_arl.core.exceptions import RestartQuotaExceeded, WorkerError, WorkerUserError
from ml_arl.core.experience import StepBatch
from ml_arl.settings import EnvSettings

logger = logging.getLogger(__name__)

WORKER_ERRORS_LOG = "worker_errors.log"  # in results/<run-id>/run_logs/
MAX_PENDING_ENTRIES = 200  # entries kept in memory until the run folder is ready (the oldest are dropped)


def failure_text(failure: WorkerError) -> str:
    """What happened, without the "worker N: " every WorkerError message starts with."""
    return str(failure).removeprefix(f"worker {failure.worker_id}: ")





def worker_error(worker_id: int, reply: WorkerReply, during: str = "") -> WorkerError:
    """The WorkerError of a FAILED reply (or of a dead worker): one line; the traceback rides
    along to handle_failure, which puts it in the WorkerErrorLog. ``during``: what the worker was
    doing, when not stepping. A reply out of turn (a worker that closed itself) is restartable."""
    if isinstance(reply, FailedReply):
        failure = reply.failure
    else:
        failure = WorkerFailure("ProtocolError", f"answered {type(reply).__name__} out of turn", "", True)
    if failure.user_error:
        error: WorkerError = WorkerUserError(worker_id, f"worker {worker_id}: {failure.message}", failure.traceback, False)
        error.exit_code = failure.exit_code
        return error
    first = (failure.message.strip().splitlines() or [""])[0]
    message = f"worker {worker_id}: {failure.exc_type}: {first}"
    if during:
        message += f" [{during}]"
    return WorkerError(worker_id, message, failure.traceback, failure.restartable)


class WorkerErrorLog:
    """Where the tracebacks of failed workers go: ``<run_logs>/worker_errors.log``, appended, one
    entry per failure::

        === 2025-05-01 12:00:00 worker 0: UnityEnvironmentException: ... (restart 1 of 10)
        Traceback (most recent call last):
          ...

    (``(no traceback)`` for a worker that died or stopped answering). Workers start before
    results/<run-id> is checked (and, with --force, emptied), so entries wait in memory until the
    controller has prepared the run folder (``open()``); a run that stops before that writes
    nothing. Each traceback is also logged at DEBUG level: on the console with --debug only.
    ``run_logs_dir`` None: no file (a manager built outside arl-learn)."""

    def __init__(self, run_logs_dir: Optional[str] = None):
        self.path = os.path.join(run_logs_dir, WORKER_ERRORS_LOG) if run_logs_dir else None
        self.opened = False
        self._pending: deque[str] = deque(maxlen=MAX_PENDING_ENTRIES)

    def record(self, failure: WorkerError, outcome: str) -> None:
        tb = failure.worker_traceback.rstrip()
        if tb:
            logger.debug("worker %d traceback:\n%s", failure.worker_id, tb)
        if self.path is None:
            return
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self._pending.append(
            f"=== {stamp} worker {failure.worker_id}: {failure_text(failure)} ({outcome})\n{tb or '(no traceback)'}\n\n"
        )
        if self.opened:
            self._flush()

    def open(self) -> None:
        """The run folder is ready: write what waited and append from now on."""
        self.opened = True
        if self._pending:
            self._flush()

    def _flush(self) -> None:
        assert self.path is not None
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.writelines(self._pending)
        except OSError as err:
            logger.warning("cannot write worker tracebacks to %s (%s); they are logged with --debug only", self.path, err)
            self.path = None
        self._pending.clear()

    def hint(self, failure: WorkerError) -> str:
        """Where the traceback of ``failure`` can be read, for the line that ends the run."""
        if not failure.worker_traceback or isinstance(failure, WorkerUserError):
            return ""  # nothing to read, or a complete message
        if self.opened and self.path is not None:
            return f" (traceback in {self.path})"
        if logger.isEnabledFor(logging.DEBUG):
            return ""  # logged above
        return " (run with --debug to see the traceback)"


class RestartQuota:
    """ML-Agents' rules: at most ``max_lifetime`` restarts per worker (-1 = unlimited) and at most
    ``rate_n`` within any ``period_s`` seconds (-1 = no rate limit)."""

    def __init__(self, max_lifetime: int, rate_n: int, period_s: float):
        self.max_lifetime = max_lifetime
        self.rate_n = rate_n
        self.period_s = period_s
        self.counts: dict[int, int] = defaultdict(int)
        self.times: dict[int, deque[float]] = defaultdict(deque)

    def allows(self, worker_id: int, now: float) -> bool:
        return self.limit_hit(worker_id, now) is None

    def limit_hit(self, worker_id: int, now: float) -> Optional[str]:
        """None while a restart is allowed; else which limit a restart would break, in words
        that name its setting and how to raise it."""
        count = self.counts[worker_id]
        if self.max_lifetime != -1 and count >= self.max_lifetime:
            return (f"max_lifetime_restarts={self.max_lifetime} reached ({count} restart{'s' if count != 1 else ''} "
                    "so far; raise --max-lifetime-restarts, -1 for no limit)")
        if self.rate_n == -1:
            return None
        recent = self.times[worker_id]
        while recent and now - recent[0] >= self.period_s:
            recent.popleft()
        if len(recent) < self.rate_n:
            return None
        return (f"the rate limit restarts_rate_limit_n={self.rate_n} per {self.period_s:g} s was reached "
                f"({len(recent)} in the last {self.period_s:g} s, {count} in all; "
                "raise --restarts-rate-limit-n, -1 for no limit)")

    def record(self, worker_id: int, now: float) -> int:
        self.counts[worker_id] += 1
        self.times[worker_id].append(now)
        return self.counts[worker_id]


class EnvManager(ABC):
    def __init__(self, settings: EnvSettings, error_log: Optional[WorkerErrorLog] = None):
        self.settings = settings
        self.error_log = error_log if error_log is not None else WorkerErrorLog()
        self.quota = RestartQuota(
            settings.max_lifetime_restarts, settings.restarts_rate_limit_n, settings.restarts_rate_limit_period_s
        )
        self.extras: dict[str, bytes] = {}  # per behavior, what its environment tells its trainer (SpecsReply.extras)
        self.policies: dict[str, PolicyMessage] = {}
        self.policy_serials: dict[str, int] = {}  # bumped on every set_policy: what a worker has is compared to it

    @property
    @abstractmethod
    def num_workers(self) -> int: ...

    def launch(self) -> None:  # noqa: B027 - optional hook; managers with nothing to launch keep it
        """Begin starting the environments without waiting for them (optional)."""

    @abstractmethod
    def start(self) -> dict[str, BehaviorSpec]:
        """Environments ready (launching them if needed); their behavior specs."""

    @abstractmethod
    def step(self) -> list[StepBatch]: ...

    @abstractmethod
    def close(self) -> None: ...

    def finish_stepping(self) -> None:  # noqa: B027 - optional hook; managers that hold nothing keep it
        """No step will be asked for again: the environments may begin to close, so that their
        memory is given back while the run saves its last checkpoints and models (optional;
        ``close`` still waits for them)."""

    @abstractmethod
    def reset(self) -> None:
        """Reset every environment; every half-built trajectory is discarded."""

    def run_logs_ready(self) -> None:
        """results/<run-id>/run_logs exists and belongs to this run: worker tracebacks go there now."""
        self.error_log.open()

    def set_policy(self, behavior: str, msg: PolicyMessage) -> None:
        self.policies[behavior] = msg
        self.policy_serials[behavior] = self.policy_serials.get(behavior, 0) + 1

    def policy_updates(self, known: dict[str, int]) -> dict[str, PolicyMessage]:
        """The policies newer than the serials in ``known`` (a worker's), which now has them."""
        updates = {b: msg for b, msg in self.policies.items() if known.get(b) != self.policy_serials[b]}
        for behavior in updates:
            known[behavior] = self.policy_serials[behavior]
        return updates

    @abstractmethod
    def set_environment_parameters(self, params: dict[str, Any], reset: bool = True) -> None:
        """Give every environment new parameters. ``reset``: and reset it (a phase switch, a
        lesson with require_reset); the steps in flight are finished and half-built trajectories
        discarded. Without: each environment gets them with its next step request (a lesson
        changed) and applies them as it does (a Python environment: from its next episode)."""

    def handle_failure(self, failure: WorkerError) -> None:
        """Restart the failed worker if the failure is restartable and quota is left; else raise
        (the error's message gets where its traceback is). A restarted worker that fails again
        while starting counts as a further restart. Each failure is one console line and one
        entry in the WorkerErrorLog."""
        while True:
            wid = failure.worker_id
            if not failure.restartable:
                self.error_log.record(failure, "not restartable: the run stops")
                failure.args = (f"{failure}{self.error_log.hint(failure)}",)
                raise failure
            now = time.monotonic()
            limit = self.quota.limit_hit(wid, now)
            if limit is not None:
                self.error_log.record(failure, "beyond the restart quota: the run stops")
                raise RestartQuotaExceeded(
                    f"Worker {wid} exceeded the allowed number of restarts: {limit}; "
                    f"last failure: {failure_text(failure)}{self.error_log.hint(failure)}"
                ) from failure
            count = self.quota.record(wid, now)
            most = "unlimited" if self.quota.max_lifetime == -1 else str(self.quota.max_lifetime)
            restart = f"restart {count} of {most}"
            self.error_log.record(failure, restart)
            logger.warning("Restarting worker[%d] after %s (%s)", wid, failure_text(failure), restart)
            try:
                self.restart_worker(wid)
                return
            except WorkerError as again:
                if again.worker_id != wid:
                    raise
                failure = again

    @abstractmethod
    def exchange(self, commands: dict[int, WorkerCommand]) -> dict[int, Optional[WorkerReply]]:
        """Send each worker (by id) its command, await the replies, each against its deadline.
        A worker that fails or does not answer in time is restarted within the quota (or this
        raises), freshly reset: its entry is None. For outside actions (ml_arl.api.vector_env)."""

    @abstractmethod
    def restart_worker(self, worker_id: int) -> None:
        """Replace the worker with a new one that has started and joined the current
        environment parameters (freshly reset); raise WorkerError if the new one fails."""
