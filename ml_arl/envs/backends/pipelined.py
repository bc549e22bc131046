"""What the managers of workers in processes of their own share (``SubprocessEnvManager``'s
processes, ``RayEnvManager``'s actors): the deadlines of a start and of a reply, starting every
worker with restarts within quota, awaiting a new worker's specs and bringing it to the current
environment parameters, the environment parameters and resets, the step deadlines and turning a
worker's FAILED reply into a ``WorkerError`` for ``EnvManager.handle_failure``. Each
backend keeps how it spawns, sends, waits and kills."""

from __future__ import annotations

import time
from abc import abstractmethod
from typing import Any, Generic, Optional, Protocol, TypeVar

from mlagents_envs.base_env import BehaviorSpec

from ml_arl.acting.worker_protocol import (
    FailedReply,
    ResetCommand,
    ResetReply,
    SetParametersCommand,
    SpecsReply,
    WorkerCommand,
    WorkerFailure,
    WorkerReply,
)
from ml_arl.core.exceptions import WorkerError
from ml_arl.envs.backends.env_manager import EnvManager, WorkerErrorLog, worker_error
from ml_arl.settings import EnvSettings

REPLY_GRACE_S = 2.0  # beyond --timeout-wait: an env that waited that long still has time to answer
SHUTDOWN_TIMEOUT_S = 10.0  # asked to close, a worker has this long before it is terminated
PIPELINE_DEPTH = 2  # step requests queued per worker: it steps for the next while the main process reads one


def worker_died(worker_id: int, message: str, account: str = "") -> FailedReply:
    """The reply a worker that died (its process killed, its Ray actor or node lost) never sent:
    restartable; ``account``: the backend's own words on it, kept with the tracebacks."""
    return FailedReply(worker_id, WorkerFailure("WorkerDied", message, account, True))


class WorkerHandle(Protocol):
    """What the shared code reads of a backend's main-process handle of one worker."""

    worker_id: int
    parameters_serial: int  # the manager's parameters_serial this worker's environment has

    def step_deadline(self, timeout: float) -> Optional[float]:
        """When the oldest step request in flight must be answered; None with none in flight."""


W = TypeVar("W", bound=WorkerHandle)


