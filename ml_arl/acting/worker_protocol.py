"""The worker protocol, as plain typed data (never torch): the main process sends commands
(``StepCommand``, ``ResetCommand``, ``SetParametersCommand``, ``CloseCommand``, ``ActCommand``); a
worker answers with replies (``SpecsReply``, ``StepReply``, ``ResetReply``, ``FailedReply``,
``ClosedReply``, ``ObservationReply``). Commands and replies are separate types, so a reply can
never be mistaken for a request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from mlagents_envs.base_env import ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps

from ml_arl.core.actor_weights import PolicyMessage
from ml_arl.core.experience import StepBatch


@dataclass(frozen=True)
class StepCommand:
    """Step ``steps_per_message`` times; first act with these policies (only the changed ones)
    and hand the environment these parameters, if any (a lesson changed; no reset)."""

    policies: dict[str, PolicyMessage] = field(default_factory=dict)
    parameters: Optional[dict[str, Any]] = None


@dataclass(frozen=True)
class ResetCommand:
    """Reset the environment; half-built trajectories are dropped."""


@dataclass(frozen=True)
class SetParametersCommand:
    """New environment parameters (a phase switch, a lesson that requires a reset), applied with a reset."""

    parameters: dict[str, Any]


@dataclass(frozen=True)
class CloseCommand:
    """Close the environment and exit."""


@dataclass(frozen=True)
class ActCommand:
    """Outside actions (ml_arl.api.vector_env): set these actions, step the environment once, and
    answer with every behavior's steps; with no actions, answer without stepping. A behavior
    with deciding agents and no actions here gets empty ones."""

    actions: dict[str, ActionTuple] = field(default_factory=dict)


WorkerCommand = Union[StepCommand, ResetCommand, SetParametersCommand, CloseCommand, ActCommand]


@dataclass(frozen=True)
class WorkerFailure:
    """Why a worker stopped: an exception in the worker, or its death seen from the main process."""

    exc_type: str
    message: str
    traceback: str
    restartable: bool
    exit_code: int = 1
    user_error: bool = False  # an ArlError: its message is complete, no traceback is shown


@dataclass(frozen=True)
class SpecsReply:
    """The worker's environment started: the behaviors it has."""

    worker_id: int
    specs: dict[str, BehaviorSpec]
    node: str = ""  # where the worker runs, for the log (the Ray backend: node address and id)
    # per behavior, what its trainer needs to know of the environment beyond the spec, pickled by
    # the environment (``behavior_extras()``; torch-free): a palaestrAI agent's sensors and
    # actuators with their spaces, so the main process need not start the environment to learn them
    extras: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class StepReply:
    """A StepCommand is done: everything its steps produced, as one StepBatch."""

    worker_id: int
    batch: StepBatch


@dataclass(frozen=True)
class ResetReply:
    """A ResetCommand or a SetParametersCommand is done."""

    worker_id: int


@dataclass(frozen=True)
class FailedReply:
    worker_id: int
    failure: WorkerFailure


@dataclass(frozen=True)
class ClosedReply:
    """The worker closed its environment and is about to exit."""

    worker_id: int


@dataclass(frozen=True)
class ObservationReply:
    """An ActCommand is done: each behavior's (DecisionSteps, TerminalSteps), as the env gave them."""

    worker_id: int
    steps: dict[str, tuple[DecisionSteps, TerminalSteps]]


WorkerReply = Union[SpecsReply, StepReply, ResetReply, FailedReply, ClosedReply, ObservationReply]
