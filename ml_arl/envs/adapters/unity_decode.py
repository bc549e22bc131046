"""Unity's reply (a UnityOutputProto's bytes) to what ``UnityEnvironment`` keeps, for the fast
Unity bridge (ml_arl.envs.adapters.unity_fast): ``decode_output`` splits it into per-behavior AgentInfo
bytes, new brain parameters and side-channel bytes; ``steps_from_wire`` turns one behavior's
AgentInfos into DecisionSteps / TerminalSteps exactly as ``mlagents_envs.rpc_utils.steps_from_proto``
does (same dtypes, ordering, masks, group ids as a list). PNG observations are decoded by
mlagents-envs' own ``process_pixels``; images a build sends channels-first are decoded to (H, W, C)
(ml_arl.protocol.image_layout). Whenever a behavior's infos hold anything not handled bit for bit
(observation sizes that do not match the spec, NaN/inf values, undecodable images, malformed bytes),
that behavior is decoded again by ``steps_from_proto`` over the generated classes: the result, or
the exception raised, is then mlagents-envs' own (``fallbacks`` counts those)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, Optional

import numpy as np
from mlagents_envs import environment as _mlagents_environment
from mlagents_envs.base_env import BehaviorSpec, DecisionSteps, TerminalSteps
from mlagents_envs.rpc_utils import steps_from_proto

from ml_arl.envs.adapters.unity_wire import (
    FIXED32,
    LENGTH_DELIMITED,
    VARINT,
    Buffer,
    float32_array,
    int32,
    iter_fields,
    read_float_bytes,
    read_packed_varints,
)
from ml_arl.protocol import image_layout
from ml_arl.protocol.communicator_objects.agent_info_pb2 import AgentInfoProto
from ml_arl.protocol.communicator_objects.unity_rl_output_pb2 import UnityRLOutputProto

# ============================================================================================
# Unity -> Python: UnityMessageProto { header, unity_output { rl_output, rl_initialization_output } }
# ============================================================================================


def split_message(raw: Buffer) -> tuple[int, memoryview]:
    """(header.status, unity_output bytes) of a UnityMessageProto; absent fields read as 0 / empty
    (a repeated sub-message is merged, as protobuf does: its occurrences are concatenated)."""
    status = 0
    outputs: list[memoryview] = []
    for field, wire_type, value in iter_fields(memoryview(raw)):
        if field == 1 and wire_type == LENGTH_DELIMITED:  # header
            for f, w, v in iter_fields(value):
                if f == 1 and w == VARINT:
                    status = int32(v)
        elif field == 2 and wire_type == LENGTH_DELIMITED:  # unity_output
            outputs.append(value)
    if len(outputs) == 1:
        return status, outputs[0]
    return status, memoryview(b"".join(outputs))


class DecodedOutput:
    """What a UnityOutputProto holds, split but not yet decoded."""

    __slots__ = ("agent_infos", "brain_parameters", "side_channel")

    def __init__(self) -> None:
        # behavior name -> ListAgentInfoProto payloads (several occurrences merge: in order)
        self.agent_infos: dict[str, list[memoryview]] = {}
        self.brain_parameters: list[memoryview] = []  # BrainParametersProto payloads
        self.side_channel = b""


def decode_output(unity_output: Buffer) -> DecodedOutput:
    out = DecodedOutput()
    for field, wire_type, value in iter_fields(memoryview(unity_output)):
        if wire_type != LENGTH_DELIMITED:
            continue
        if field == 1:  # rl_output: UnityRLOutputProto
            for f, w, v in iter_fields(value):
                if f == 2 and w == LENGTH_DELIMITED:  # agentInfos map entry
                    name, infos = _agent_infos_entry(v)
                    out.agent_infos[name] = infos  # a key seen twice: the last entry wins
                elif f == 3 and w == LENGTH_DELIMITED:
                    out.side_channel = bytes(v)
        elif field == 2:  # rl_initialization_output: UnityRLInitializationOutputProto
            for f, w, v in iter_fields(value):
                if f == 5 and w == LENGTH_DELIMITED:
                    out.brain_parameters.append(v)
    return out


def _agent_infos_entry(entry: memoryview) -> tuple[str, list[memoryview]]:
    name = ""
    infos: list[memoryview] = []
    for field, wire_type, value in iter_fields(entry):
        if field == 1 and wire_type == LENGTH_DELIMITED:
            name = bytes(value).decode("utf-8")
        elif field == 2 and wire_type == LENGTH_DELIMITED:
            infos.append(value)
    return name, infos


def iter_agent_infos(payloads: list[memoryview]) -> Iterator[memoryview]:
    """The AgentInfoProto payloads of a behavior (ListAgentInfoProto.value), in order."""
    for payload in payloads:
        for field, wire_type, value in iter_fields(payload):
            if field == 1 and wire_type == LENGTH_DELIMITED:
                yield value


def first_agent_info(payloads: list[memoryview]) -> Optional[Any]:
    """The first AgentInfoProto of a behavior, parsed by the generated class (None if none)."""
    for info in iter_agent_infos(payloads):
        return AgentInfoProto.FromString(bytes(info))
    return None


# --------------------------------------------------------------------------------------------
# AgentInfoProto / ObservationProto -> DecisionSteps, TerminalSteps
# --------------------------------------------------------------------------------------------

_ZERO_FLOAT = b"\x00\x00\x00\x00"
COMPRESSION_NONE = 0  # ObservationProto.compression_type; PNG = 1
_KNOWN_COMPRESSION = (0, 1)  # protobuf keeps an unknown enum value out of the field


class _Unusual(Exception):
    """Something the fast decoder leaves to mlagents-envs' steps_from_proto."""


