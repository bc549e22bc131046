"""Documented bounds on sizes a config may ask for, and the memory check for network sizes.

The bounds keep a typo (``num_envs: 10000000``) from hanging the machine; they are far above what
one machine runs (docs/bad-input.md lists them). Torch-free: the CLI checks these
before anything starts.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from mlagents_envs.base_env import ObservationType

MAX_NUM_ENVS = 256  # worker processes on one machine
MAX_NUM_AREAS = 4096  # training areas (env copies / agent multipliers) per worker
MAX_STEPS_PER_MESSAGE = 4096
MAX_SEED = 2**31 - 1  # numpy and torch take 32-bit seeds; worker i gets seed + i
MAX_INT = 2**53  # any integer setting: larger is a typo (and loses precision as a float)
# bytes per network parameter: weights, gradient, Adam's two moments (float32) in the trainer,
# plus one float32 copy per worker's muscle and one in flight per worker
_TRAINER_COPIES = 4
_COPIES_PER_WORKER = 2


def available_memory_bytes() -> Optional[int]:
    """Memory the OS can give without swapping (MemAvailable), None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def mlp_parameters(inputs: int, hidden_units: int, num_layers: int, outputs: int) -> int:
    """Parameters of one MLP body + head: inputs -> hidden x num_layers -> outputs."""
    h = hidden_units
    return (inputs + 1) * h + (num_layers - 1) * (h + 1) * h + (h + 1) * outputs


def hyper_layer_parameters(inputs: int, hidden_units: int, goal: int) -> int:
    """Parameters of a goal-conditioned layer (ml_arl.networks.conditioning) beyond a plain layer's:
    a hypernetwork of two hidden layers whose output is the inputs x hidden_units weight matrix."""
    h = hidden_units
    return (goal + 1) * h + (h + 1) * h + (h + 1) * inputs * h + h - (inputs + 1) * h


def network_bytes(
    hidden_units: int, num_layers: int, num_envs: int, inputs: Optional[int] = None, outputs: int = 1, goal: int = 0
) -> int:
    """Estimated bytes of an actor and a critic of this shape, in the trainer and the workers.
    ``inputs`` unknown (before the environment tells its observations): taken as hidden_units.
    ``goal`` > 0: the bodies' last layers are goal-conditioned by a goal of that size."""
    inputs = inputs if inputs is not None else hidden_units
    params = 2 * mlp_parameters(inputs, hidden_units, num_layers, outputs)
    if goal:
        params += 2 * hyper_layer_parameters(inputs if num_layers == 1 else hidden_units, hidden_units, goal)
    return 4 * params * (_TRAINER_COPIES + _COPIES_PER_WORKER * num_envs)


def network_memory_problem(
    hidden_units: int, num_layers: int, num_envs: int, inputs: Optional[int] = None, outputs: int = 1,
    available: Optional[int] = None, goal: int = 0,
) -> Optional[str]:
    """Why networks of this shape cannot fit in memory (None if they can or memory is unknown)."""
    need = network_bytes(hidden_units, num_layers, num_envs, inputs, outputs, goal)
    have = available if available is not None else available_memory_bytes()
    if have is None or need <= have:
        return None
    return (
        f"hidden_units {hidden_units} x num_layers {num_layers} needs about {_size(need)} for the networks "
        f"(trainer and {num_envs} worker(s)), more than the {_size(have)} of memory available; use fewer hidden_units"
    )


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000:
            return f"{n:.0f} {unit}"
        n /= 1000
    return f"{n:.3g} PB"


def behavior_memory_problem(
    spec: Any, hidden_units: int, num_layers: int, num_envs: int, goal_conditioning_type: str = "none"
) -> Optional[str]:
    """network_memory_problem with the behavior's own observation and action sizes (an
    mlagents_envs BehaviorSpec); images count as hidden_units features (their encoder's output).
    With ``hyper`` goal conditioning and goal observations, the hypernetworks count too (their
    output layer grows as hidden_units cubed)."""
    inputs = goal = 0
    for obs in spec.observation_specs:
        size = int(obs.shape[0]) if len(obs.shape) == 1 else hidden_units
        inputs += size
        if goal_conditioning_type == "hyper" and obs.observation_type == ObservationType.GOAL_SIGNAL:
            goal += size
    actions = spec.action_spec
    outputs = 2 * int(actions.continuous_size) + int(sum(actions.discrete_branches)) + 1
    return network_memory_problem(hidden_units, num_layers, num_envs, max(inputs, 1), outputs, goal=goal)


def behavior_name_problem(name: str) -> Optional[str]:
    """A behavior name from an environment becomes a folder name (results/<run>/<Behavior>/)."""
    if not name or name in (".", "..") or any(ch in name for ch in "/\\\0") or len(name) > 200:
        return (
            f"behavior name {name[:60]!r} from the environment cannot be a folder name "
            "(empty, '.', '..', a '/', '\\' or NUL, or over 200 characters); rename the behavior in the environment"
        )
    return None
