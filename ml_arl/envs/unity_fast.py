"""The fast message path of the Unity bridge: per-step messages as raw protobuf wire bytes.

With protobuf 3.20 in pure-Python mode (what mlagents-envs 0.28 needs on Python 3.11), parsing and
building ``UnityMessageProto`` objects costs far more than the rest of a step. This module moves
the per-step traffic past the generated classes, with results identical to mlagents-envs':

* ``RawExchange`` is a communicator mixin: the gRPC method ``UnityToExternalProto/Exchange`` is
  registered without (de)serializers, so requests and replies cross the pipe between the gRPC
  thread and the trainer as bytes. The handshake (``initialize``) still goes through the
  generated classes; so does the generic ``exchange`` (unused by the fast path).
* ``encode_input_message`` writes a UnityMessageProto (status 200, a STEP or RESET command,
  the agents' actions, side-channel bytes) straight to bytes, byte for byte what the generated
  classes write.
* ``decode_output`` splits a UnityOutputProto into per-behavior AgentInfo bytes, new brain
  parameters and side-channel bytes; ``steps_from_wire`` turns one behavior's AgentInfos into
  DecisionSteps / TerminalSteps exactly as ``mlagents_envs.rpc_utils.steps_from_proto`` does
  (same dtypes, ordering, masks, group ids as a list). PNG observations are decoded by
  mlagents-envs' own ``process_pixels``. Brain parameters (and the one AgentInfo a new
  behavior's spec is read from) are parsed with the generated classes and given to
  ``behavior_spec_from_proto``.
* Images a build sends channels-first (com.unity.ml-agents 3.x) are decoded to (H, W, C), the
  one layout ml_arl hands on, and the behavior's spec says so (ml_arl.envs.image_layout); the
  env keeps, per behavior, which observations arrive CHW (``chw_table``). The fallback rewrites
  those observations to HWC before ``steps_from_proto``, so both paths give the arrays a 2.x
  build sending the same image would give.
* Whenever a behavior's infos hold anything the fast decoder does not handle bit for bit
  (observation sizes that do not match the spec, NaN/inf values, undecodable images, malformed
  bytes), that behavior is decoded again by ``steps_from_proto`` over the generated classes:
  the result, or the exception raised, is then mlagents-envs' own.
* ``step(env)`` / ``reset(env)`` are ``UnityEnvironment.step`` / ``reset`` on this path; the env
  must have been created with a ``RawExchange`` communicator (ml_arl.envs.unity_env does so
  when ``fast_bridge`` is on).

Field numbers are those of communication API 1.5.0 (mlagents_envs/communicator_objects).
This module runs in worker processes: no torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from multiprocessing import Pipe
from typing import Any, Optional, Union

import grpc
import numpy as np
from mlagents_envs import environment as _mlagents_environment
from mlagents_envs.base_env import ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps
from mlagents_envs.exception import UnityCommunicatorStoppedException, UnityEnvironmentException
from mlagents_envs.rpc_communicator import RpcCommunicator
from mlagents_envs.rpc_utils import behavior_spec_from_proto, steps_from_proto

from ml_arl.envs import image_layout
from ml_arl.protocol.communicator_objects.agent_info_pb2 import AgentInfoProto
from ml_arl.protocol.communicator_objects.brain_parameters_pb2 import BrainParametersProto
from ml_arl.protocol.communicator_objects.unity_input_pb2 import UnityInputProto
from ml_arl.protocol.communicator_objects.unity_message_pb2 import UnityMessageProto
from ml_arl.protocol.communicator_objects.unity_output_pb2 import UnityOutputProto
from ml_arl.protocol.communicator_objects.unity_rl_output_pb2 import UnityRLOutputProto

Buffer = Union[bytes, memoryview]

# ============================================================================================
# Wire format (proto3): varints, length-delimited fields, fixed32, packed repeated fields
# ============================================================================================

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5
_MASK64 = (1 << 64) - 1


class WireError(ValueError):
    """Bytes that are not a well-formed protobuf message."""


def encode_varint(value: int) -> bytes:
    """Unsigned LEB128; a negative value is written as its 64-bit two's complement (10 bytes),
    as protobuf writes negative int32/int64 fields."""
    value &= _MASK64
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_key(field: int, wire_type: int) -> bytes:
    return encode_varint((field << 3) | wire_type)


def encode_length_delimited(field: int, payload: Buffer) -> bytes:
    """A sub-message, string, bytes or packed repeated field."""
    return encode_key(field, LENGTH_DELIMITED) + encode_varint(len(payload)) + payload


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at ``pos``."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _MASK64, pos
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes")


def int32(value: int) -> int:
    """A varint read as protobuf reads an int32 (or enum) field: low 32 bits, signed."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def iter_fields(buf: Buffer) -> Iterator[tuple[int, int, Any]]:
    """The fields of one message, in wire order: (field number, wire type, value), the value an
    int for varints and a slice of ``buf`` (a memoryview when ``buf`` is one) otherwise.
    Groups (wire types 3, 4) are not part of proto3: WireError."""
    pos = 0
    end = len(buf)
    try:
        while pos < end:
            key = buf[pos]
            if key < 0x80:
                pos += 1
            else:
                key, pos = read_varint(buf, pos)
            wire_type = key & 7
            if wire_type == LENGTH_DELIMITED:
                length = buf[pos]
                if length < 0x80:
                    pos += 1
                else:
                    length, pos = read_varint(buf, pos)
                stop = pos + length
                if stop > end:
                    raise WireError("truncated length-delimited field")
                yield key >> 3, wire_type, buf[pos:stop]
                pos = stop
            elif wire_type == VARINT:
                value = buf[pos]
                if value < 0x80:
                    pos += 1
                else:
                    value, pos = read_varint(buf, pos)
                yield key >> 3, wire_type, value
            elif wire_type == FIXED32 or wire_type == FIXED64:
                stop = pos + (4 if wire_type == FIXED32 else 8)
                if stop > end:
                    raise WireError("truncated fixed-size field")
                yield key >> 3, wire_type, buf[pos:stop]
                pos = stop
            else:
                raise WireError(f"unsupported wire type {wire_type}")
    except IndexError:  # a varint's first byte past the end
        raise WireError("truncated message") from None


