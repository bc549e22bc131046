"""Small BehaviorSpec helpers shared by the Python environments."""

from __future__ import annotations

from mlagents_envs.base_env import DimensionProperty, ObservationSpec, ObservationType


def vector_obs_spec(size: int, name: str = "vector") -> ObservationSpec:
    return ObservationSpec((size,), (DimensionProperty.NONE,), ObservationType.DEFAULT, name)
