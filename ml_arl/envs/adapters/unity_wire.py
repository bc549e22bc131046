"""Protobuf wire format (proto3) for the fast Unity bridge (ml_arl.envs.adapters.unity_fast): varints,
length-delimited fields, fixed32, packed repeated fields; the UnityMessageProto the trainer sends
(status 200, a STEP or RESET command, the agents' actions, side-channel bytes), written straight to
bytes, byte for byte what the generated classes write. Field numbers are those of communication API 1.5.0
(mlagents_envs/communicator_objects). No torch, no generated classes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Union

import numpy as np
from mlagents_envs.base_env import ActionTuple

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