def read_packed_varints(value: Any, wire_type: int) -> list[int]:
    """A repeated varint field's values from one occurrence, packed or not (raw, unsigned)."""
    if wire_type == VARINT:
        return [value]
    if wire_type != LENGTH_DELIMITED:
        return []
    out = []
    pos = 0
    while pos < len(value):
        item, pos = read_varint(value, pos)
        out.append(item)
    return out


def read_float_bytes(value: Any, wire_type: int) -> Buffer:
    """A repeated float field's little-endian float32 bytes from one occurrence, packed or not."""
    if wire_type == FIXED32:
        return value  # type: ignore[no-any-return]
    if wire_type == LENGTH_DELIMITED:
        if len(value) % 4:
            raise WireError("packed floats: length not a multiple of 4")
        return value  # type: ignore[no-any-return]
    return b""


def float32_array(data: Buffer) -> np.ndarray:
    """Little-endian float32 bytes as a fresh, writable, native float32 array."""
    return np.frombuffer(data, dtype="<f4").astype(np.float32)


# ============================================================================================
# Python -> Unity: UnityMessageProto { header, unity_input { rl_input } }
# ============================================================================================

STATUS_OK, STATUS_CLOSE = 200, 400
COMMAND_STEP, COMMAND_RESET = 0, 1  # communicator_objects.command_pb2


def header_message(status: int) -> bytes:
    """UnityMessageProto with only header.status: what close() sends is header_message(400)."""
    return encode_length_delimited(1, encode_key(1, VARINT) + encode_varint(status))


_HEADER_OK = header_message(STATUS_OK)
_KEY_DEPRECATED = encode_key(1, LENGTH_DELIMITED)  # AgentActionProto.vector_actions_deprecated
_KEY_CONTINUOUS = encode_key(6, LENGTH_DELIMITED)  # AgentActionProto.continuous_actions
_KEY_DISCRETE = encode_key(7, LENGTH_DELIMITED)  # AgentActionProto.discrete_actions
_KEY_ACTION = encode_key(1, LENGTH_DELIMITED)  # ListAgentActionProto.value


def _rows(data: bytes, n: int) -> list[bytes]:
    width = len(data) // n if n else 0
    return [data[i * width : (i + 1) * width] for i in range(n)]


def _varint_rows(values: np.ndarray) -> list[bytes]:
    """Each row of an int matrix as concatenated varints (a packed int32 field's payload)."""
    if values.size and 0 <= values.min() and values.max() < 0x80:
        return _rows(values.astype(np.uint8).tobytes(), len(values))
    if not values.size:
        return [b""] * len(values)
    return [b"".join(encode_varint(v) for v in row) for row in values.tolist()]


