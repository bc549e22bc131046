"""The one place a ``PolicyMessage`` is built: a trainer's snapshot (or a fixed policy's,
``fixed_policy_snapshot``) with the acting settings of its behavior and phase;
``ml_arl.training.router`` builds every policy of a run, ``ml_arl.training.quick_start`` the
first. Torch-free."""

from __future__ import annotations

from typing import Any, Optional

from mlagents_envs.base_env import BehaviorSpec

from ml_arl.core.actor_weights import PolicyMessage, PolicySnapshot
from ml_arl.core.exceptions import ConfigError
from ml_arl.settings import PhaseSettings, TrainerSettings


def policy_message(
    snapshot: PolicySnapshot, settings: TrainerSettings, phase: Optional[PhaseSettings], collect: bool
) -> PolicyMessage:
    name, params = settings.objective_spec()
    return PolicyMessage(
        version=snapshot.version,
        weights=snapshot.weights,
        time_horizon=settings.time_horizon,
        deterministic=settings.network_settings.deterministic or (phase is not None and phase.deterministic),
        collect=collect,
        objective=None if (name, params) == ("reward", {}) else (name, params),
        muscle=snapshot.muscle,
    )


def fixed_policy_snapshot(name: str, params: dict[str, Any], brain: str, spec: BehaviorSpec, version: int) -> PolicySnapshot:
    """The snapshot that makes fixed policy ``name`` (``ml_arl.rules``) play ``brain``; ConfigError
    (one line) when it cannot play it (a droop on a behavior without inverter actions)."""
    from ml_arl.rules import PolicyWeights, policy_path, policy_problem

    problem = policy_problem(name, spec)
    if problem is not None:
        raise ConfigError([f"phases: play: {brain}: {problem}"])
    actions = spec.action_spec
    weights = PolicyWeights(name, int(actions.continuous_size), tuple(int(b) for b in actions.discrete_branches), dict(params))
    return PolicySnapshot(version, weights, muscle=policy_path(name))
