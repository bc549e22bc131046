"""The stand-in's side of the wire: proto3 encoding and decoding of just what the messages of
communication API 1.5.0 need, the side channels' byte layouts, and the AgentInfo and observation
fields its behaviors send. Encoded by hand so that the stand-in costs the bridge as little as a real
player does; the generated protobuf classes serve only the brain parameters (and the handshake)."""

from __future__ import annotations

import struct
import uuid
from typing import Any, Optional

import numpy as np

EXCHANGE_METHOD = "/communicator_objects.UnityToExternalProto/Exchange"
PACKAGE_VERSION = "2.2.1-exp.1"

ENGINE_CHANNEL = uuid.UUID("e951342c-4f7e-11ea-b238-784f4387d1f7")
PARAMS_CHANNEL = uuid.UUID("534c891e-810f-11ea-a9d0-822485860400")
STATS_CHANNEL = uuid.UUID("a1d8f7b7-cec8-50f9-b78b-d3e165a78520")
ANALYTICS_CHANNEL = uuid.UUID("b664a4a9-d86f-5a5f-95cb-e8353a7e8356")

COMMAND_STEP, COMMAND_RESET, COMMAND_QUIT = 0, 1, 2
AVERAGE, MOST_RECENT, SUM, HISTOGRAM = 0, 1, 2, 3


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return _varint((field << 3) | wire_type)


def _ld(field: int, payload: bytes) -> bytes:
    """A length-delimited field (sub-message, bytes, string, packed repeated)."""
    return _key(field, 2) + _varint(len(payload)) + payload


def _packed_varints(field: int, values: list[int]) -> bytes:
    return _ld(field, b"".join(_varint(v) for v in values))


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _fields(buf: bytes):
    """Yields (field number, wire type, value): int for varints, bytes otherwise."""
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = _read_varint(buf, pos)
        field, wire_type = key >> 3, key & 7
        value: Any
        if wire_type == 0:
            value, pos = _read_varint(buf, pos)
        elif wire_type == 2:
            length, pos = _read_varint(buf, pos)
            value = buf[pos : pos + length]
            pos += length
        elif wire_type == 5:
            value = buf[pos : pos + 4]
            pos += 4
        elif wire_type == 1:
            value = buf[pos : pos + 8]
            pos += 8
        else:
            raise ValueError(f"unsupported wire type {wire_type}")
        yield field, wire_type, value


def _floats(wire_type: int, value: Any) -> list[float]:
    if wire_type == 2:
        return list(struct.unpack(f"<{len(value) // 4}f", value))
    if wire_type == 5:
        return [struct.unpack("<f", value)[0]]
    return []


def _ints(wire_type: int, value: Any) -> list[int]:
    if wire_type == 0:
        return [_int32(value)]
    if wire_type == 2:
        out = []
        pos = 0
        while pos < len(value):
            v, pos = _read_varint(value, pos)
            out.append(_int32(v))
        return out
    return []


def decode_action(buf: bytes) -> tuple[list[float], list[int]]:
    """AgentActionProto -> (continuous, discrete); falls back to vector_actions_deprecated."""
    cont: list[float] = []
    disc: list[int] = []
    deprecated: list[float] = []
    for field, wire_type, value in _fields(buf):
        if field == 6:
            cont += _floats(wire_type, value)
        elif field == 7:
            disc += _ints(wire_type, value)
        elif field == 1:
            deprecated += _floats(wire_type, value)
    if not cont and not disc and deprecated:
        return deprecated, [int(v) for v in deprecated]
    return cont, disc


class Incoming:
    """What one reply of the trainer holds."""

    def __init__(self) -> None:
        self.status = 0
        self.command = COMMAND_STEP
        self.side_channel = b""
        self.actions: dict[str, list[bytes]] = {}  # behavior -> raw AgentActionProto, in order
        self.seed: Optional[int] = None  # set when rl_initialization_input is present
        self.num_areas = 0
        self.communication_version = ""
        self.package_version = ""


def decode_message(raw: bytes) -> Incoming:
    """UnityMessageProto (Python -> Unity)."""
    msg = Incoming()
    for field, wire_type, value in _fields(raw):
        if wire_type != 2:
            continue
        if field == 1:  # header
            for f, w, v in _fields(value):
                if f == 1 and w == 0:
                    msg.status = _int32(v)
        elif field == 3:  # unity_input
            for f, w, v in _fields(value):
                if w != 2:
                    continue
                if f == 1:
                    _decode_rl_input(v, msg)
                elif f == 2:
                    _decode_init_input(v, msg)
    return msg


def _decode_rl_input(buf: bytes, msg: Incoming) -> None:
    for field, wire_type, value in _fields(buf):
        if field == 1 and wire_type == 2:  # map<string, ListAgentActionProto> entry
            name = ""
            actions: list[bytes] = []
            for f, w, v in _fields(value):
                if f == 1 and w == 2:
                    name = v.decode("utf-8", "replace")
                elif f == 2 and w == 2:
                    actions = [a for f2, w2, a in _fields(v) if f2 == 1 and w2 == 2]
            msg.actions.setdefault(name, []).extend(actions)
        elif field == 4 and wire_type == 0:
            msg.command = _int32(value)
        elif field == 5 and wire_type == 2:
            msg.side_channel = value