class _Agents:
    """Columns of the decision (or terminal) agents of one behavior, in message order."""

    __slots__ = ("rewards", "ids", "group_ids", "group_rewards", "max_step", "masks", "observations")

    def __init__(self) -> None:
        self.rewards: list[Buffer] = []  # float32 bytes each
        self.ids: list[int] = []
        self.group_ids: list[int] = []
        self.group_rewards: list[Buffer] = []
        self.max_step: list[bool] = []
        self.masks: list[bytes] = []  # one byte per mask entry, nonzero = disabled
        self.observations: list[list[memoryview]] = []  # ObservationProto payloads per agent


def _mask_bytes(value: Any, wire_type: int) -> bytes:
    """AgentInfoProto.action_mask values of one occurrence as bytes (nonzero = True)."""
    if wire_type == VARINT:
        return b"\x01" if value else b"\x00"
    if wire_type != LENGTH_DELIMITED:
        return b""  # protobuf skips it as an unknown field
    raw = bytes(value)
    if not raw or max(raw) < 0x80:  # every byte is a one-byte varint
        return raw
    return bytes(1 if v else 0 for v in read_packed_varints(value, wire_type))


def _split_agents(payloads: list[memoryview]) -> tuple[_Agents, _Agents]:
    decisions, terminals = _Agents(), _Agents()
    for info in iter_agent_infos(payloads):
        reward: Buffer = _ZERO_FLOAT
        group_reward: Buffer = _ZERO_FLOAT
        done = max_step = False
        agent_id = group_id = 0
        mask = b""
        observations: list[memoryview] = []
        for field, wire_type, value in iter_fields(info):
            if field == 13:
                if wire_type == LENGTH_DELIMITED:
                    observations.append(value)
            elif field == 7:
                if wire_type == FIXED32:
                    reward = value
            elif field == 10:
                if wire_type == VARINT:
                    agent_id = int32(value)
            elif field == 8:
                if wire_type == VARINT:
                    done = value != 0
            elif field == 11:
                mask += _mask_bytes(value, wire_type)
            elif field == 14:
                if wire_type == VARINT:
                    group_id = int32(value)
            elif field == 15:
                if wire_type == FIXED32:
                    group_reward = value
            elif field == 9:
                if wire_type == VARINT:
                    max_step = value != 0
        agents = terminals if done else decisions
        agents.rewards.append(reward)
        agents.ids.append(agent_id)
        agents.group_ids.append(group_id)
        agents.group_rewards.append(group_reward)
        agents.max_step.append(max_step)
        agents.masks.append(mask)
        agents.observations.append(observations)
    return decisions, terminals


