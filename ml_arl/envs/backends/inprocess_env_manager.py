"""All environments in the main process: the same pipeline without processes, for debugging
(breakpoints work, tracebacks are local) and fast tests. Select with env_settings.manager: inprocess.

Failures while starting, stepping or resetting go through ``handle_failure`` as in the
subprocess manager: the failed environment is closed and rebuilt (with the current environment
parameters, freshly reset) within the restart quota. Nothing here can time out: a hung
environment hangs the run (use the subprocess manager to be protected from that).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Optional

from mlagents_envs.base_env import BehaviorSpec

from ml_arl.acting.env_runner import EnvRunner, answer, failure_of
from ml_arl.acting.worker_protocol import FailedReply, StepCommand, StepReply, WorkerCommand, WorkerReply
from ml_arl.core.env_factory import EnvFactory
from ml_arl.core.exceptions import WorkerError
from ml_arl.core.experience import StepBatch
from ml_arl.envs.backends.env_manager import EnvManager, WorkerErrorLog, worker_error
from ml_arl.settings import EnvSettings

logger = logging.getLogger(__name__)


class InProcessEnvManager(EnvManager):
    def __init__(self, factory: EnvFactory, settings: EnvSettings, seed: int, error_log: Optional[WorkerErrorLog] = None):
        super().__init__(settings, error_log)
        self.factory = factory
        self.seed = seed
        self.runners: dict[int, EnvRunner] = {}  # worker id -> runner (missing while being rebuilt)
        self.versions: dict[int, dict[str, int]] = {}
        self.parameters: dict[str, Any] = {}  # the current environment parameters
        self.parameters_serial = 0  # bumped when they change without a reset
        self.parameters_seen: dict[int, int] = {}  # worker id -> the serial its environment has
        self.specs: dict[str, BehaviorSpec] = {}

    @property
    def num_workers(self) -> int:
        return len(self.runners)

    def _make(self, worker_id: int) -> EnvRunner:
        try:
            runner = EnvRunner(self.factory(worker_id, self.seed + worker_id), worker_id, self.seed + worker_id)
        except Exception as exc:
            raise self._error(worker_id, exc, "while starting") from exc
        try:
            if self.parameters:
                runner.set_environment_parameters(self.parameters)
                runner.reset()
            return runner
        except Exception as exc:
            failure = self._error(worker_id, exc, "while applying the environment parameters")
            self._close_failed(worker_id, runner)
            raise failure from exc

    def start(self) -> dict[str, BehaviorSpec]:
        for worker_id in range(self.settings.num_envs):
            try:
                self._add(worker_id, self._make(worker_id))
            except WorkerError as failure:
                self.handle_failure(failure)  # restart_worker adds the rebuilt runner, or this raises
        return dict(self.specs)

    def _add(self, worker_id: int, runner: EnvRunner) -> None:
        self.runners[worker_id] = runner
        self.versions[worker_id] = {}
        self.parameters_seen[worker_id] = self.parameters_serial  # _make gave it the current parameters
        for name, spec in runner.take_new_specs().items():
            self.specs.setdefault(name, spec)
        for name, extra in runner.behavior_extras().items():
            self.extras.setdefault(name, extra)

    @staticmethod
    def _error(worker_id: int, exc: BaseException, during: str = "") -> WorkerError:
        """As a worker process would report ``exc``; called in its ``except`` block (for the traceback)."""
        return worker_error(worker_id, FailedReply(worker_id, failure_of(exc)), during)

    def _each(self, action: Callable[[EnvRunner], Any], during: str = "") -> list[Any]:
        """``action`` on every runner; a runner that raises goes through handle_failure."""
        results = []
        for worker_id in sorted(self.runners):
            try:
                results.append(action(self.runners[worker_id]))
            except Exception as exc:
                failure = self._error(worker_id, exc, during)
                failure.__cause__ = exc
                self.handle_failure(failure)
        return results

    def step(self) -> list[StepBatch]:
        def run(runner: EnvRunner) -> StepBatch:
            parameters = None
            if self.parameters_seen.get(runner.worker_id, 0) != self.parameters_serial:
                parameters = self.parameters
                self.parameters_seen[runner.worker_id] = self.parameters_serial
            command = StepCommand(self.policy_updates(self.versions[runner.worker_id]), parameters)
            reply = answer(runner, command, self.settings.steps_per_message)
            assert isinstance(reply, StepReply)
            return reply.batch

        return self._each(run)

    def exchange(self, commands: dict[int, WorkerCommand]) -> dict[int, Optional[WorkerReply]]:
        out: dict[int, Optional[WorkerReply]] = {}
        for worker_id, command in sorted(commands.items()):
            try:
                out[worker_id] = answer(self.runners[worker_id], command, self.settings.steps_per_message)
            except Exception as exc:
                failure = self._error(worker_id, exc)
                failure.__cause__ = exc
                self.handle_failure(failure)
                out[worker_id] = None
        return out

    def _close_failed(self, worker_id: int, runner: EnvRunner) -> None:
        try:
            runner.close()
        except Exception as exc:  # noqa: BLE001 - the env is being replaced after a failure
            logger.warning("worker %d: closing the failed environment raised %s: %s", worker_id,
                           type(exc).__name__, (str(exc).strip().splitlines() or [""])[0])
            logger.debug("worker %d: closing the failed environment raised", worker_id, exc_info=True)

    def restart_worker(self, worker_id: int) -> None:
        old = self.runners.pop(worker_id, None)
        self.versions.pop(worker_id, None)
        if old is not None:
            self._close_failed(worker_id, old)
        self._add(worker_id, self._make(worker_id))

    def reset(self) -> None:
        self._each(lambda runner: runner.reset(), "during a reset")

    def set_environment_parameters(self, params: dict[str, Any], reset: bool = True) -> None:
        self.parameters = dict(params)
        self.parameters_serial += 1
        if not reset:
            return  # each runner gets them before its next step

        def apply(runner: EnvRunner) -> None:
            self.parameters_seen[runner.worker_id] = self.parameters_serial
            runner.set_environment_parameters(self.parameters)
            runner.reset()

        self._each(apply, "during a reset with new environment parameters")

    def close(self) -> None:
        errors = []
        for runner in self.runners.values():
            try:
                runner.close()
            except Exception as exc:  # noqa: BLE001 - close every env, then report
                errors.append(exc)
        self.runners = {}
        if errors:
            raise errors[0]