def _decode_init_input(buf: bytes, msg: Incoming) -> None:
    msg.seed = 0
    for field, wire_type, value in _fields(buf):
        if field == 1 and wire_type == 0:
            msg.seed = _int32(value)
        elif field == 2 and wire_type == 2:
            msg.communication_version = value.decode("utf-8", "replace")
        elif field == 3 and wire_type == 2:
            msg.package_version = value.decode("utf-8", "replace")
        elif field == 5 and wire_type == 0:
            msg.num_areas = _int32(value)


HEADER_200 = _ld(1, _varint((1 << 3) | 0) + _varint(200))
MESSAGE_EMPTY_200 = HEADER_200
MESSAGE_QUIT_400 = _ld(1, _varint((1 << 3) | 0) + _varint(400))


def encode_output(behaviors: list[tuple[str, bytes]], brain_parameters: list[bytes], side_channel: bytes) -> bytes:
    """UnityMessageProto (Unity -> Python): status 200, agent infos per behavior (each a
    ListAgentInfoProto body already encoded), new brain parameters and side-channel bytes."""
    rl_output = b"".join(_ld(2, _ld(1, name.encode()) + _ld(2, infos)) for name, infos in behaviors)
    if side_channel:
        rl_output += _ld(3, side_channel)
    unity_output = _ld(1, rl_output)
    if brain_parameters:
        unity_output += _ld(2, b"".join(_ld(5, bp) for bp in brain_parameters))
    return HEADER_200 + _ld(2, unity_output)


def float_bytes(values: np.ndarray) -> bytes:
    return np.ascontiguousarray(values, dtype="<f4").tobytes()


class InfoEncoder:
    """Builds AgentInfoProto entries (as ListAgentInfoProto.value fields) quickly: everything
    constant per agent is encoded once."""

    REWARD = _key(7, 5)
    DONE = _key(8, 0) + b"\x01"
    MAX_STEP = _key(9, 0) + b"\x01"
    GROUP_REWARD = _key(15, 5)

    def __init__(self, n: int, group_ids: list[int]) -> None:
        self.ids = [_key(10, 0) + _varint(i) for i in range(n)]
        self.group_ids = [(_key(14, 0) + _varint(g)) if g else b"" for g in group_ids]

    def info(
        self, i: int, reward: bytes, observations: bytes, done: bool = False, max_step: bool = False,
        mask: bytes = b"", group_reward: bytes = b"",
    ) -> bytes:
        body = b"".join((
            self.REWARD, reward, self.DONE if done else b"", self.MAX_STEP if max_step else b"", self.ids[i],
            mask, observations, self.group_ids[i], (self.GROUP_REWARD + group_reward) if group_reward else b"",
        ))
        return b"\x0a" + _varint(len(body)) + body


def vector_observation(name: str, size: int) -> tuple[bytes, bytes]:
    """(head, tail) of an ObservationProto field (AgentInfoProto.observations) holding `size` floats;
    the float32 bytes go between them."""
    float_data = _key(1, 2) + _varint(4 * size)  # FloatData.data, packed; floats follow
    shape = _packed_varints(1, [size])
    body_len = len(shape) + len(_key(4, 2)) + len(_varint(len(float_data) + 4 * size)) + len(float_data) + 4 * size
    tail = _ld(8, name.encode())
    body_len += len(tail)
    head = _key(13, 2) + _varint(body_len) + shape + _key(4, 2) + _varint(len(float_data) + 4 * size) + float_data
    return head, tail


def png_observation(name: str, shape: tuple[int, int, int], png: bytes, dimension_properties: tuple[int, ...] = ()) -> bytes:
    """An ObservationProto field holding PNG data (fields in number order, as C# writes them)."""
    props = _packed_varints(6, list(dimension_properties)) if dimension_properties else b""
    body = _packed_varints(1, list(shape)) + _key(2, 0) + b"\x01" + _ld(3, png) + props + _ld(8, name.encode())
    return _ld(13, body)


TE, NONE, VARIABLE_SIZE = 2, 1, 4  # DimensionProperty values


def camera_observation(name: str, image: np.ndarray, layout: str, compression: str, image_module: Any) -> bytes:
    """A camera's ObservationProto field for an (H, W, 3) uint8 image, described as com.unity.ml-agents
    2.x (layout "hwc") or 3.x ("chw") describes it; PNG or float data in [0, 1] in the declared order."""
    h, w, c = image.shape
    if layout == "chw":
        shape, props, ordered = (c, h, w), (NONE, TE, TE), image.transpose(2, 0, 1)
    else:
        shape, props, ordered = (h, w, c), (TE, TE, NONE), image
    if compression == "png":
        import io

        out = io.BytesIO()
        image_module.fromarray(image).save(out, format="PNG")
        return png_observation(name, shape, out.getvalue(), props)
    floats = float_bytes(ordered.astype(np.float32) / 255.0)
    body = _packed_varints(1, list(shape)) + _ld(4, _ld(1, floats)) + _packed_varints(6, list(props)) + _ld(8, name.encode())
    return _ld(13, body)