def encode_agent_actions(action: ActionTuple, n_agents: int) -> bytes:
    """ListAgentActionProto payload: one AgentActionProto per agent (rows 0..n_agents-1), holding
    vector_actions_deprecated (continuous then discrete, as floats), continuous_actions and
    discrete_actions, as UnityEnvironment._generate_step_input fills them."""
    continuous = [b""] * n_agents
    discrete = [b""] * n_agents
    discrete_as_floats = [b""] * n_agents
    if action.continuous is not None:
        continuous = _rows(np.ascontiguousarray(action.continuous[:n_agents], dtype="<f4").tobytes(), n_agents)
    if action.discrete is not None:
        values = np.asarray(action.discrete[:n_agents])
        discrete = _varint_rows(values.astype(np.int64))
        discrete_as_floats = _rows(np.ascontiguousarray(values, dtype="<f4").tobytes(), n_agents)
    out = []
    for cont, disc, disc_floats in zip(continuous, discrete, discrete_as_floats):
        deprecated = cont + disc_floats
        body = b""
        if deprecated:
            body += _KEY_DEPRECATED + encode_varint(len(deprecated)) + deprecated
        if cont:
            body += _KEY_CONTINUOUS + encode_varint(len(cont)) + cont
        if disc:
            body += _KEY_DISCRETE + encode_varint(len(disc)) + disc
        out.append(_KEY_ACTION + encode_varint(len(body)) + body)
    return b"".join(out)


def encode_input_message(command: int, agent_actions: list[tuple[str, bytes]], side_channel: bytes) -> bytes:
    """UnityMessageProto (status 200) around UnityInputProto.rl_input: ``agent_actions`` are
    (behavior name, encode_agent_actions(...)) in map order."""
    rl_input = b"".join(
        encode_length_delimited(1, (encode_length_delimited(1, name.encode()) if name else b"")
                                + encode_length_delimited(2, actions))
        for name, actions in agent_actions
    )
    if command:
        rl_input += encode_key(4, VARINT) + encode_varint(command)
    if side_channel:
        rl_input += encode_length_delimited(5, side_channel)
    return _HEADER_OK + encode_length_delimited(3, encode_length_delimited(1, rl_input))


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


# ============================================================================================
# The communicator: raw bytes between the gRPC thread and the trainer
# ============================================================================================

SERVICE = "communicator_objects.UnityToExternalProto"
CLOSE_GRACE_S = 2.0  # how long close() lets the call in flight return the close message


class RawExchangeServicer:
    """UnityToExternalProto/Exchange with bytes in and out: the request goes to the trainer
    through a pipe, the trainer's reply bytes go back to Unity (mlagents' servicer, unparsed)."""

    def __init__(self) -> None:
        self.parent_conn, self.child_conn = Pipe()

    def Exchange(self, request: bytes, context: Any) -> bytes:
        self.child_conn.send_bytes(request)
        return self.child_conn.recv_bytes()

    def add_to_server(self, server: grpc.Server) -> None:
        method = grpc.unary_unary_rpc_method_handler(self.Exchange)  # no (de)serializers: bytes
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Exchange": method}),))


class RawExchange(RpcCommunicator):
    """Mixin for an RpcCommunicator subclass whose ``create_server`` registers the servicer that
    ``_add_servicer(server)`` returns (ml_arl.envs.unity_env._Communicator): every message crosses
    as bytes. ``exchange_raw`` is the fast path; ``initialize``, ``exchange`` and ``close`` keep
    RpcCommunicator's interface and behaviour."""

    is_open: bool
    server: Any
    unity_to_external: Any

    def _add_servicer(self, server: grpc.Server) -> Any:
        servicer = RawExchangeServicer()
        servicer.add_to_server(server)
        return servicer

    def initialize(self, inputs: UnityInputProto, poll_callback: Optional[Any] = None) -> UnityOutputProto:
        self.poll_for_timeout(poll_callback)
        conn = self.unity_to_external.parent_conn
        academy = UnityMessageProto.FromString(conn.recv_bytes()).unity_output
        message = UnityMessageProto()
        message.header.status = STATUS_OK
        message.unity_input.CopyFrom(inputs)
        conn.send_bytes(message.SerializeToString())
        conn.recv_bytes()  # Unity's next call: answered by the first reset
        return academy

    def exchange_raw(self, message: bytes, poll_callback: Optional[Any] = None) -> Optional[memoryview]:
        """Sends a serialized UnityMessageProto; returns Unity's unity_output bytes, or None when
        Unity's status is not 200 (it is quitting)."""
        conn = self.unity_to_external.parent_conn
        conn.send_bytes(message)
        self.poll_for_timeout(poll_callback)
        status, unity_output = split_message(conn.recv_bytes())
        if status != STATUS_OK:
            return None
        return unity_output

    def exchange(self, inputs: UnityInputProto, poll_callback: Optional[Any] = None) -> Optional[UnityOutputProto]:
        message = UnityMessageProto()
        message.header.status = STATUS_OK
        message.unity_input.CopyFrom(inputs)
        output = self.exchange_raw(message.SerializeToString(), poll_callback)
        return None if output is None else UnityOutputProto.FromString(bytes(output))

    def close(self) -> None:
        if self.is_open:
            conn = self.unity_to_external.parent_conn
            conn.send_bytes(header_message(STATUS_CLOSE))
            conn.close()
            # A grace period lets the Exchange call the build is blocked in return the close
            # message (mlagents-envs stops at once: on a busy machine the build then sees its
            # call cancelled instead of the close); with no call in flight it returns at once.
            self.server.stop(CLOSE_GRACE_S).wait(CLOSE_GRACE_S)
            self.is_open = False


