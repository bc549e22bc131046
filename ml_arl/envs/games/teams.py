"""The behavior plumbing of a built-in two-team game (Tag, SoccerLine): two behaviors
"<Name>?team=0" and "<Name>?team=1" with the same spec, one discrete branch per agent, and fixed
agent ids, contiguous per team (``_ids[team]``). A game fills ``_steps`` (each team's
DecisionSteps and TerminalSteps) in ``reset`` and ``step``, and reads ``_actions`` (each team's
chosen action per agent, None until set)."""

from __future__ import annotations

from typing import Optional

import numpy as np
from mlagents_envs.base_env import ActionTuple, BaseEnv, BehaviorMapping, BehaviorSpec, DecisionSteps, TerminalSteps


class TwoTeamEnv(BaseEnv):
    name: str
    teams: tuple[str, str]
    _spec: BehaviorSpec
    _ids: list[np.ndarray]
    _steps: list[tuple[DecisionSteps, TerminalSteps]]
    _actions: list[Optional[np.ndarray]]

    @property
    def behavior_specs(self) -> BehaviorMapping:
        return BehaviorMapping(dict.fromkeys(self.teams, self._spec))

    def _team(self, behavior_name: str) -> int:
        if behavior_name not in self.teams:
            raise KeyError(f"{self.name} has no behavior {behavior_name!r}; behaviors: {', '.join(self.teams)}")
        return self.teams.index(behavior_name)

    def get_steps(self, behavior_name: str) -> tuple[DecisionSteps, TerminalSteps]:
        team = self._team(behavior_name)
        if not self._steps:
            self.reset()
        return self._steps[team]

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        team = self._team(behavior_name)
        self._actions[team] = np.asarray(action.discrete).reshape(len(self._ids[team])).astype(np.int64)

    def set_action_for_agent(self, behavior_name: str, agent_id: int, action: ActionTuple) -> None:
        team = self._team(behavior_name)
        current = self._actions[team]
        if current is None:
            current = self._actions[team] = np.zeros(len(self._ids[team]), np.int64)
        current[int(agent_id) - int(self._ids[team][0])] = int(np.asarray(action.discrete).reshape(-1)[0])

    def close(self) -> None:
        pass