# --------------------------------------------------------------------------------------------
# Side channels
# --------------------------------------------------------------------------------------------


class Reader:
    """Little-endian reader with the layouts of mlagents_envs' OutgoingMessage."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def int32(self) -> int:
        (v,) = struct.unpack_from("<i", self.data, self.pos)
        self.pos += 4
        return int(v)

    def float32(self) -> float:
        (v,) = struct.unpack_from("<f", self.data, self.pos)
        self.pos += 4
        return float(v)

    def string(self) -> str:
        n = self.int32()
        s = self.data[self.pos : self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return s

    def float_list(self) -> list[float]:
        return [self.float32() for _ in range(self.int32())]


def split_side_channel(data: bytes) -> list[tuple[uuid.UUID, bytes]]:
    records = []
    pos = 0
    while pos + 20 <= len(data):
        channel = uuid.UUID(bytes_le=bytes(data[pos : pos + 16]))
        (length,) = struct.unpack_from("<i", data, pos + 16)
        pos += 20
        records.append((channel, data[pos : pos + length]))
        pos += length
    return records


class Stats:
    """Stats side-channel records (Unity -> Python), prefixes cached per key."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.prefixes: dict[tuple[str, int], tuple[bytes, bytes]] = {}
        self.records: list[bytes] = []

    def add(self, key: str, value: float, aggregation: int) -> None:
        if not self.enabled:
            return
        cached = self.prefixes.get((key, aggregation))
        if cached is None:
            encoded = key.encode("ascii", "replace")
            payload_len = 4 + len(encoded) + 4 + 4
            prefix = STATS_CHANNEL.bytes_le + struct.pack("<i", payload_len) + struct.pack("<i", len(encoded)) + encoded
            cached = (prefix, struct.pack("<i", aggregation))
            self.prefixes[(key, aggregation)] = cached
        self.records.append(cached[0] + struct.pack("<f", value) + cached[1])

    def add_many(self, key: str, values: np.ndarray, aggregation: int) -> None:
        if not self.enabled:
            return
        for v in values.tolist():
            self.add(key, v, aggregation)

    def take(self) -> bytes:
        out = b"".join(self.records)
        self.records = []
        return out


def agent_info(
    agent_id: int, reward: float, observations: bytes, done: bool = False, max_step: bool = False,
    group_id: int = 0, group_reward: float = 0.0,
) -> bytes:
    """One AgentInfoProto (as a ListAgentInfoProto.value field), fields in number order as C# writes
    them; zero values left out as proto3 does."""
    body = b"".join((
        InfoEncoder.REWARD, struct.pack("<f", reward), InfoEncoder.DONE if done else b"",
        InfoEncoder.MAX_STEP if max_step else b"", _key(10, 0) + _varint(agent_id), observations,
        (_key(14, 0) + _varint(group_id)) if group_id else b"",
        (InfoEncoder.GROUP_REWARD + struct.pack("<f", group_reward)) if group_reward else b"",
    ))
    return b"\x0a" + _varint(len(body)) + body


def float_observation(name: str, values: np.ndarray, dimension_properties: tuple[int, ...] = ()) -> bytes:
    """An uncompressed ObservationProto field of shape ``values.shape``."""
    props = _packed_varints(6, list(dimension_properties)) if dimension_properties else b""
    body = _packed_varints(1, list(values.shape)) + _ld(4, _ld(1, float_bytes(values))) + props + _ld(8, name.encode())
    return _ld(13, body)


def vector(name: str, values: np.ndarray) -> bytes:
    head, tail = vector_observation(name, len(values))
    return head + float_bytes(values) + tail


def action_mask(mask: list[bool]) -> bytes:
    """AgentInfoProto.action_mask: packed bools, every branch's in a row (True: the action is disabled)."""
    return _ld(11, bytes(mask))


def brain_parameters_bytes(name: str, continuous: int, branches: list[int]) -> bytes:
    from ml_arl.protocol.communicator_objects.brain_parameters_pb2 import BrainParametersProto

    proto = BrainParametersProto(brain_name=name, is_training=True)
    proto.action_spec.num_continuous_actions = continuous
    proto.action_spec.num_discrete_actions = len(branches)
    proto.action_spec.discrete_branch_sizes.extend(branches)
    # the fields a pre-1.3 trainer reads; the C# side fills them for single-kind action spaces too
    if continuous:
        proto.vector_action_space_type_deprecated = 1
        proto.vector_action_size_deprecated.extend([continuous])
    else:
        proto.vector_action_space_type_deprecated = 0
        proto.vector_action_size_deprecated.extend(branches)
    return proto.SerializeToString()
