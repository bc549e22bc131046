"""All environments in the main process: the same pipeline without processes, for debugging
(breakpoints work, tracebacks are local) and fast tests. Select with env_settings.manager: inprocess.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

from mlagents_envs.base_env import BehaviorSpec

from ml_arl.envs.env_manager import EnvManager
from ml_arl.envs.env_runner import RESTARTABLE_EXCEPTIONS, EnvRunner, StepBatch
from ml_arl.envs.sources import EnvFactory
from ml_arl.exceptions import ArlError, WorkerError
from ml_arl.settings import EnvSettings

logger = logging.getLogger(__name__)


class InProcessEnvManager(EnvManager):
    def __init__(self, factory: EnvFactory, settings: EnvSettings, seed: int):
        super().__init__(settings)
        self.factory = factory
        self.seed = seed
        self.runners: list[EnvRunner] = []
        self.versions: list[dict[str, int]] = []
        self.parameters: dict[str, Any] = {}  # the current phase's environment parameters

    @property
    def num_workers(self) -> int:
        return len(self.runners)

    def _make(self, worker_id: int) -> EnvRunner:
        try:
            runner = EnvRunner(self.factory(worker_id, self.seed + worker_id), worker_id, self.seed + worker_id)
            if self.parameters:
                runner.set_environment_parameters(self.parameters)
                runner.reset()
            return runner
        except Exception as exc:
            raise self._error(worker_id, exc) from exc

    def start(self) -> dict[str, BehaviorSpec]:
        self.runners = [self._make(i) for i in range(self.settings.num_envs)]
        self.versions = [{} for _ in self.runners]
        specs: dict[str, BehaviorSpec] = {}
        for runner in self.runners:
            for name, spec in runner.take_new_specs().items():
                specs.setdefault(name, spec)
        return specs

    def _error(self, worker_id: int, exc: BaseException) -> WorkerError:
        if isinstance(exc, ArlError):  # a complete user-facing message (bad build, ...)
            error = WorkerError(worker_id, f"worker {worker_id}: {exc}", traceback.format_exc(), False)
            error.exit_code = exc.exit_code
            return error
        first_line = (str(exc).strip().splitlines() or [""])[0]
        return WorkerError(
            worker_id,
            f"worker {worker_id}: {type(exc).__name__}: {first_line}",
            traceback.format_exc(),
            isinstance(exc, RESTARTABLE_EXCEPTIONS),
        )

    def step(self) -> list[StepBatch]:
        batches = []
        for i, runner in enumerate(self.runners):
            try:
                for behavior, msg in self.policies.items():
                    serial = self.policy_serials[behavior]
                    if self.versions[i].get(behavior) != serial:
                        runner.set_policy(behavior, msg)
                        self.versions[i][behavior] = serial
                batches.append(runner.run(self.settings.steps_per_message))
            except Exception as exc:
                failure = self._error(i, exc)
                failure.__cause__ = exc
                self.handle_failure(failure)
        return batches

    def restart_worker(self, worker_id: int) -> None:
        try:
            self.runners[worker_id].close()
        except Exception:  # noqa: BLE001 - the env is being replaced after a failure
            logger.warning("worker %d: closing the failed environment raised", worker_id, exc_info=True)
        self.runners[worker_id] = self._make(worker_id)
        self.versions[worker_id] = {}

    def reset(self) -> None:
        for runner in self.runners:
            runner.reset()

    def set_environment_parameters(self, params: dict[str, Any]) -> None:
        self.parameters = dict(params)
        for runner in self.runners:
            runner.set_environment_parameters(self.parameters)
            runner.reset()

    def close(self) -> None:
        errors = []
        for runner in self.runners:
            try:
                runner.close()
            except Exception as exc:  # noqa: BLE001 - close every env, then report
                errors.append(exc)
        self.runners = []
        if errors:
            raise errors[0]
