"""Small BehaviorSpec helpers shared by the Python environments, the networks and the demo reader."""

from __future__ import annotations

from mlagents_envs.base_env import DimensionProperty, ObservationSpec, ObservationType


def vector_obs_spec(size: int, name: str = "vector") -> ObservationSpec:
    return ObservationSpec((size,), (DimensionProperty.NONE,), ObservationType.DEFAULT, name)


def is_variable_length(obs: ObservationSpec) -> bool:
    """Whether an observation's dimension properties mark it variable-length (a BufferSensor's:
    (max_entities, entity_size) with VARIABLE_SIZE on the first axis)."""
    return any(int(p) & int(DimensionProperty.VARIABLE_SIZE) for p in obs.dimension_property)
