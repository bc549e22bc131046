"""The worker side of the Ray backend (ml_arl.envs.backends.ray_env_manager): ``EnvActor``, one
environment worker in a Ray worker process, answering the worker protocol of ``ml_arl.acting.worker_protocol``
through actor calls. Importing it needs no Ray (``ray.remote`` is applied by the manager)."""

from __future__ import annotations

import logging
import os
import time
from typing import Optional

import cloudpickle

from ml_arl.acting.env_runner import EnvRunner, answer, failure_of
from ml_arl.acting.worker_protocol import (
    ClosedReply,
    FailedReply,
    SpecsReply,
    StepCommand,
    WorkerCommand,
    WorkerFailure,
    WorkerReply,
)
from ml_arl.core.actor_weights import PolicyMessage
from ml_arl.core.env_factory import EnvFactory

logger = logging.getLogger(__name__)

# a Ray call costs about a millisecond more than a pipe message: unless env_settings.steps_per_message
# is set, an actor steps enough per call for a call to last about CALL_TARGET_S (within the setting's
# default and MAX_ADAPTIVE_STEPS: more steps per call also means older weights acting)
CALL_TARGET_S = 0.01
MAX_ADAPTIVE_STEPS = 64


def node_name() -> str:
    """This process's Ray node, as the log names it: address and the node id's first 8 characters."""
    import ray

    return f"{ray.util.get_node_ip_address()} ({ray.get_runtime_context().get_node_id()[:8]})"


class EnvActor:
    """One environment worker, in a Ray worker process (``ray.remote`` is applied at launch, so
    importing this module needs no Ray). A failure closes the environment; every later call
    answers the same FailedReply until the manager replaces the actor."""

    def __init__(
        self, factory_bytes: bytes, worker_id: int, seed: int, steps_per_message: int, nice: int = 0, adaptive: bool = False
    ):
        self.factory_bytes = factory_bytes
        self.worker_id = worker_id
        self.seed = seed
        self.steps_per_message = steps_per_message
        # adaptive (steps_per_message not set by the user): as many steps per call as make a call
        # last about CALL_TARGET_S, between the setting's value and MAX_ADAPTIVE_STEPS
        self.adaptive = adaptive
        self.min_steps = steps_per_message
        self.step_s: Optional[float] = None  # running estimate of one env step's cost (acting included)
        self.nice = nice
        self.runner: Optional[EnvRunner] = None
        self.failed: Optional[FailedReply] = None

    def start(self) -> WorkerReply:
        try:
            if self.nice:
                os.nice(self.nice)
            factory: EnvFactory = cloudpickle.loads(self.factory_bytes)
            self.runner = EnvRunner(factory(self.worker_id, self.seed), self.worker_id, self.seed)
            return SpecsReply(self.worker_id, self.runner.take_new_specs(), node_name(), self.runner.behavior_extras())
        except BaseException as exc:  # noqa: BLE001 - shipped to the main process, never swallowed
            return self._fail(exc)

    def call(self, command: WorkerCommand, names: tuple[str, ...] = (), *policies: PolicyMessage) -> WorkerReply:
        """Answer ``command``; ``policies`` (Ray resolved them from their object references) are the
        changed policies of a StepCommand, by ``names``."""
        if self.failed is not None:
            return self.failed
        if self.runner is None:
            return FailedReply(self.worker_id, WorkerFailure("ProtocolError", "called before it started", "", True))
        if names and isinstance(command, StepCommand):
            command = StepCommand({**command.policies, **dict(zip(names, policies))}, command.parameters)
        started = time.perf_counter()
        try:
            reply = answer(self.runner, command, self.steps_per_message)
        except BaseException as exc:  # noqa: BLE001 - shipped to the main process, never swallowed
            return self._fail(exc)
        if self.adaptive and isinstance(command, StepCommand):
            self._adapt((time.perf_counter() - started) / self.steps_per_message)
        return reply if reply is not None else self.close()

    def _adapt(self, step_s: float) -> None:
        self.step_s = step_s if self.step_s is None else 0.8 * self.step_s + 0.2 * step_s
        wanted = int(CALL_TARGET_S / max(self.step_s, 1e-6))
        self.steps_per_message = max(self.min_steps, min(MAX_ADAPTIVE_STEPS, wanted))

    def close(self) -> WorkerReply:
        runner, self.runner = self.runner, None
        if runner is not None:
            try:
                runner.close()
            except Exception as exc:  # noqa: BLE001 - closing must not hide anything else
                logger.warning("worker %d: closing its environment raised %s", self.worker_id, type(exc).__name__)
        return ClosedReply(self.worker_id)

    def _fail(self, exc: BaseException) -> FailedReply:
        self.failed = FailedReply(self.worker_id, failure_of(exc))
        self.close()
        return self.failed