class PipelinedEnvManager(EnvManager, Generic[W]):
    start_grace_s = 5.0  # beyond 2 x --timeout-wait: a worker's start (imports, an env's own waits)

    def __init__(self, settings: EnvSettings, error_log: Optional[WorkerErrorLog] = None):
        super().__init__(settings, error_log)
        self.specs: dict[str, BehaviorSpec] = {}  # every behavior any worker reported
        self.parameters: dict[str, Any] = {}  # the current environment parameters
        self.parameters_serial = 0  # bumped whenever they change; each worker knows the one it has

    @property
    def start_timeout(self) -> float:
        return 2 * self.settings.timeout_wait + self.start_grace_s

    @property
    def reply_timeout(self) -> float:
        return self.settings.timeout_wait + REPLY_GRACE_S

    @abstractmethod
    def _members(self) -> list[W]:
        """The workers, in worker-id order."""

    @abstractmethod
    def launch(self) -> None:
        """Spawn every worker (without waiting for them)."""

    @abstractmethod
    def _first_reply(self, worker: W) -> Optional[WorkerReply]:
        """A new worker's first reply (its specs), or None when it did not come in ``start_timeout``."""

    @abstractmethod
    def _ask(self, worker: W, command: WorkerCommand) -> Optional[WorkerReply]:
        """Send ``command`` to a worker with no step in flight and await its reply; None when it
        did not come in ``reply_timeout``."""

    @abstractmethod
    def _timed_out(self, worker: W, what: str, timeout: float) -> WorkerError:
        """Kill a worker that did not ``what`` in time (a hung env answers nothing, CLOSE included)
        and say so; its step requests in flight are dropped."""

    @abstractmethod
    def _reset_all(self, command: WorkerCommand, during: str) -> None:
        """Finish (and drop) every worker's steps in flight, send ``command`` to every worker and
        await the RESETs, each worker against its own deadline; then restart the workers that
        failed or timed out (within the quota; a restarted worker starts reset, with ``self.parameters``)."""

    def _ask_many(self, asks: list[tuple[W, WorkerCommand]]) -> list[Optional[WorkerReply]]:
        """``_ask`` of several workers; a backend that can sends them all before it awaits any."""
        return [self._ask(worker, command) for worker, command in asks]

    def exchange(self, commands: dict[int, WorkerCommand]) -> dict[int, Optional[WorkerReply]]:
        members = self._members()
        asks = [(members[wid], command) for wid, command in sorted(commands.items())]
        out: dict[int, Optional[WorkerReply]] = {}
        for (worker, _), reply in zip(asks, self._ask_many(asks)):
            if reply is None:
                failure = self._timed_out(worker, "answer", self.reply_timeout)
            elif isinstance(reply, FailedReply):
                failure = self._failure(worker, reply)
            else:
                out[worker.worker_id] = reply
                continue
            self.handle_failure(failure)  # restarts it, reset, within the quota; or raises
            out[worker.worker_id] = None
        return out

    def _failure(self, worker: W, reply: WorkerReply, during: str = "") -> WorkerError:
        return worker_error(worker.worker_id, reply, during)

    def _started(self, worker: W, reply: SpecsReply) -> None:
        """What a backend keeps of a worker's first reply."""

    def _await_specs(self, worker: W, first: bool = False) -> None:
        """Wait for a new worker's behavior specs and merge them into ``self.specs``; a restarted
        worker then joins the current environment parameters (and resets). ``first``: the run's
        first start of this worker, where an environment that raises is a start-up mistake (a
        wrong argument, a missing package, a class that cannot be unpickled): the run stops with
        its one line, restarting it would only fail again. A worker that dies or hangs in its
        first start is restarted as ever."""
        reply = self._first_reply(worker)
        if reply is None:
            raise self._timed_out(worker, "start", self.start_timeout)
        if not isinstance(reply, SpecsReply):
            failure = self._failure(worker, reply, "while starting")
            if first and isinstance(reply, FailedReply) and reply.failure.exc_type != "WorkerDied":
                failure.restartable = False
            raise failure
        self._started(worker, reply)
        for name, spec in reply.specs.items():
            self.specs.setdefault(name, spec)
        for name, extra in reply.extras.items():
            self.extras.setdefault(name, extra)
        worker.parameters_serial = self.parameters_serial
        if self.parameters:  # a restarted worker joins the current phase
            reply = self._ask(worker, SetParametersCommand(self.parameters))
            if reply is None:
                raise self._timed_out(worker, "answer a reset", self.reply_timeout)
            if not isinstance(reply, ResetReply):
                raise self._failure(worker, reply, "while applying the environment parameters")

    def start(self) -> dict[str, BehaviorSpec]:
        self.launch()
        for worker in list(self._members()):
            try:
                self._await_specs(worker, first=True)
            except WorkerError as failure:
                self.handle_failure(failure)  # restarts within quota (and awaits the new worker) or raises
        return dict(self.specs)

    def _next_step_deadline(self) -> float:
        """The earliest deadline of a step in flight (every worker has one when this is asked)."""
        timeout = self.reply_timeout
        return min(d for w in self._members() if (d := w.step_deadline(timeout)) is not None)

    def _fail_overdue(self, heard: set[int], failed: list[WorkerError]) -> None:
        """Add the workers past their step deadline that were not heard from to ``failed``, then
        hand every failure to ``handle_failure`` (restarts within the quota, or raises)."""
        now, timeout = time.monotonic(), self.reply_timeout
        for worker in self._members():
            deadline = worker.step_deadline(timeout)
            if worker.worker_id not in heard and deadline is not None and now >= deadline:
                failed.append(self._timed_out(worker, "answer a step", timeout))
        for failure in failed:
            self.handle_failure(failure)

    def reset(self) -> None:
        """Finish (and drop) the steps in flight, then reset every env; half-built trajectories
        are discarded in the workers."""
        self._reset_all(ResetCommand(), "during a reset")

    def set_environment_parameters(self, params: dict[str, Any], reset: bool = True) -> None:
        self.parameters = dict(params)
        self.parameters_serial += 1
        if not reset:
            return  # they go with each worker's next step request
        for worker in self._members():
            worker.parameters_serial = self.parameters_serial  # they come with the reset
        self._reset_all(SetParametersCommand(self.parameters), "during a reset with new environment parameters")
