"""A gymnasium environment seen through mlagents_envs' BaseEnv: one agent per copy, auto-reset.

The behavior is named after the env id without its version (CartPole-v1 -> CartPole).
``env_settings.num_areas: K`` (ML-Agents' "training areas per instance") builds K copies of the
env in each worker, stepped together as agents 0..K-1 of that behavior: the policy then acts on
K observations at once and one message carries K agents' steps, which is what makes small
gymnasium tasks fast. Copy 0 is seeded with the worker's seed, copy i with a seed derived
from it; each copy resets on its own when its episode ends (it then shows up in the
TerminalSteps and, with its new episode, in the DecisionSteps of the same step, as Unity agents
do).
``terminated`` ends the episode; ``truncated`` ends it as *interrupted*, so the trainer
bootstraps its value. Box observations are flattened to float32; Discrete observations are
one-hot. Box actions are continuous, mapped from [-1, 1] onto the space's bounds when they are
finite; Discrete and MultiDiscrete actions are discrete branches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional, Union

import gymnasium
import numpy as np
from mlagents_envs.base_env import (
    ActionTuple,
    DecisionSteps,
    TerminalSteps,
)

from ml_arl.envs.adapters.space_codec import SpaceCodec
from ml_arl.envs.single_behavior import SingleBehaviorEnv


def behavior_name_for(env_id: str) -> str:
    """CartPole-v1 -> CartPole; ALE/Pong-v5 -> Pong."""
    name = env_id.rsplit("/", 1)[-1]
    head, sep, version = name.rpartition("-v")
    return head if sep and version.isdigit() else name


class GymnasiumEnv(SingleBehaviorEnv):
    def __init__(
        self,
        envs: Union[gymnasium.Env, Sequence[gymnasium.Env]],
        behavior_name: str,
        seed: Optional[int] = None,
    ):
        self.envs: list[gymnasium.Env] = [envs] if isinstance(envs, gymnasium.Env) else list(envs)
        if not self.envs:
            raise ValueError("GymnasiumEnv needs at least one gymnasium env")
        self.behavior_name = behavior_name
        n = self.n_agents = len(self.envs)
        self._seeds: list[Optional[int]] = [None] * n
        if seed is not None:
            children = np.random.SeedSequence(seed).spawn(n)
            self._seeds = [seed, *(int(c.generate_state(1)[0]) for c in children[1:])]
        self._codec = SpaceCodec(behavior_name, self.envs[0].observation_space, self.envs[0].action_space)
        self._obs_shape = self._codec.obs_shape
        self._spec = self._codec.spec
        self._decision = DecisionSteps.empty(self._spec)
        self._no_terminal = TerminalSteps.empty(self._spec)
        self._terminal = self._no_terminal
        self._agents = np.arange(n, dtype=np.int32)
        self._zero_i = np.zeros(n, np.int32)
        self._zero_f = np.zeros(n, np.float32)

    def _obs_into(self, out: np.ndarray, i: int, obs: Any) -> None:
        self._codec.obs_into(out, i, obs)

    def reset(self) -> None:
        obs = np.empty((self.n_agents, *self._obs_shape), np.float32)
        for i, env in enumerate(self.envs):
            first, _ = env.reset(seed=self._seeds[i])
            self._obs_into(obs, i, first)
        self._seeds = [None] * self.n_agents  # seed once; later resets continue the same random streams
        self._decision = DecisionSteps([obs], self._zero_f, self._agents, None, self._zero_i, self._zero_f)
        self._terminal = self._no_terminal

    def _to_env_action(self, action: ActionTuple, i: int = 0) -> Any:
        return self._codec.env_action(action, i)

    def step(self) -> None:
        n = self.n_agents
        action = self._take_actions()
        obs = np.empty((n, *self._obs_shape), np.float32)
        reward = np.empty(n, np.float32)
        done: list[int] = []
        final_obs: list[Any] = []
        interrupted: list[bool] = []
        for i, env in enumerate(self.envs):
            o, r, terminated, truncated, _ = env.step(self._to_env_action(action, i))
            reward[i] = r
            if terminated or truncated:
                done.append(i)
                final_obs.append(o)
                interrupted.append(bool(truncated and not terminated))
                o, _ = env.reset()
            self._obs_into(obs, i, o)
        if done:
            idx = np.asarray(done, dtype=np.int64)
            last = np.empty((len(done), *self._obs_shape), np.float32)
            for k, o in enumerate(final_obs):
                self._obs_into(last, k, o)
            self._terminal = TerminalSteps(
                [last], reward[idx], np.asarray(interrupted), self._agents[idx], self._zero_i[idx], self._zero_f[idx]
            )
            reward[idx] = 0.0  # the new episode's first decision carries no reward
        else:
            self._terminal = self._no_terminal
        self._decision = DecisionSteps([obs], reward, self._agents, None, self._zero_i, self._zero_f)

    def close(self) -> None:
        for env in self.envs:
            env.close()


def make_gymnasium_env(env_id: str, seed: Optional[int] = None, num_areas: int = 1, **kwargs: Any) -> GymnasiumEnv:
    """``num_areas`` copies of ``gymnasium.make(env_id, **kwargs)`` as one BaseEnv."""
    return GymnasiumEnv([gymnasium.make(env_id, **kwargs) for _ in range(num_areas)], behavior_name_for(env_id), seed)
