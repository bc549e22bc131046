"""The one place a ``PolicyMessage`` is built: from a brain's newest ``PolicySnapshot`` (or the
self-play opponent's snapshot), its settings in the current phase and whether its experience is
learned from, for each behavior id of the brain; then handed to the env manager, which sends it
to the workers with their next step request.
"""

from __future__ import annotations

from typing import Optional

from ml_arl.envs.managers.env_manager import EnvManager
from ml_arl.messages import PolicyMessage, PolicySnapshot
from ml_arl.run.selfplay import SelfPlay
from ml_arl.settings import PhaseSettings, RunOptions, TrainerSettings
from ml_arl.trainers.base import Trainer


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


class PolicyRouter:
    def __init__(self, env_manager: EnvManager, options: RunOptions):
        self.env_manager = env_manager
        self.train_model = not options.checkpoint_settings.inference
        self.record_steps = options.results_store.record_steps
        self.record_demo = options.checkpoint_settings.record_demo is not None
        self.live: dict[str, PolicySnapshot] = {}  # brain -> the newest policy its trainer published

    def push(self, trainer: Trainer, behavior_ids: list[str], phase: Optional[PhaseSettings], selfplay: SelfPlay) -> None:
        """Send the brain's policy to every behavior id it acts for: the live policy, or for a
        self-play team that does not learn now, the opponent snapshot drawn for it."""
        brain = trainer.behavior
        live = self.live[brain]
        for behavior_id in behavior_ids:
            snapshot = selfplay.snapshot_for(brain, behavior_id, live)
            if snapshot is None:
                continue
            learning_team = selfplay.is_learning(brain, behavior_id)
            # trajectories are built for a team that learns, with --inference (what was acted is
            # counted), when the store records every step and with --record-demo (a frozen brain's
            # episodes too); never for a self-play opponent
            collect = learning_team and (trainer.learning or not self.train_model or self.record_steps or self.record_demo)
            self.env_manager.set_policy(behavior_id, policy_message(snapshot, trainer.settings, phase, collect))

