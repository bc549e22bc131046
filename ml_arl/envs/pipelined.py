"""What the managers of workers in processes of their own share (``SubprocessEnvManager``'s
processes, ``RayEnvManager``'s actors): the deadlines of a start and of a reply, starting every
worker with restarts within quota, merging the behavior specs the workers report, and turning a
worker's FAILED reply into the ``WorkerError`` that ``EnvManager.handle_failure`` takes. Each
backend keeps how it spawns, sends, waits and kills."""

from __future__ import annotations

from abc import abstractmethod
from typing import Generic, TypeVar

from mlagents_envs.base_env import BehaviorSpec

from ml_arl.envs.env_manager import EnvManager
from ml_arl.exceptions import WorkerError, WorkerUserError
from ml_arl.messages import FailedReply, WorkerFailure, WorkerReply

REPLY_GRACE_S = 2.0  # beyond --timeout-wait: an env that waited that long still has time to answer
SHUTDOWN_TIMEOUT_S = 10.0  # asked to close, a worker has this long before it is terminated
PIPELINE_DEPTH = 2  # step requests queued per worker: it steps for the next while the main process reads one

W = TypeVar("W")  # a backend's worker handle


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


class PipelinedEnvManager(EnvManager, Generic[W]):
    specs: dict[str, BehaviorSpec]  # every behavior any worker reported
    start_grace_s = 5.0  # beyond 2 x --timeout-wait: a worker's start (imports, an env's own waits)

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
    def _await_specs(self, worker: W) -> None:
        """Wait for a new worker's behavior specs (``_merge_specs``) and bring it to the current
        environment parameters."""

    def _merge_specs(self, specs: dict[str, BehaviorSpec]) -> None:
        for name, spec in specs.items():
            self.specs.setdefault(name, spec)

    def start(self) -> dict[str, BehaviorSpec]:
        self.launch()
        for worker in list(self._members()):
            try:
                self._await_specs(worker)
            except WorkerError as failure:
                self.handle_failure(failure)  # restarts within quota (and awaits the new worker) or raises
        return dict(self.specs)
