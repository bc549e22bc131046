"""The one place a ``PolicyMessage`` is built: a trainer's snapshot with the acting settings of its
behavior and phase (``ml_arl.training.router`` for every policy of a run, ``ml_arl.training.quick_start``
for the first). Torch-free."""

from __future__ import annotations

from typing import Optional

from ml_arl.core.actor_weights import PolicyMessage, PolicySnapshot
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
