"""The one place a ``PolicyMessage`` is built: from a brain's newest ``PolicySnapshot`` (or the
self-play opponent's snapshot), its settings in the current phase and whether its experience is
learned from, for each behavior id of the brain; then handed to the env manager, which sends it
to the workers with their next step request.
"""

from __future__ import annotations

from typing import Any, Optional

from ml_arl.core.actor_weights import PolicyMessage, PolicySnapshot
from ml_arl.core.exceptions import ConfigError
from ml_arl.envs.backends.env_manager import EnvManager
from ml_arl.settings import PhaseSettings, RunOptions, TrainerSettings
from ml_arl.trainers.trainer import Trainer
from ml_arl.training.selfplay import SelfPlay


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


def fixed_policy_snapshot(name: str, params: dict[str, Any], trainer: Trainer) -> PolicySnapshot:
    """The snapshot that makes fixed policy ``name`` play the trainer's behavior; ConfigError (one
    line) when it cannot play it (a droop on a behavior without inverter actions)."""
    from ml_arl.rules import PolicyWeights, policy_path, policy_problem

    problem = policy_problem(name, trainer.spec)
    if problem is not None:
        raise ConfigError([f"phases: play: {trainer.behavior}: {problem}"])
    spec = trainer.spec.action_spec
    weights = PolicyWeights(name, int(spec.continuous_size), tuple(int(b) for b in spec.discrete_branches), dict(params))
    return PolicySnapshot(trainer.policy_version, weights, muscle=policy_path(name))


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
        policy = phase.plays(brain) if phase is not None else None
        if policy is not None:  # a fixed policy plays the behavior in this phase (ml_arl.rules)
            live = fixed_policy_snapshot(policy.name, policy.params, trainer)
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