# ============================================================================================
# UnityEnvironment.step / reset on the fast path
# ============================================================================================


def _communicator(env: Any) -> RawExchange:
    comm = env._communicator
    if not isinstance(comm, RawExchange):
        raise TypeError("the fast bridge needs a RawExchange communicator")
    return comm


def reset(env: Any) -> None:
    """UnityEnvironment.reset: RESET command with the queued side-channel messages."""
    if not env._loaded:
        raise UnityEnvironmentException("No Unity environment is loaded.")
    side_channel = bytes(env._side_channel_manager.generate_side_channel_messages())
    output = _communicator(env).exchange_raw(encode_input_message(COMMAND_RESET, [], side_channel), env._poll_process)
    if output is None:
        raise UnityCommunicatorStoppedException("Communicator has exited.")
    apply_output(env, output)
    env._is_first_message = False
    env._env_actions.clear()


def step(env: Any) -> None:
    """UnityEnvironment.step: the actions set (zeros for behaviors without), STEP command."""
    if env._is_first_message:
        env.reset()
        return
    if not env._loaded:
        raise UnityEnvironmentException("No Unity environment is loaded.")
    specs: dict[str, BehaviorSpec] = env._env_specs
    state: dict[str, tuple[DecisionSteps, TerminalSteps]] = env._env_state
    actions: dict[str, ActionTuple] = env._env_actions
    for name, spec in specs.items():
        if name not in actions:
            actions[name] = spec.action_spec.empty_action(len(state[name][0]) if name in state else 0)
    encoded = []
    for name, action in actions.items():
        n_agents = len(state[name][0])
        if n_agents:
            encoded.append((name, encode_agent_actions(action, n_agents)))
    side_channel = bytes(env._side_channel_manager.generate_side_channel_messages())
    output = _communicator(env).exchange_raw(encode_input_message(COMMAND_STEP, encoded, side_channel), env._poll_process)
    if output is None:
        raise UnityCommunicatorStoppedException("Communicator has exited.")
    apply_output(env, output)
    actions.clear()


def chw_table(env: Any) -> dict[str, tuple[int, ...]]:
    """The env's behavior name -> indices of the observations its build sends channels-first
    (only behaviors that have such images); created on first use."""
    table: Optional[dict[str, tuple[int, ...]]] = getattr(env, "chw_observations", None)
    if table is None:
        table = {}
        env.chw_observations = table
    return table


def set_behavior_spec(env: Any, name: str, wire_spec: BehaviorSpec) -> None:
    """A behavior's spec as the build describes it -> the env's spec (images (H, W, C)) and its
    entry in chw_table."""
    spec, chw = image_layout.hwc_behavior_spec(wire_spec)
    env._env_specs[name] = spec
    table = chw_table(env)
    if chw:
        table[name] = chw
    else:
        table.pop(name, None)


def apply_output(env: Any, unity_output: Buffer) -> None:
    """UnityEnvironment._update_behavior_specs + _update_state for a UnityOutputProto's bytes
    (images the build sends channels-first become (H, W, C): see ml_arl.envs.image_layout)."""
    out = decode_output(unity_output)
    specs: dict[str, BehaviorSpec] = env._env_specs
    for payload in out.brain_parameters:
        brain = BrainParametersProto.FromString(bytes(payload))
        # as mlagents' agentInfos[brain_name] lookup, this adds an empty entry when there is none
        infos = out.agent_infos.setdefault(brain.brain_name, [])
        first = first_agent_info(infos)
        if first is not None:
            set_behavior_spec(env, brain.brain_name, behavior_spec_from_proto(brain, first))
            _mlagents_environment.logger.info(f"Connected new brain: {brain.brain_name}")
    state: dict[str, tuple[DecisionSteps, TerminalSteps]] = env._env_state
    chw = chw_table(env)
    for name, spec in specs.items():
        payloads = out.agent_infos.get(name)
        if payloads is None:
            state[name] = (DecisionSteps.empty(spec), TerminalSteps.empty(spec))
        else:
            state[name] = steps_from_wire(payloads, spec, chw.get(name, ()))
    env._side_channel_manager.process_side_channel_message(out.side_channel)
