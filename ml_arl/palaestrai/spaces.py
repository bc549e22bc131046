"""palaestrAI's sensor and actuator spaces as one behavior's observation vector and actions.

palaestrAI's spaces (``palaestrai.types``) are gymnasium spaces; an agent lists the sensors it
reads and the actuators it sets. Its observation is the concatenation of its sensors' readings,
in the listed order: a Box flattened, a Discrete one-hot (as ``Discrete.to_vector``), a
MultiBinary as 0/1 floats, a MultiDiscrete one-hot per entry, a Tuple its parts in order. Its
actions are its actuators, in the listed order: every Box's values go to the continuous actions
(mapped from [-1, 1] onto finite bounds, as gymnasium's Box actions are), every Discrete,
MultiDiscrete entry, MultiBinary bit and Tuple part to discrete branches.

``ObservationLayout.decode`` and ``ActionLayout.encode`` are the inverses a palaestrAI Muscle needs
when it acts in our workers (ml_arl.palaestrai.agents). No torch here: this runs in the workers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces


class SpaceError(ValueError):
    """A space or value that cannot be encoded; the message is one line."""


def _flat(value: Any) -> np.ndarray:
    return np.asarray(value).reshape(-1)


def obs_width(space: spaces.Space) -> int:
    if isinstance(space, spaces.Box):
        return int(np.prod(space.shape))
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiBinary):
        return int(np.prod(space.shape))
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, spaces.Tuple):
        return sum(obs_width(s) for s in space.spaces)
    raise SpaceError(f"space {space} is not supported (Box, Discrete, MultiBinary, MultiDiscrete, Tuple)")


def encode_into(out: np.ndarray, space: spaces.Space, value: Any, uid: str) -> int:
    """Writes ``value`` encoded at the start of ``out``; returns the width written."""
    if isinstance(space, spaces.Box):
        flat = _flat(value).astype(np.float32)
        n = int(np.prod(space.shape))
        if flat.size != n:
            raise SpaceError(f"sensor {uid}: {flat.size} values for a {space} of {n}")
        out[:n] = flat
        return n
    if isinstance(space, spaces.Discrete):
        n = int(space.n)
        index = int(_flat(value)[0]) - int(space.start)
        if not 0 <= index < n:
            raise SpaceError(f"sensor {uid}: {value!r} is outside {space}")
        out[:n] = 0.0
        out[index] = 1.0
        return n
    if isinstance(space, spaces.MultiBinary):
        flat = _flat(value).astype(np.float32)
        out[: flat.size] = flat
        return int(flat.size)
    if isinstance(space, spaces.MultiDiscrete):
        nvec = _flat(space.nvec).astype(int)
        start = _flat(getattr(space, "start", np.zeros_like(nvec))).astype(int)
        vals = _flat(value).astype(int) - start
        at = 0
        for n, v in zip(nvec, vals):
            if not 0 <= v < n:
                raise SpaceError(f"sensor {uid}: {value!r} is outside {space}")
            out[at: at + n] = 0.0
            out[at + v] = 1.0
            at += int(n)
        return at
    if isinstance(space, spaces.Tuple):
        at = 0
        for part, v in zip(space.spaces, value):
            at += encode_into(out[at:], part, v, uid)
        return at
    raise SpaceError(f"sensor {uid}: space {space} is not supported (Box, Discrete, MultiBinary, MultiDiscrete, Tuple)")


def decode(space: spaces.Space, row: np.ndarray) -> Any:
    """The value an encoded slice stands for (the inverse of ``encode_into``)."""
    if isinstance(space, spaces.Box):
        return row[: int(np.prod(space.shape))].reshape(space.shape).astype(space.dtype)
    if isinstance(space, spaces.Discrete):
        return int(np.argmax(row[: int(space.n)])) + int(space.start)
    if isinstance(space, spaces.MultiBinary):
        return (row[: int(np.prod(space.shape))] > 0.5).astype(space.dtype).reshape(space.shape)
    if isinstance(space, spaces.MultiDiscrete):
        nvec = _flat(space.nvec).astype(int)
        out, at = [], 0
        for n in nvec:
            out.append(int(np.argmax(row[at: at + n])))
            at += int(n)
        return (np.asarray(out) + _flat(getattr(space, "start", 0))).reshape(np.shape(space.nvec)).astype(space.dtype)
    if isinstance(space, spaces.Tuple):
        parts, at = [], 0
        for part in space.spaces:
            parts.append(decode(part, row[at:]))
            at += obs_width(part)
        return tuple(parts)
    raise SpaceError(f"space {space} is not supported")


class ObservationLayout:
    """A list of sensor spaces as one observation vector."""

    def __init__(self, uids: Sequence[str], space_list: Sequence[spaces.Space]):
        self.uids = list(uids)
        self.spaces = list(space_list)
        self.widths = [obs_width(s) for s in self.spaces]
        self.size = int(sum(self.widths))

    def encode(self, values: Sequence[Any]) -> np.ndarray:
        out = np.zeros(self.size, np.float32)
        at = 0
        for uid, space, value, width in zip(self.uids, self.spaces, values, self.widths):
            encode_into(out[at: at + width], space, value, uid)
            at += width
        return out

    def decode(self, row: np.ndarray) -> list[Any]:
        values, at = [], 0
        for space, width in zip(self.spaces, self.widths):
            values.append(decode(space, row[at: at + width]))
            at += width
        return values


def _action_parts(space: spaces.Space, uid: str) -> tuple[int, list[int]]:
    """(continuous size, discrete branches) of one actuator space."""
    if isinstance(space, spaces.Box):
        return int(np.prod(space.shape)), []
    if isinstance(space, spaces.Discrete):
        return 0, [int(space.n)]
    if isinstance(space, spaces.MultiDiscrete):
        return 0, [int(n) for n in _flat(space.nvec)]
    if isinstance(space, spaces.MultiBinary):
        return 0, [2] * int(np.prod(space.shape))
    if isinstance(space, spaces.Tuple):
        cont, branches = 0, []
        for part in space.spaces:
            c, b = _action_parts(part, uid)
            cont += c
            branches += b
        return cont, branches
    raise SpaceError(f"actuator {uid}: space {space} is not supported (Box, Discrete, MultiBinary, MultiDiscrete, Tuple)")


def _finite(box: spaces.Box) -> bool:
    return bool(np.all(np.isfinite(box.low)) and np.all(np.isfinite(box.high)))


class ActionLayout:
    """A list of actuator spaces as continuous actions plus discrete branches."""

    def __init__(self, uids: Sequence[str], space_list: Sequence[spaces.Space]):
        self.uids = list(uids)
        self.spaces = list(space_list)
        self.continuous = 0
        self.branches: list[int] = []
        for uid, space in zip(self.uids, self.spaces):
            c, b = _action_parts(space, uid)
            self.continuous += c
            self.branches += b

    def values(self, continuous: np.ndarray, discrete: np.ndarray) -> list[Any]:
        """One agent's action row -> a value per actuator."""
        at = [0, 0]
        return [self._value(space, continuous, discrete, at) for space in self.spaces]

    def _value(self, space: spaces.Space, cont: np.ndarray, disc: np.ndarray, at: list[int]) -> Any:
        if isinstance(space, spaces.Box):
            n = int(np.prod(space.shape))
            a = np.clip(cont[at[0]: at[0] + n].astype(np.float32), -1.0, 1.0)
            at[0] += n
            low, high = _flat(space.low).astype(np.float32), _flat(space.high).astype(np.float32)
            if _finite(space):
                a = low + (a + 1.0) * 0.5 * (high - low)
            else:  # passed on as they are, within the bound that is finite (Box(0, inf) takes no -0.5)
                a = np.clip(a, low, high)
            return a.reshape(space.shape).astype(space.dtype)
        if isinstance(space, spaces.Discrete):
            index = int(disc[at[1]]) + int(space.start)
            at[1] += 1
            return index
        if isinstance(space, spaces.MultiDiscrete):
            n = int(np.size(space.nvec))
            v = disc[at[1]: at[1] + n].astype(np.int64) + _flat(getattr(space, "start", 0))
            at[1] += n
            return v.reshape(np.shape(space.nvec)).astype(space.dtype)
        if isinstance(space, spaces.MultiBinary):
            n = int(np.prod(space.shape))
            bits = disc[at[1]: at[1] + n].astype(space.dtype).reshape(space.shape)
            at[1] += n
            return bits
        if isinstance(space, spaces.Tuple):
            return tuple(self._value(part, cont, disc, at) for part in space.spaces)
        raise SpaceError(f"space {space} is not supported")

    def encode(self, values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """A value per actuator -> (continuous [n_cont], discrete [n_branches]); the inverse of ``values``."""
        cont = np.zeros(self.continuous, np.float32)
        disc = np.zeros(len(self.branches), np.int32)
        at = [0, 0]
        for space, value in zip(self.spaces, values):
            self._encode(space, value, cont, disc, at)
        return cont, disc

    def _encode(self, space: spaces.Space, value: Any, cont: np.ndarray, disc: np.ndarray, at: list[int]) -> None:
        if isinstance(space, spaces.Box):
            n = int(np.prod(space.shape))
            v: np.ndarray = _flat(value).astype(np.float32)
            if _finite(space):
                low, high = _flat(space.low).astype(np.float32), _flat(space.high).astype(np.float32)
                span = np.where(high > low, high - low, 1.0)
                v = ((v - low) / span * 2.0 - 1.0).astype(np.float32)
            cont[at[0]: at[0] + n] = v
            at[0] += n
        elif isinstance(space, spaces.Discrete):
            disc[at[1]] = int(_flat(value)[0]) - int(space.start)
            at[1] += 1
        elif isinstance(space, (spaces.MultiDiscrete, spaces.MultiBinary)):
            v = _flat(value).astype(np.int64)
            if isinstance(space, spaces.MultiDiscrete):
                v = v - _flat(getattr(space, "start", 0))
            disc[at[1]: at[1] + v.size] = v
            at[1] += int(v.size)
        elif isinstance(space, spaces.Tuple):
            for part, v in zip(space.spaces, value):
                self._encode(part, v, cont, disc, at)
        else:
            raise SpaceError(f"space {space} is not supported")
