"""Small BehaviorSpec helpers shared by the Python environments, the networks, the trainers' checkpoints and
the demo reader; below all of them (mlagents_envs only)."""

from __future__ import annotations

from typing import Any

from mlagents_envs.base_env import ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType


def vector_obs_spec(size: int, name: str = "vector") -> ObservationSpec:
    return ObservationSpec((size,), (DimensionProperty.NONE,), ObservationType.DEFAULT, name)


def is_variable_length(obs: ObservationSpec) -> bool:
    """Whether an observation's dimension properties mark it variable-length (a BufferSensor's:
    (max_entities, entity_size) with VARIABLE_SIZE on the first axis)."""
    return any(int(p) & int(DimensionProperty.VARIABLE_SIZE) for p in obs.dimension_property)


def spec_to_plain(spec: BehaviorSpec) -> dict[str, Any]:
    """A BehaviorSpec as plain lists and numbers (a checkpoint holds it; torch.load(weights_only=True) reads it)."""
    return {
        "observations": [
            {"shape": [int(d) for d in o.shape], "dimension_property": [int(p.value) for p in o.dimension_property],
             "observation_type": int(o.observation_type.value), "name": str(o.name)}
            for o in spec.observation_specs
        ],
        "continuous_size": int(spec.action_spec.continuous_size),
        "discrete_branches": [int(b) for b in spec.action_spec.discrete_branches],
    }


def spec_from_plain(data: dict[str, Any]) -> BehaviorSpec:
    """The inverse of ``spec_to_plain``."""
    observations = [
        ObservationSpec(tuple(o["shape"]), tuple(DimensionProperty(p) for p in o["dimension_property"]),
                        ObservationType(o["observation_type"]), o["name"])
        for o in data["observations"]
    ]
    return BehaviorSpec(observations, ActionSpec(int(data["continuous_size"]), tuple(data["discrete_branches"])))
