"""Self-play across the run: a ghost (ml_arl.training.opponents.OpponentPool) per brain that has
``self_play`` and learns, one GhostController per phase deciding which team learns, opponent
swaps, and the ELO kept in training_status.json.

The rest of the run knows self-play through this class only. It asks two questions: does this
behavior id learn now (``is_learning``), and which snapshot does it act with (``snapshot_for``).
It is told of events: a brain or a team appeared (``brain_added``, ``team_added``), a game was
played (``episode_ended``), a team acted (``acted``: True when the brain's opponents were swapped),
a trainer published a policy (``policy_published``) or stepped (``trainer_stepped``), a phase began
(``new_phase``); and ``take_reset`` names
the brains whose games start afresh because the learning team changed. A run without self-play
passes through the same calls, each a no-op for a brain without a ghost.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Optional

from ml_arl.core.actor_weights import PolicySnapshot
from ml_arl.core.experience import EpisodeStat
from ml_arl.trainers.trainer import Trainer
from ml_arl.training.opponents import GhostController, OpponentPool

logger = logging.getLogger(__name__)


class SelfPlay:
    def __init__(self, seed: int):
        self.seed = seed
        self.ghosts: dict[str, OpponentPool] = {}
        self.controller = GhostController()

    def setup(self, brain: str, trainer: Trainer, saved_elo: Callable[[str], Optional[float]]) -> None:
        """A ghost for a brain with self_play that learns (``saved_elo``: its ELO on --resume)."""
        if trainer.settings.self_play is None or not trainer.learning or brain in self.ghosts:
            return
        ghost = OpponentPool(brain, trainer.settings.self_play, self.controller, trainer.stats, self.seed + len(self.ghosts))
        elo = saved_elo(brain)
        if elo is not None:
            ghost.elo = elo
            logger.info("Self-play: %s continues at ELO %.1f", brain, elo)
        self.ghosts[brain] = ghost

    def brain_added(self, brain: str, trainer: Trainer, behavior_id: str, live: PolicySnapshot,
                    saved_elo: Callable[[str], Optional[float]]) -> None:
        """A new brain with its first team: a ghost if it has self_play and learns, started from
        its first policy."""
        self.setup(brain, trainer, saved_elo)
        if self.add_behavior(brain, behavior_id):
            self.start(brain, live, trainer.step)

    def team_added(self, brain: str, behavior_id: str) -> bool:
        """Another team of a known brain appeared; False if the brain has no self-play."""
        return self.add_behavior(brain, behavior_id)

    def add_behavior(self, brain: str, behavior_id: str) -> bool:
        """A team of ``brain`` appeared; False if the brain has no self-play."""
        ghost = self.ghosts.get(brain)
        if ghost is None:
            return False
        ghost.add_behavior(behavior_id)
        return True

    def start(self, brain: str, live: PolicySnapshot, step: int) -> None:
        ghost = self.ghosts.get(brain)
        if ghost is not None:
            ghost.start(live, step)

    def new_phase(
        self, trainers: Mapping[str, Trainer], behavior_ids: Mapping[str, list[str]], live: Mapping[str, PolicySnapshot],
        saved_elo: Callable[[str], Optional[float]],
    ) -> None:
        """The teams of the brains that learn in this phase; ELO and snapshots carry over."""
        self.controller = GhostController()
        for brain in list(self.ghosts):
            if not trainers[brain].learning:
                del self.ghosts[brain]  # frozen: it acts with its own weights, no ghosts
                continue
            self.ghosts[brain].join(self.controller)
        for brain, trainer in trainers.items():
            self.setup(brain, trainer, saved_elo)
            ghost = self.ghosts.get(brain)
            if ghost is not None:
                for behavior_id in behavior_ids[brain]:
                    if behavior_id not in ghost.teams:
                        ghost.add_behavior(behavior_id)
                ghost.start(live[brain], trainer.step)

    # ------------------------------------------------------------------ questions
    def is_learning(self, brain: str, behavior_id: str) -> bool:
        """False for a team that plays with a snapshot now (its experience is not learned from)."""
        ghost = self.ghosts.get(brain)
        return ghost is None or ghost.is_learning(behavior_id)

    def snapshot_for(self, brain: str, behavior_id: str, live: PolicySnapshot) -> Optional[PolicySnapshot]:
        ghost = self.ghosts.get(brain)
        return live if ghost is None else ghost.snapshot_for(behavior_id)

    def elo(self, brain: str) -> Optional[float]:
        ghost = self.ghosts.get(brain)
        return ghost.elo if ghost is not None else None

    # ------------------------------------------------------------------ events
    def on_policy(self, brain: str, live: PolicySnapshot) -> None:
        ghost = self.ghosts.get(brain)
        if ghost is not None:
            ghost.on_policy(live)

    def episode_ended(self, brain: str, ep: EpisodeStat) -> None:
        """A learning team's episode ended: a game, as ML-Agents' ghost counts it, when the whole
        group is done and it was not cut short."""
        if brain in self.ghosts and not ep.interrupted and ep.group_done:
            self.record_game(brain, ep.final)

    def acted(self, brain: str, behavior_id: str, n: int) -> bool:
        """``n`` steps of a team were played; True when the brain's opponents were swapped (its
        policies must be sent again)."""
        if not self.count_steps(brain, behavior_id, n):
            return False
        self.swap(brain)
        return True

    def policy_published(self, brain: str, live: PolicySnapshot) -> None:
        """The brain's trainer published a new policy."""
        self.on_policy(brain, live)

    def trainer_stepped(self, brain: str, trainer: Trainer) -> None:
        """The brain's trainer advanced (after its new policy, if any, was sent)."""
        self.after_trainer_step(brain, trainer)

    def elos(self, trainers: Mapping[str, Trainer]) -> dict[str, float]:
        """ELO of the self-play brains that save checkpoints (kept in training_status.json)."""
        return {brain: ghost.elo for brain, ghost in self.ghosts.items()
                if brain in trainers and trainers[brain].checkpoints is not None}

    def record_game(self, brain: str, final: float) -> None:
        self.ghosts[brain].record_game(final)

    def count_steps(self, brain: str, behavior_id: str, n: int) -> bool:
        """``n`` steps of a team played; True when it is time to swap the brain's opponents."""
        ghost = self.ghosts.get(brain)
        return ghost is not None and not ghost.is_learning(behavior_id) and ghost.count_ghost_steps(n)

    def swap(self, brain: str) -> None:
        self.ghosts[brain].swap()

    def after_trainer_step(self, brain: str, trainer: Trainer) -> None:
        ghost = self.ghosts.get(brain)
        if ghost is not None:
            ghost.after_trainer_step(trainer.step, trainer.step >= trainer.step_limit)

    def take_reset(self) -> list[str]:
        """The learning team changed: every game starts afresh (the caller resets the
        environments) and every self-play brain draws a new opponent. Returns those brains."""
        if not self.controller.reset_pending:
            return []
        self.controller.reset_pending = False
        for ghost in self.ghosts.values():
            ghost.swap()
        return list(self.ghosts)