class _Observation:
    """The fields of an ObservationProto that steps_from_proto reads."""

    __slots__ = ("shape", "compression", "compressed", "floats", "mapping")

    def __init__(self, payload: memoryview) -> None:
        self.shape: list[int] = []
        self.compression = COMPRESSION_NONE
        self.compressed: Optional[memoryview] = None  # oneof observation_data: compressed_data ...
        self.floats: list[Buffer] = []  # ... or float_data (merged when repeated)
        self.mapping: list[int] = []
        for field, wire_type, value in iter_fields(payload):
            if field == 4 and wire_type == LENGTH_DELIMITED:  # float_data: FloatData { repeated float data = 1 }
                self.compressed = None
                for f, w, v in iter_fields(value):
                    if f == 1:
                        self.floats.append(read_float_bytes(v, w))
            elif field == 1:
                self.shape += [int32(v) for v in read_packed_varints(value, wire_type)]
            elif field == 2 and wire_type == VARINT:
                if int32(value) in _KNOWN_COMPRESSION:
                    self.compression = int32(value)
            elif field == 3 and wire_type == LENGTH_DELIMITED:
                self.compressed = value
                self.floats = []
            elif field == 5:
                self.mapping += [int32(v) for v in read_packed_varints(value, wire_type)]


def _float_payload(observation: memoryview) -> Buffer:
    """ObservationProto.float_data.data bytes (the common case of a vector observation: fast)."""
    return b"".join(_Observation(observation).floats)


def _check_finite(values: np.ndarray) -> None:
    """mlagents-envs raises on NaN/inf through the mean (so a huge sum counts as inf too): the
    same test here; steps_from_proto then raises its own error."""
    if values.size and not math.isfinite(np.mean(values)):
        raise _Unusual("non-finite values")


def _vector_observations(agents: _Agents, index: int, shape: tuple[int, ...]) -> np.ndarray:
    n = len(agents.ids)
    if n == 0:
        return np.zeros((0,) + shape, dtype=np.float32)
    size = 4 * math.prod(shape)
    chunks = []
    for observations in agents.observations:
        if index >= len(observations):
            raise _Unusual("missing observation")
        data = _float_payload(observations[index])
        if len(data) != size:
            raise _Unusual("observation size")
        chunks.append(data)
    values = float32_array(b"".join(chunks)).reshape((n,) + shape)
    _check_finite(values)
    return values


def _visual_observations(agents: _Agents, index: int, shape: tuple[int, ...], chw: bool = False) -> np.ndarray:
    """Images of spec shape ``shape`` (H, W, C); ``chw``: the build sends them (C, H, W)."""
    n = len(agents.ids)
    if n == 0:
        return np.zeros((0, shape[0], shape[1], shape[2]), dtype=np.float32)
    wire_shape = image_layout.chw_shape(shape) if chw else shape
    images = []
    for observations in agents.observations:
        if index >= len(observations):
            raise _Unusual("missing observation")
        obs = _Observation(observations[index])
        if tuple(obs.shape) != wire_shape:
            raise _Unusual("observation shape")
        if obs.compression == COMPRESSION_NONE:
            image = float32_array(b"".join(obs.floats))
            if np.isnan(image).any():  # protobuf reads any NaN as math.nan (one bit pattern)
                raise _Unusual("NaN in an uncompressed image")
            image = image_layout.chw_floats_to_hwc(image, wire_shape) if chw else image.reshape(shape)
        else:
            data = bytes(obs.compressed) if obs.compressed is not None else b""
            image = image_layout.decode_png(data, shape, obs.mapping)
            if tuple(image.shape) != shape:
                raise _Unusual("decompressed shape")
        images.append(image)
    return np.array(images, dtype=np.float32)


