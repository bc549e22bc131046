"""Tag: a small symmetric two-team race for self-play ("tag the flag").

Each of ``num_areas`` independent arenas is a 1-D track of ``2 * HALF_CELLS + 1`` cells (positions
-1..1 in steps of ``1 / HALF_CELLS``) with a flag on a random cell and one agent of each team,
behaviors "Tag?team=0" and "Tag?team=1" (the same specs). Both agents start on independent random
cells at least ``MIN_START_DISTANCE`` cells from the flag, so both teams have the same distance
distribution. Actions: one discrete branch, 0 = stay, 1 = left, 2 = right (a move stops at the ends).

Observation (3 floats, from the agent's own perspective; the track is mirror-symmetric, so one
policy serves both teams): own position, opponent position - own position, flag position - own
position.

The first agent on the flag wins: reward +1 for it, -1 for the other, and the episode of both ends
(terminated). Both on the flag in the same step: a draw, 0 each (terminated). After
``max_episode_steps`` steps without a winner: 0 each, interrupted. Otherwise the reward is 0.
Team 0 agent ids are 0..num_areas-1, team 1 ids num_areas..2*num_areas-1 (agent ``i`` of each
team is arena ``i``); an arena whose episode ends starts a new one at once, so its agents appear in
the TerminalSteps and the DecisionSteps of the same step, as in the other built-in environments.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from mlagents_envs.base_env import (
    ActionSpec,
    BehaviorSpec,
    DecisionSteps,
    TerminalSteps,
)

from ml_arl.core.behavior_specs import vector_obs_spec
from ml_arl.envs.games.teams import TwoTeamEnv

HALF_CELLS = 8
MIN_START_DISTANCE = 3
TEAMS = ("Tag?team=0", "Tag?team=1")
MOVES = np.array([0, -1, 1])  # stay, left, right


class Tag(TwoTeamEnv):
    """Two-team flag race in ``num_areas`` arenas (see the module doc)."""

    name = "Tag"
    teams = TEAMS

    def __init__(self, seed: int = 0, num_areas: int = 8, max_episode_steps: int = 30):
        self.num_areas = num_areas
        self.max_episode_steps = max_episode_steps
        self.rng = np.random.default_rng(seed)
        obs = vector_obs_spec(3)
        self._spec = BehaviorSpec([obs], ActionSpec(0, (3,)))
        self._ids = [np.arange(num_areas, dtype=np.int32) + team * num_areas for team in range(2)]
        self.pos = np.zeros((2, num_areas), np.int64)  # [team, arena], in cells
        self.flag = np.zeros(num_areas, np.int64)
        self.t = np.zeros(num_areas, np.int64)
        self._actions: list[Optional[np.ndarray]] = [None, None]
        self._zero_i = np.zeros(num_areas, np.int32)
        self._zero_f = np.zeros(num_areas, np.float32)
        self._no_terminal = TerminalSteps.empty(self._spec)
        self._steps: list[tuple[DecisionSteps, TerminalSteps]] = []

    def set_environment_parameters(self, params: dict[str, float]) -> None:
        """Tag has no environment parameters: any key is an error."""
        if params:
            raise ValueError(f"Tag has no environment parameters; got {', '.join(map(repr, params))}")

    def _reset_arenas(self, idx: np.ndarray) -> None:
        n = len(idx)
        self.flag[idx] = self.rng.integers(-HALF_CELLS, HALF_CELLS + 1, n)
        start = self.rng.integers(-HALF_CELLS, HALF_CELLS + 1, (2, n))
        while True:  # uniform over the cells at least MIN_START_DISTANCE from the flag: redraw the others
            close = np.abs(start - self.flag[idx]) < MIN_START_DISTANCE
            if not close.any():
                break
            start[close] = self.rng.integers(-HALF_CELLS, HALF_CELLS + 1, int(close.sum()))
        self.pos[:, idx] = start
        self.t[idx] = 0

    def _observe(self, team: int) -> np.ndarray:
        own, other = self.pos[team], self.pos[1 - team]
        return (np.stack([own, other - own, self.flag - own], axis=1) / HALF_CELLS).astype(np.float32)

    # --- BaseEnv

    def reset(self) -> None:
        self._reset_arenas(np.arange(self.num_areas))
        self._actions = [None, None]
        self._steps = [
            (DecisionSteps([self._observe(team)], self._zero_f, self._ids[team], None, self._zero_i, self._zero_f),
             self._no_terminal)
            for team in range(2)
        ]

    def step(self) -> None:
        if not self._steps:
            self.reset()
        for team in range(2):
            act = self._actions[team]
            move = 0 if act is None else MOVES[act]
            self.pos[team] = np.clip(self.pos[team] + move, -HALF_CELLS, HALF_CELLS)
        self._actions = [None, None]
        self.t += 1
        on_flag = self.pos == self.flag  # [team, arena]
        terminated = on_flag.any(axis=0)
        interrupted = (self.t >= self.max_episode_steps) & ~terminated
        done = terminated | interrupted
        score = on_flag[0].astype(np.float32) - on_flag[1].astype(np.float32)  # +1 team 0 wins, -1 team 1, 0 draw
        rewards = [score, -score]
        obs = [self._observe(team) for team in range(2)]
        terminals = [self._no_terminal, self._no_terminal]
        if done.any():
            idx = np.nonzero(done)[0]
            terminals = [
                TerminalSteps([obs[team][idx]], rewards[team][idx], interrupted[idx], self._ids[team][idx],
                              self._zero_i[idx], self._zero_f[idx])
                for team in range(2)
            ]
            self._reset_arenas(idx)
            obs = [self._observe(team) for team in range(2)]
            rewards = [np.where(done, 0.0, r).astype(np.float32) for r in rewards]
        self._steps = [
            (DecisionSteps([obs[team]], rewards[team], self._ids[team], None, self._zero_i, self._zero_f),
             terminals[team])
            for team in range(2)
        ]
