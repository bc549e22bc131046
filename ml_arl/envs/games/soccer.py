"""SoccerLine: a small two-team, two-agents-a-team soccer on a line, for POCA with self-play
(ML-Agents' SoccerTwos in one dimension).

Each of ``num_areas`` independent arenas is a track of cells ``-HALF_CELLS..HALF_CELLS`` with a
ball and two agents of each team: behaviors "SoccerLine?team=0" (attacks to the right, +) and
"SoccerLine?team=1" (attacks to the left, -), the same specs. Each team of an arena is one group
(a MultiAgentGroup in Unity: group id ``team * num_areas + arena + 1``). The ball starts on cell
0; team 0 starts on random cells of the left half (-HALF_CELLS+1..-1), team 1 on the mirrored cells.

Actions: one discrete branch, 0 = stay, 1 = back (towards the own goal), 2 = forward (towards the
opponent's goal); a move stops at the ends. An agent that moves into or out of the ball's cell
kicks it one cell in its direction (so an agent on the ball that moves forward dribbles it); the
kicks of a step add up (two teammates kicking together move it two cells, one kick each way
cancels), then the ball moves (it stops at the ends).

Observation (5 floats, from the agent's own perspective, mirrored for team 1, so one policy serves
both teams): own position, ball - own position, teammate - own position, the two opponents'
positions - own position (in arena order), all divided by HALF_CELLS.

A goal (the ball on the last cell of a side) ends the episode of all four agents (terminated):
group reward +1 for the scoring team, -1 for the other; the individual reward is always 0. After
``max_episode_steps`` steps without a goal: group reward 0, interrupted. The agents keep their ids
(team 0: ``2 * arena + slot``, team 1: ``2 * num_areas + 2 * arena + slot``); an arena whose
episode ends starts a new one at once, so its agents appear in the TerminalSteps and the
DecisionSteps of the same step, as Unity agents of SoccerTwos do.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
from mlagents_envs.base_env import (
    ActionSpec,
    BehaviorSpec,
    DecisionSteps,
    TerminalSteps,
)

from ml_arl.core.behavior_specs import vector_obs_spec
from ml_arl.envs.games.teams import TwoTeamEnv

HALF_CELLS = 5
TEAM_SIZE = 2
TEAMS = ("SoccerLine?team=0", "SoccerLine?team=1")
MOVES = np.array([0, -1, 1])  # stay, back, forward (in the team's own direction)
FORWARD = np.array([1, -1])  # team 0 attacks +, team 1 attacks -


class SoccerLine(TwoTeamEnv):
    """Two teams of two on a line in ``num_areas`` arenas (see the module doc)."""

    name = "SoccerLine"
    teams = TEAMS

    def __init__(self, seed: int = 0, num_areas: int = 8, max_episode_steps: int = 40):
        self.num_areas = num_areas
        self.max_episode_steps = max_episode_steps
        self.rng = np.random.default_rng(seed)
        self._spec = BehaviorSpec([vector_obs_spec(5)], ActionSpec(0, (3,)))
        n = num_areas * TEAM_SIZE
        self._ids = [np.arange(n, dtype=np.int32) + team * n for team in range(2)]
        arena = np.repeat(np.arange(num_areas, dtype=np.int32), TEAM_SIZE)
        self._arena = arena  # arena of each agent row of a team
        self._groups = [arena + team * num_areas + 1 for team in range(2)]
        self.pos = np.zeros((2, num_areas, TEAM_SIZE), np.int64)  # [team, arena, slot], in cells
        self.ball = np.zeros(num_areas, np.int64)
        self.t = np.zeros(num_areas, np.int64)
        self._actions: list[Optional[np.ndarray]] = [None, None]
        self._zeros = np.zeros(n, np.float32)
        self._no_terminal = TerminalSteps.empty(self._spec)
        self._steps: list[tuple[DecisionSteps, TerminalSteps]] = []

    def set_environment_parameters(self, params: dict[str, Any]) -> None:
        """SoccerLine has no environment parameters: any key is an error."""
        if params:
            raise ValueError(f"SoccerLine has no environment parameters; got {', '.join(map(repr, params))}")

    def _reset_arenas(self, idx: np.ndarray) -> None:
        start = self.rng.integers(1, HALF_CELLS, (2, len(idx), TEAM_SIZE))
        self.pos[0, idx] = -start[0]
        self.pos[1, idx] = start[1]
        self.ball[idx] = 0
        self.t[idx] = 0

    def _observe(self, team: int) -> np.ndarray:
        sign = FORWARD[team]
        own = self.pos[team]  # [arena, slot]
        mate = own[:, ::-1]
        opp = self.pos[1 - team]
        cols = [own, self.ball[:, None] - own, mate - own, opp[:, :1] - own, opp[:, 1:] - own]
        obs = np.stack([c * sign for c in cols], axis=2) / HALF_CELLS  # [arena, slot, 5]
        return obs.reshape(-1, 5).astype(np.float32)

    def _decisions(self, team: int, obs: np.ndarray) -> DecisionSteps:
        return DecisionSteps([obs], self._zeros, self._ids[team], None, self._groups[team], self._zeros)

    # --- BaseEnv

    def reset(self) -> None:
        self._reset_arenas(np.arange(self.num_areas))
        self._actions = [None, None]
        self._steps = [(self._decisions(team, self._observe(team)), self._no_terminal) for team in range(2)]

    def step(self) -> None:
        if not self._steps:
            self.reset()
        kick = np.zeros(self.num_areas, np.int64)
        for team in range(2):
            act = self._actions[team]
            move = np.zeros((self.num_areas, TEAM_SIZE), np.int64) if act is None else (
                MOVES[act].reshape(self.num_areas, TEAM_SIZE) * FORWARD[team]
            )
            new = np.clip(self.pos[team] + move, -HALF_CELLS, HALF_CELLS)
            touch = (new == self.ball[:, None]) | (self.pos[team] == self.ball[:, None])
            kick += np.where((new != self.pos[team]) & touch, move, 0).sum(axis=1)
            self.pos[team] = new
        self._actions = [None, None]
        self.ball = np.clip(self.ball + kick, -HALF_CELLS, HALF_CELLS)
        self.t += 1
        score = (self.ball >= HALF_CELLS).astype(np.float32) - (self.ball <= -HALF_CELLS).astype(np.float32)
        terminated = score != 0
        interrupted = (self.t >= self.max_episode_steps) & ~terminated
        done = terminated | interrupted
        obs = [self._observe(team) for team in range(2)]
        terminals = [self._no_terminal, self._no_terminal]
        if done.any():
            rows = np.nonzero(done[self._arena])[0]  # the agent rows of the finished arenas
            arena = self._arena[rows]
            terminals = [
                TerminalSteps([obs[team][rows]], self._zeros[rows], interrupted[arena], self._ids[team][rows],
                              self._groups[team][rows], (score[arena] * FORWARD[team]).astype(np.float32))
                for team in range(2)
            ]
            self._reset_arenas(np.nonzero(done)[0])
            obs = [self._observe(team) for team in range(2)]
        self._steps = [(self._decisions(team, obs[team]), terminals[team]) for team in range(2)]
