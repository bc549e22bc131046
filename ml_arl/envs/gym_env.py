"""A gymnasium environment seen through mlagents_envs' BaseEnv: one agent, auto-reset.

The behavior is named after the env id without its version (CartPole-v1 -> CartPole).
``terminated`` ends the episode; ``truncated`` ends it as *interrupted*, so the trainer
bootstraps its value. Box observations are flattened to float32; Discrete observations are
one-hot. Box actions are continuous, mapped from [-1, 1] onto the space's bounds when they are
finite; Discrete and MultiDiscrete actions are discrete branches.
"""

from __future__ import annotations

from typing import Any, Optional

import gymnasium
import numpy as np
from gymnasium import spaces
from mlagents_envs.base_env import (
    ActionSpec,
    ActionTuple,
    BaseEnv,
    BehaviorMapping,
    BehaviorSpec,
    DecisionSteps,
    TerminalSteps,
)

from ml_arl.envs.builtin import vector_obs_spec


def behavior_name_for(env_id: str) -> str:
    """CartPole-v1 -> CartPole; ALE/Pong-v5 -> Pong."""
    name = env_id.rsplit("/", 1)[-1]
    head, sep, version = name.rpartition("-v")
    return head if sep and version.isdigit() else name


class GymnasiumEnv(BaseEnv):
    def __init__(self, env: gymnasium.Env, behavior_name: str, seed: Optional[int] = None):
        self.env = env
        self.behavior_name = behavior_name
        self._seed = seed
        obs_space = env.observation_space
        if isinstance(obs_space, spaces.Box):
            self._obs_size = int(np.prod(obs_space.shape))
            self._one_hot = 0
        elif isinstance(obs_space, spaces.Discrete):
            self._obs_size = int(obs_space.n)
            self._one_hot = int(obs_space.n)
        else:
            raise TypeError(f"gymnasium observation space {obs_space} is not supported (Box or Discrete only)")
        act_space = env.action_space
        self._act_low: Optional[np.ndarray] = None
        if isinstance(act_space, spaces.Box):
            action_spec = ActionSpec(int(np.prod(act_space.shape)), ())
            if np.all(np.isfinite(act_space.low)) and np.all(np.isfinite(act_space.high)):
                self._act_low = act_space.low.astype(np.float32).reshape(-1)
                self._act_high = act_space.high.astype(np.float32).reshape(-1)
        elif isinstance(act_space, spaces.Discrete):
            action_spec = ActionSpec(0, (int(act_space.n),))
        elif isinstance(act_space, spaces.MultiDiscrete):
            action_spec = ActionSpec(0, tuple(int(n) for n in act_space.nvec))
        else:
            raise TypeError(f"gymnasium action space {act_space} is not supported (Box, Discrete, MultiDiscrete)")
        self._spec = BehaviorSpec([vector_obs_spec(self._obs_size)], action_spec)
        self._action: Optional[ActionTuple] = None
        self._decision = DecisionSteps.empty(self._spec)
        self._terminal = TerminalSteps.empty(self._spec)
        self._agent = np.zeros(1, np.int32)
        self._zero_i = np.zeros(1, np.int32)
        self._zero_f = np.zeros(1, np.float32)

    def _obs(self, obs: Any) -> np.ndarray:
        if self._one_hot:
            out = np.zeros((1, self._one_hot), np.float32)
            out[0, int(obs)] = 1.0
            return out
        return np.asarray(obs, dtype=np.float32).reshape(1, -1)

    @property
    def behavior_specs(self) -> BehaviorMapping:
        return BehaviorMapping({self.behavior_name: self._spec})

    def reset(self) -> None:
        obs, _ = self.env.reset(seed=self._seed)
        self._seed = None  # seed once; later resets continue the same random stream
        self._decision = DecisionSteps([self._obs(obs)], self._zero_f, self._agent, None, self._zero_i, self._zero_f)
        self._terminal = TerminalSteps.empty(self._spec)

    def _to_env_action(self, action: ActionTuple) -> Any:
        space = self.env.action_space
        if isinstance(space, spaces.Box):
            a = np.clip(action.continuous[0], -1.0, 1.0)
            if self._act_low is not None:
                a = self._act_low + (a + 1.0) * 0.5 * (self._act_high - self._act_low)
            return a.reshape(space.shape).astype(space.dtype)
        if isinstance(space, spaces.Discrete):
            return int(action.discrete[0, 0]) + int(space.start)
        return action.discrete[0].astype(np.int64)

    def step(self) -> None:
        action = self._action if self._action is not None else self._spec.action_spec.empty_action(1)
        self._action = None
        obs, reward, terminated, truncated, _ = self.env.step(self._to_env_action(action))
        r = np.array([reward], np.float32)
        if terminated or truncated:
            interrupted = np.array([bool(truncated and not terminated)])
            self._terminal = TerminalSteps([self._obs(obs)], r, interrupted, self._agent, self._zero_i, self._zero_f)
            obs, _ = self.env.reset()
            self._decision = DecisionSteps([self._obs(obs)], self._zero_f, self._agent, None, self._zero_i, self._zero_f)
        else:
            self._terminal = TerminalSteps.empty(self._spec)
            self._decision = DecisionSteps([self._obs(obs)], r, self._agent, None, self._zero_i, self._zero_f)

    def get_steps(self, behavior_name: str) -> tuple[DecisionSteps, TerminalSteps]:
        return self._decision, self._terminal

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        self._action = action

    def set_action_for_agent(self, behavior_name: str, agent_id: int, action: ActionTuple) -> None:
        self._action = action

    def close(self) -> None:
        self.env.close()


def make_gymnasium_env(env_id: str, seed: Optional[int] = None, **kwargs: Any) -> GymnasiumEnv:
    return GymnasiumEnv(gymnasium.make(env_id, **kwargs), behavior_name_for(env_id), seed)