def _action_mask(agents: _Agents, branches: tuple[int, ...]) -> Optional[list[np.ndarray]]:
    """As steps_from_proto: None without decision agents; else one bool array [n, branch size] per
    branch (views of one [n, sum] array); an agent whose mask has another length: all False."""
    n = len(agents.ids)
    if n == 0:
        return None
    size = sum(branches)
    if all(len(m) == size for m in agents.masks):
        matrix = np.frombuffer(b"".join(agents.masks), dtype=np.uint8).reshape(n, size) != 0
    else:
        matrix = np.zeros((n, size), dtype=bool)
        for row, m in enumerate(agents.masks):
            if len(m) == size:
                matrix[row] = np.frombuffer(m, dtype=np.uint8) != 0
    splits = []
    total = 0
    for branch in branches[:-1]:
        total += branch
        splits.append(total)
    return np.split(matrix, splits, axis=1)


def _fast_steps(
    payloads: list[memoryview], spec: BehaviorSpec, chw: tuple[int, ...] = ()
) -> tuple[DecisionSteps, TerminalSteps]:
    decisions, terminals = _split_agents(payloads)
    decision_obs = []
    terminal_obs = []
    for index, obs_spec in enumerate(spec.observation_specs):
        shape = tuple(obs_spec.shape)
        if len(shape) == 3:
            decision_obs.append(_visual_observations(decisions, index, shape, index in chw))
            terminal_obs.append(_visual_observations(terminals, index, shape, index in chw))
        else:
            decision_obs.append(_vector_observations(decisions, index, shape))
            terminal_obs.append(_vector_observations(terminals, index, shape))
    decision_rewards = float32_array(b"".join(decisions.rewards))
    terminal_rewards = float32_array(b"".join(terminals.rewards))
    decision_group_rewards = float32_array(b"".join(decisions.group_rewards))
    terminal_group_rewards = float32_array(b"".join(terminals.group_rewards))
    for values in (decision_rewards, terminal_rewards, decision_group_rewards, terminal_group_rewards):
        _check_finite(values)
    mask = None
    if spec.action_spec.discrete_size > 0:
        mask = _action_mask(decisions, tuple(spec.action_spec.discrete_branches))
    return (
        DecisionSteps(
            decision_obs,
            decision_rewards,
            np.array(decisions.ids, dtype=np.int32),
            mask,
            decisions.group_ids,
            decision_group_rewards,
        ),
        TerminalSteps(
            terminal_obs,
            terminal_rewards,
            np.array(terminals.max_step, dtype=bool),
            np.array(terminals.ids, dtype=np.int32),
            terminals.group_ids,
            terminal_group_rewards,
        ),
    )


fallbacks = 0  # how many times a behavior's infos went to steps_from_proto (tests read it)


def steps_from_wire(
    payloads: list[memoryview], spec: BehaviorSpec, chw: tuple[int, ...] = ()
) -> tuple[DecisionSteps, TerminalSteps]:
    """steps_from_proto for one behavior's ListAgentInfoProto payloads. ``spec`` describes images
    as (H, W, C); ``chw``: the indices of the observations the build sends channels-first."""
    global fallbacks
    try:
        return _fast_steps(payloads, spec, chw)
    except Exception as err:  # anything unusual: mlagents-envs decides (result or exception)
        fallbacks += 1
        _mlagents_environment.logger.debug(f"fast bridge: {type(err).__name__} {err}; decoding with protobuf")
        infos = UnityRLOutputProto.ListAgentInfoProto.FromString(b"".join(payloads)).value
        image_layout.protos_to_hwc(infos, chw)
        return steps_from_proto(infos, spec)  # type: ignore[no-any-return]
