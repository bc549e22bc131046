"""gymnasium spaces as ML-Agents' specs, both ways, for one behavior: an observation (Box,
Discrete one-hot, an image Box of uint8, or a Dict of observation and action_mask) into rows of
arrays, and an action row back into what the space takes. gymnasium and PettingZoo environments
share it (ml_arl.envs.adapters.gym_env, ml_arl.envs.adapters.pettingzoo_env)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import numpy as np
from gymnasium import spaces
from mlagents_envs.base_env import (
    ActionSpec,
    ActionTuple,
    BehaviorSpec,
    DimensionProperty,
    ObservationSpec,
    ObservationType,
)

from ml_arl.core.behavior_specs import vector_obs_spec


def action_spec_of(space: Any) -> Optional[tuple[ActionSpec, Optional[np.ndarray], Optional[np.ndarray]]]:
    """A gymnasium action space as an ActionSpec, with the Box's bounds (flat float32, None when
    not finite: actions are then passed on as they are); None for a space we do not take."""
    if isinstance(space, spaces.Box):
        if np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)):
            low, high = space.low.astype(np.float32).reshape(-1), space.high.astype(np.float32).reshape(-1)
            return ActionSpec(int(np.prod(space.shape)), ()), low, high
        return ActionSpec(int(np.prod(space.shape)), ()), None, None
    if isinstance(space, spaces.Discrete):
        return ActionSpec(0, (int(space.n),)), None, None
    if isinstance(space, spaces.MultiDiscrete):
        return ActionSpec(0, tuple(int(n) for n in np.asarray(space.nvec).reshape(-1))), None, None
    return None


def is_image(space: spaces.Space) -> bool:
    return (
        isinstance(space, spaces.Box) and len(space.shape) == 3 and space.dtype == np.uint8 and 1 <= space.shape[2] <= 4
    )


class SpaceCodec:
    """One behavior's spaces: how an observation becomes arrays and an action row becomes an env action."""

    def __init__(self, behavior: str, obs_space: spaces.Space, act_space: spaces.Space):
        self.masked = False
        if isinstance(obs_space, spaces.Dict) and "observation" in obs_space.spaces:
            self.masked = "action_mask" in obs_space.spaces
            obs_space = obs_space.spaces["observation"]
        self.image = is_image(obs_space)
        self.one_hot = 0
        if self.image:
            h, w, c = (int(x) for x in obs_space.shape or ())
            self.obs_shape: tuple[int, ...] = (h, w, c)
            obs_spec = ObservationSpec(
                (h, w, c),
                (DimensionProperty.TRANSLATIONAL_EQUIVARIANCE, DimensionProperty.TRANSLATIONAL_EQUIVARIANCE,
                 DimensionProperty.NONE),
                ObservationType.DEFAULT, "image",
            )
        elif isinstance(obs_space, spaces.Box):
            self.obs_shape = (int(np.prod(obs_space.shape)),)
            obs_spec = vector_obs_spec(self.obs_shape[0])
        elif isinstance(obs_space, spaces.Discrete):
            self.one_hot = int(obs_space.n)
            self.obs_shape = (self.one_hot,)
            self.obs_start = int(obs_space.start)
            obs_spec = vector_obs_spec(self.one_hot)
        else:
            raise TypeError(f"behavior {behavior!r}: observation space {obs_space} is not supported "
                            "(Box, Discrete, or a Dict of observation and action_mask)")
        self.act_space = act_space
        converted = action_spec_of(act_space)
        if converted is None:
            raise TypeError(f"behavior {behavior!r}: action space {act_space} is not supported (Box, Discrete, MultiDiscrete)")
        action_spec, self.low, high = converted
        if high is not None:
            self.high = high
        if isinstance(act_space, spaces.MultiDiscrete):
            self.nvec_shape = np.shape(act_space.nvec)
        self.spec = BehaviorSpec([obs_spec], action_spec)
        self.branches = action_spec.discrete_branches
        self.masked = self.masked and bool(self.branches)

    def obs_into(self, out: np.ndarray, i: int, obs: Any) -> Optional[np.ndarray]:
        """Writes row ``i`` of ``out``; returns the forbidden-actions row (True = masked) or None."""
        forbidden = None
        if isinstance(obs, Mapping):
            if self.masked:
                allowed = np.asarray(obs["action_mask"]).reshape(-1).astype(bool)
                forbidden = ~allowed if allowed.any() else np.zeros(allowed.shape, bool)
            obs = obs["observation"]
        if self.image:
            out[i] = np.asarray(obs, dtype=np.float32) * (1.0 / 255.0)
        elif self.one_hot:
            out[i] = 0.0
            out[i, int(obs) - self.obs_start] = 1.0
        else:
            out[i] = np.asarray(obs, dtype=np.float32).reshape(-1)
        return forbidden

    def env_action(self, action: ActionTuple, i: int) -> Any:
        space = self.act_space
        if isinstance(space, spaces.Box):
            a = np.clip(action.continuous[i], -1.0, 1.0)
            if self.low is not None:
                a = self.low + (a + 1.0) * 0.5 * (self.high - self.low)
            return a.reshape(space.shape).astype(space.dtype)
        if isinstance(space, spaces.Discrete):
            return int(action.discrete[i, 0]) + int(space.start)
        return action.discrete[i].astype(np.int64).reshape(self.nvec_shape)
