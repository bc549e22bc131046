"""Self-play's opponents, as ML-Agents' ghost trainer defines them, for symmetric teams and for
asymmetric attacker / defender behaviors: per brain an ``OpponentPool`` (its snapshots, the one
its other teams play now, ELO; ML-Agents' GhostTrainer, which trains nothing: the brain's own
trainer learns), per phase a ``GhostController`` (which team learns). ``ml_arl.training.selfplay``
drives them across the run.

A *team* is the ``team`` of a behavior id ("Name?team=1"), or, for a behavior without one, its
brain name, so two behaviors of different names (Attacker, Defender) are two teams. One team
learns at a time (``GhostController``); it acts with the live policy and its trajectories go to
the trainer. Every other self-play team acts with a snapshot of its own brain: the newest
weights with probability ``play_against_latest_model_ratio``, otherwise one of the last
``window`` snapshots, taken every ``save_steps`` trainer steps; the choice is drawn again every
``swap_steps`` steps the other team plays, and whenever the learning team changes (every
``team_change`` steps of the learning brain; the environments are then reset).

ELO: after every finished (not interrupted) game of an agent of the learning team whose whole
group ended with it (ML-Agents' done_reached, all_group_dones_reached and not interrupted; an
agent without a group is its own group), the result is 1 if the last step's objective + group
reward is positive, 0 if negative, 0.5 otherwise. As in ML-Agents the game counts once per such
agent: a POCA team of two that scores moves the ELO twice;
``change = K * (result - expected)``, with the expected score against the opponent snapshot's
rating. The learner gains what the snapshot loses. K is ``elo_k_factor``, 1 by default as in
ML-Agents. Written as "Self-play/ELO"; kept in training_status.json
("elo") and read back on --resume.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import numpy as np

from ml_arl.core.actor_weights import PolicySnapshot
from ml_arl.core.behavior_id import team_of
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import SelfPlaySettings

logger = logging.getLogger(__name__)


def expected_score(rating: float, opponent: float) -> float:
    return 1.0 / (1.0 + 10.0 ** ((opponent - rating) / 400.0))


def game_result(final: float) -> float:
    return 1.0 if final > 0 else 0.0 if final < 0 else 0.5


class GhostController:
    """Which team learns, in a fixed rotation over the self-play teams."""

    def __init__(self) -> None:
        self.teams: list[str] = []
        self.ghosts: dict[str, OpponentPool] = {}
        self.index = 0
        self.reset_pending = False

    def register(self, team: str, ghost: OpponentPool) -> None:
        if team not in self.ghosts:
            self.teams.append(team)
            self.ghosts[team] = ghost

    @property
    def learning_team(self) -> Optional[str]:
        return self.teams[self.index] if self.teams else None

    def change_learning_team(self) -> None:
        """The next team whose brain still trains learns now (none left: nothing changes)."""
        for offset in range(1, len(self.teams)):
            index = (self.index + offset) % len(self.teams)
            if not self.ghosts[self.teams[index]].done and self.teams[index] != self.learning_team:
                self.index = index
                self.reset_pending = True
                logger.info("Self-play: team %s learns now", self.learning_team)
                return

    def opponent(self) -> Optional[OpponentPool]:
        for team in self.teams:
            if team != self.learning_team:
                return self.ghosts[team]
        return None

    def elo_change(self, rating: float, result: float, k: float) -> float:
        opponent = self.opponent()
        opponent_rating = opponent.opponent_elo() if opponent is not None else rating
        change = k * (result - expected_score(rating, opponent_rating))
        if opponent is not None:
            opponent.change_opponent_elo(change)
        return change


class _Snapshot:
    __slots__ = ("weights", "elo")

    def __init__(self, weights: Any, elo: float):
        self.weights = weights
        self.elo = elo


class OpponentPool:
    """Self-play bookkeeping of one brain: snapshots of its weights, the opponent its
    non-learning teams play with, its ELO. The brain's own trainer does the learning."""

    def __init__(self, brain: str, settings: SelfPlaySettings, controller: GhostController, stats: StatsReporter, seed: int):
        self.brain = brain
        self.settings = settings
        self.controller = controller
        self.stats = stats
        self.rng = np.random.default_rng(seed)
        self.elo = float(settings.initial_elo)
        self.teams: dict[str, str] = {}  # behavior id -> team
        self.snapshots: list[_Snapshot] = []
        self.snapshot_counter = 0
        self.current_opponent = -1  # index into snapshots; -1 = the latest weights
        self.live: Optional[PolicySnapshot] = None  # the newest policy the trainer published
        self.ghost_weights: Any = None
        self.ghost_serial = 0
        self.last_save_step = 0
        self.last_team_change_step = 0
        self.ghost_step = 0
        self.last_swap_ghost_step = 0
        self.games = 0
        self.done = False  # the brain reached its step limit

    # ------------------------------------------------------------------ teams
    def add_behavior(self, behavior_id: str) -> None:
        team = team_of(behavior_id)
        self.teams[behavior_id] = team
        self.controller.register(team, self)

    def join(self, controller: GhostController) -> None:
        """A new phase: the teams of this brain join the phase's controller (ELO and snapshots carry over)."""
        behaviors = list(self.teams)
        self.controller = controller
        self.teams = {}
        for behavior_id in behaviors:
            self.add_behavior(behavior_id)

    def is_learning(self, behavior_id: str) -> bool:
        return self.teams.get(behavior_id) == self.controller.learning_team

    def start(self, live: PolicySnapshot, step: int) -> None:
        """A phase (or the run) begins: the current weights are the first snapshot."""
        self.live = live
        self.last_save_step = self.last_team_change_step = step
        if not self.snapshots:
            self._snapshot()
        self.swap()

    # ------------------------------------------------------------------ snapshots and swaps
    def _snapshot(self) -> None:
        assert self.live is not None
        snap = _Snapshot(self.live.weights, self.elo)
        if len(self.snapshots) < self.settings.window:
            self.snapshots.append(snap)
        else:
            self.snapshots[self.snapshot_counter] = snap
        self.snapshot_counter = (self.snapshot_counter + 1) % self.settings.window

    def swap(self) -> None:
        """Draw the opponent this brain's non-learning teams play with."""
        if self.rng.uniform() < 1.0 - self.settings.play_against_latest_model_ratio and self.snapshots:
            self.current_opponent = int(self.rng.integers(len(self.snapshots)))
            self.ghost_weights = self.snapshots[self.current_opponent].weights
        else:
            self.current_opponent = -1
            self.ghost_weights = self.live.weights if self.live is not None else None
        self.ghost_serial += 1
        self.last_swap_ghost_step = self.ghost_step

    def on_policy(self, live: PolicySnapshot) -> None:
        self.live = live

    def after_trainer_step(self, step: int, finished: bool = False) -> None:
        """Snapshots every save_steps; the learning team changes every team_change steps, and
        when this brain has finished training (the other teams still learn)."""
        self.done = finished
        if step - self.last_save_step >= self.settings.save_steps:
            self.last_save_step = step
            self._snapshot()
        team_change = self.settings.team_change or 5 * self.settings.save_steps
        if self.controller.learning_team in self.teams.values() and (finished or step - self.last_team_change_step >= team_change):
            self.last_team_change_step = step
            self.controller.change_learning_team()

    def count_ghost_steps(self, n: int) -> bool:
        """Steps the non-learning teams played; True when it is time to swap opponents."""
        self.ghost_step += n
        return self.ghost_step - self.last_swap_ghost_step >= self.settings.swap_steps

    def snapshot_for(self, behavior_id: str) -> Optional[PolicySnapshot]:
        """The live policy for the learning team, the drawn snapshot for the others (its version
        is negative: a serial number of the draw)."""
        if self.live is None:
            return None
        if self.is_learning(behavior_id):
            return self.live
        assert self.ghost_weights is not None
        return PolicySnapshot(-self.ghost_serial, self.ghost_weights, self.live.muscle)

    # ------------------------------------------------------------------ ELO
    def opponent_elo(self) -> float:
        return self.snapshots[self.current_opponent].elo if self.current_opponent >= 0 else self.elo

    def change_opponent_elo(self, change: float) -> None:
        if self.current_opponent >= 0:
            self.snapshots[self.current_opponent].elo -= change

    def record_game(self, final: float) -> None:
        change = self.controller.elo_change(self.elo, game_result(final), self.settings.elo_k_factor)
        self.elo += change
        self.games += 1
        self.stats.add_stat("Self-play/ELO", self.elo)
