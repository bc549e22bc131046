"""The part of ``BaseEnv`` every environment of one behavior whose agents all decide each step
shares (the built-in games, a gymnasium env's copies): the behavior's spec, the steps, the actions
set for the next step."""

from __future__ import annotations

from typing import Optional

from mlagents_envs.base_env import ActionTuple, BaseEnv, BehaviorMapping, BehaviorSpec, DecisionSteps, TerminalSteps


class SingleBehaviorEnv(BaseEnv):
    """A subclass sets ``behavior_name``, ``_spec`` and ``n_agents``, keeps ``_decision`` and
    ``_terminal`` up to date, and starts ``step()`` with ``_take_actions()``."""

    behavior_name: str
    _spec: BehaviorSpec
    n_agents: int
    _decision: DecisionSteps
    _terminal: TerminalSteps
    _actions: Optional[ActionTuple] = None

    @property
    def behavior_specs(self) -> BehaviorMapping:
        return BehaviorMapping({self.behavior_name: self._spec})

    def get_steps(self, behavior_name: str) -> tuple[DecisionSteps, TerminalSteps]:
        return self._decision, self._terminal

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        self._actions = action

    def set_action_for_agent(self, behavior_name: str, agent_id: int, action: ActionTuple) -> None:
        if self._actions is None:
            self._actions = self._spec.action_spec.empty_action(self.n_agents)
        self._actions.continuous[agent_id] = action.continuous[0]
        self._actions.discrete[agent_id] = action.discrete[0]

    def _take_actions(self) -> ActionTuple:
        """The actions set for this step (empty ones when none were), forgotten for the next."""
        actions = self._actions if self._actions is not None else self._spec.action_spec.empty_action(self.n_agents)
        self._actions = None
        return actions

    def close(self) -> None:
        pass
