"""Stand-in Unity player build: the C# side of the ML-Agents gRPC protocol (communication API 1.5.0).

It is launched exactly as a Unity player is (``<build> [-nographics -batchmode] --mlagents-port P
[-logFile F] <extra args>``) or by hand as an Editor would be (no ``--mlagents-port``: it connects to
port 5004, or ``--editor-port N``). Unknown arguments are ignored.

Own options (all optional):
  --agents N            agents per training area per behavior (default 4); the trainer's num_areas
                        multiplies it
  --behaviors A,B       which behaviors exist: Seeker, Picker, Mates, Recall, Crowd (default Seeker)
  --visual              Seeker also gets a 20x20 RGB camera observation (PNG)
  --visual-layout L     how the camera is described: hwc (default) as com.unity.ml-agents 2.x does,
                        shape (H, W, 3) with dimension properties (TE, TE, NONE); chw as 3.x does,
                        shape (3, H, W) with (NONE, TE, TE). The PNG bytes are the same; uncompressed
                        floats follow the declared shape
  --visual-compression C  png (default) or none (float data, as a sensor without compression sends)
  --image-size HxW      camera height and width (default 20x20; a single N means NxN)
  --visual-only         Seeker observes the camera only (no vector observation): it must learn from pixels
  --episode-length L    Seeker's episode cut (default 20 steps)
  --crash-at S          SIGKILL itself at the S-th STEP command (counted from process start)
  --hang-at S           stop answering at the S-th STEP command (process stays alive)
  --quit-at S           send a status-400 message (as Application.Quit does) and exit 0
  --once-file PATH      the three triggers fire only while PATH does not exist; PATH is created when one fires
  --comm-version X      communication version announced (default 1.5.0)
  --editor-port N       port used without --mlagents-port (default 5004)
  --connect-timeout S   how long to wait for the trainer's server (default 30 s)
  --step-delay S        sleep per step (default 0)
  --no-stats            send no stats side-channel records (a trainer without a StatsSideChannel
                        logs a warning for each record it does not understand)
  --returns-file PATH   Mates, Recall and Crowd append a line "<behavior> <value>" to PATH for every
                        episode that ends (flushed at once), so that a test can watch a run learn
                        and stop it once solved. The value is the episode's return (Recall, Crowd),
                        or the agent's success (Mates, see below; 0 for an agent whose group is cut)

Behaviors:
  Seeker?team=0  continuous action (1); obs [x, g] (+ camera with --visual, camera only with
                 --visual-only: column of x red, column of g green); x moves by 0.25*a;
                 reward -0.1*|g-x| per step, +1 and done when |g-x| < 0.15; cut after L steps.
                 The goal range R comes from the environment parameter ``target_range`` (default 1).
  Picker?team=0  discrete branches [3, 2]; obs one-hot(cue) + [flag]; reward 0.5 per matching branch,
                 -1 for an action disabled by the mask; episodes of 5 decisions.
  Mates?team=0   groups of two agents (as a SimpleMultiAgentGroup: group ids 1001, 1002, ...;
                 --agents N gives N // 2 groups per area, at least 1), continuous action (1); obs [goal, x]
                 with a goal of -1 or +1 of its own; x starts at 0 and moves by a clamped to
                 [-0.2, 0.2] (as tests/support/simple_envs.py GoalReach and GroupReach). An agent
                 is done once |x| = 1, its success 1.06 * x * goal. Each step costs 0.01 (reward).
                 An agent that ends while its mate goes on leaves the group early (a terminal
                 step with its group id, reward min(-0.01, success)) and sends nothing more; when
                 the group's last agent ends, the group reward (the mean success of both, added
                 as AddGroupReward does) comes with its terminal step (EndGroupEpisode). A group
                 still going after L steps is interrupted (GroupEpisodeInterrupted). Every
                 episode gets new agent ids, as Unity's episode ids.
  Recall?team=0  memory task: continuous action (1); obs [cue], cue = the episode's goal (-1 or
                 +1) in its first 2 decisions, 0 after; a hidden x starts at 0 and moves by
                 a clamped to [-0.2, 0.2]; done once |x| = 1 with reward 1.06 * x * goal, each
                 other step -0.01; cut after L steps. Without a memory the best policy scores
                 about 0.
  Crowd?team=0   a buffer-sensor observation: continuous action (1); obs [x] and "BufferSensor",
                 shape (4, 3) with dimension properties (VARIABLE_SIZE, NONE) as Unity's
                 BufferSensor sends it: 1 to 4 entities an episode, each at p = -1 or +1, rows
                 [p / 2, is_goal, is_decoy] in a random order, then rows of zeros. Exactly one
                 entity is the goal. x starts at 0 and moves by a clamped to [-0.2, 0.2]; done
                 once |x| = 1 with reward 1.06 * x * p_goal, each other step -0.01; cut after L
                 steps. New agent ids every episode.

Messages are hand-encoded / decoded on the wire (proto3 wire format) so that the stand-in costs the
bridge as little as a real player does; the generated protobuf classes are only used for the
handshake and the brain parameters. Dependencies: stdlib, numpy, grpc, mlagents_envs protobufs
(and Pillow for PNG images).
"""

from __future__ import annotations

import os
import signal
import struct
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any, Optional, TextIO

import grpc
import numpy as np

EXCHANGE_METHOD = "/communicator_objects.UnityToExternalProto/Exchange"
PACKAGE_VERSION = "2.2.1-exp.1"

ENGINE_CHANNEL = uuid.UUID("e951342c-4f7e-11ea-b238-784f4387d1f7")
PARAMS_CHANNEL = uuid.UUID("534c891e-810f-11ea-a9d0-822485860400")
STATS_CHANNEL = uuid.UUID("a1d8f7b7-cec8-50f9-b78b-d3e165a78520")
ANALYTICS_CHANNEL = uuid.UUID("b664a4a9-d86f-5a5f-95cb-e8353a7e8356")

COMMAND_STEP, COMMAND_RESET, COMMAND_QUIT = 0, 1, 2
AVERAGE, MOST_RECENT, SUM, HISTOGRAM = 0, 1, 2, 3

SEEKER = "Seeker?team=0"
PICKER = "Picker?team=0"
MATES = "Mates?team=0"
RECALL = "Recall?team=0"
CROWD = "Crowd?team=0"
PICKER_EPISODE = 5
IMAGE_SIZE = 20

# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

_VALUE_OPTIONS = {
    "--mlagents-port": int,
    "--agents": int,
    "--behaviors": str,
    "--episode-length": int,
    "--crash-at": int,
    "--hang-at": int,
    "--quit-at": int,
    "--once-file": str,
    "--comm-version": str,
    "--editor-port": int,
    "--connect-timeout": float,
    "--step-delay": float,
    "--visual-layout": str,
    "--visual-compression": str,
    "--image-size": str,
    "--returns-file": str,
}
_FLAG_OPTIONS = {"--visual", "--visual-only", "--no-stats", "-nographics", "-batchmode"}
VISUAL_LAYOUTS = ("hwc", "chw")
VISUAL_COMPRESSIONS = ("png", "none")


class Options:
    def __init__(self) -> None:
        self.mlagents_port: Optional[int] = None
        self.agents = 4
        self.behaviors = "Seeker"
        self.episode_length = 20
        self.crash_at: Optional[int] = None
        self.hang_at: Optional[int] = None
        self.quit_at: Optional[int] = None
        self.once_file: Optional[str] = None
        self.comm_version = "1.5.0"
        self.editor_port = 5004
        self.connect_timeout = 30.0
        self.step_delay = 0.0
        self.visual = False
        self.visual_only = False
        self.visual_layout = "hwc"
        self.visual_compression = "png"
        self.image_size = f"{IMAGE_SIZE}x{IMAGE_SIZE}"
        self.image_height = IMAGE_SIZE
        self.image_width = IMAGE_SIZE
        self.no_stats = False
        self.returns_file: Optional[str] = None
        self.nographics = False
        self.batchmode = False
        self.log_file: Optional[str] = None
        self.warnings: list[str] = []

    @property
    def port(self) -> int:
        return self.mlagents_port if self.mlagents_port is not None else self.editor_port

    def behavior_names(self) -> list[str]:
        names = []
        known = {name.split("?")[0].lower(): name for name in (SEEKER, PICKER, MATES, RECALL, CROWD)}
        for part in self.behaviors.split(","):
            key = part.strip().split("?")[0].lower()
            if key in known:
                if known[key] not in names:
                    names.append(known[key])
            elif key:
                self.warnings.append(f"unknown behavior {part!r} ignored")
        return names or [SEEKER]


def parse_args(argv: list[str]) -> Options:
    """Reads the options it knows; anything else is ignored (never fails)."""
    opts = Options()
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if arg.lower() == "-logfile":
            if i + 1 < len(argv):
                opts.log_file = argv[i + 1]
                i += 1
        elif arg in _FLAG_OPTIONS:
            setattr(opts, arg.lstrip("-").replace("-", "_"), True)
        elif name in _VALUE_OPTIONS:
            if eq:
                raw: Optional[str] = inline
            elif i + 1 < len(argv):
                raw = argv[i + 1]
                i += 1
            else:
                raw = None
            if raw is None:
                opts.warnings.append(f"{name} without a value ignored")
            else:
                try:
                    setattr(opts, name[2:].replace("-", "_"), _VALUE_OPTIONS[name](raw))
                except ValueError:
                    opts.warnings.append(f"{name} {raw!r}: bad value ignored")
        i += 1
    if opts.agents < 1:
        opts.warnings.append(f"--agents {opts.agents} raised to 1")
        opts.agents = 1
    if opts.episode_length < 1:
        opts.episode_length = 1
    opts.visual = opts.visual or opts.visual_only
    opts.visual_layout = opts.visual_layout.lower()
    if opts.visual_layout not in VISUAL_LAYOUTS:
        opts.warnings.append(f"--visual-layout {opts.visual_layout!r} unknown: hwc")
        opts.visual_layout = "hwc"
    opts.visual_compression = opts.visual_compression.lower()
    if opts.visual_compression not in VISUAL_COMPRESSIONS:
        opts.warnings.append(f"--visual-compression {opts.visual_compression!r} unknown: png")
        opts.visual_compression = "png"
    try:
        sizes = [int(v) for v in opts.image_size.lower().split("x")]
        if len(sizes) == 1:
            sizes *= 2
        height, width = sizes
        if height < 1 or width < 1:
            raise ValueError
        opts.image_height, opts.image_width = height, width
    except ValueError:
        opts.warnings.append(f"--image-size {opts.image_size!r}: bad value ignored")
    return opts


class Log:
    """Plain lines, flushed each; to -logFile's path, stdout for '-', else stderr."""

    def __init__(self, path: Optional[str]) -> None:
        self.t0 = time.monotonic()
        self.stream: TextIO = sys.stderr
        self.error = ""
        if path == "-":
            self.stream = sys.stdout
        elif path:
            try:
                parent = os.path.dirname(os.path.abspath(path))
                os.makedirs(parent, exist_ok=True)
                self.stream = open(path, "w", encoding="utf-8")  # kept open for the life of the process
            except OSError as err:
                self.error = f"cannot open log file {path!r}: {err}; logging to stderr"

    def __call__(self, message: str) -> None:
        try:
            self.stream.write(f"[standin {time.monotonic() - self.t0:9.3f}] {message}\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass


# --------------------------------------------------------------------------------------------
# Wire format (proto3): just what the messages of communication API 1.5.0 need
# --------------------------------------------------------------------------------------------


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


def _float_bytes(values: np.ndarray) -> bytes:
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


TE, NONE = 2, 1  # DimensionProperty values


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
    floats = _float_bytes(ordered.astype(np.float32) / 255.0)
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


class Sampler:
    """An environment-parameter sampler with its own seeded generator."""

    NAMES = {0: "uniform", 1: "gaussian", 2: "multirangeuniform"}

    def __init__(self, kind: int, seed: int, args: list[float]) -> None:
        self.kind = kind
        self.seed = seed
        self.args = args
        self.rng = np.random.default_rng(seed & 0xFFFFFFFF)
        self.last = float("nan")

    def describe(self) -> str:
        return f"sampler {self.NAMES.get(self.kind, self.kind)} {self.args} seed {self.seed}"

    def draw(self, n: int) -> np.ndarray:
        a = self.args
        if self.kind == 0 and len(a) >= 2:
            values = self.rng.uniform(a[0], a[1], n)
        elif self.kind == 1 and len(a) >= 2:
            values = self.rng.normal(a[0], abs(a[1]), n)
        elif self.kind == 2 and len(a) >= 2:
            lows = np.array(a[0::2][: len(a) // 2])
            highs = np.array(a[1::2][: len(a) // 2])
            widths = np.abs(highs - lows)
            p = widths / widths.sum() if widths.sum() > 0 else np.full(len(widths), 1.0 / len(widths))
            pick = self.rng.choice(len(widths), size=n, p=p)
            values = self.rng.uniform(lows[pick], highs[pick])
        else:
            values = np.zeros(n)
        if n:
            self.last = float(values[-1])
        return values


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


# --------------------------------------------------------------------------------------------
# The world: behaviors and their agents
# --------------------------------------------------------------------------------------------


class Seeker:
    name = SEEKER

    def __init__(self, world: World, n: int, per_area: int, episode_length: int, opts: Options) -> None:
        self.world = world
        self.n = n
        self.episode_length = episode_length
        self.visual = opts.visual
        self.visual_only = opts.visual_only
        self.layout = opts.visual_layout
        self.compression = opts.visual_compression
        self.height, self.width = opts.image_height, opts.image_width
        self.x = np.zeros(n)
        self.g = np.zeros(n)
        self.steps = np.zeros(n, dtype=np.int64)
        self.enc = InfoEncoder(n, [i // per_area + 1 for i in range(n)])
        self.obs_head, self.obs_tail = vector_observation("VectorSensor", 2)
        self.group_reward = struct.pack("<f", 0.5)
        self.camera_cache: dict[tuple[int, int], bytes] = {}
        self.image_module: Any = None
        if self.visual and self.compression == "png":
            from PIL import Image  # only for PNG images

            self.image_module = Image

    def brain_parameters(self) -> bytes:
        return brain_parameters_bytes(self.name, continuous=1, branches=[])

    def _start(self, idx: np.ndarray) -> None:
        rng = self.world.rng
        r_values = self.world.parameter("target_range", len(idx), 1.0)
        self.world.stats.add_many("Standin/target_range", r_values, AVERAGE)
        r = np.minimum(np.abs(r_values), 1.0)
        self.g[idx] = rng.uniform(-r, r)
        self.x[idx] = rng.uniform(-1.0, 1.0, len(idx))
        self.steps[idx] = 0

    def _observations(self, x: np.ndarray, g: np.ndarray) -> list[bytes]:
        floats = _float_bytes(np.stack([x, g], axis=1))
        head, tail = self.obs_head, self.obs_tail
        vectors = [head + floats[8 * i : 8 * i + 8] + tail for i in range(len(x))]
        if not self.visual:
            return vectors
        if self.visual_only:
            vectors = [b""] * len(x)
        cx = np.rint((np.clip(x, -1, 1) + 1.0) * (self.width - 1) / 2).astype(int).tolist()
        cg = np.rint((np.clip(g, -1, 1) + 1.0) * (self.width - 1) / 2).astype(int).tolist()
        return [v + self._camera(a, b) for v, a, b in zip(vectors, cx, cg)]

    def _camera(self, cx: int, cg: int) -> bytes:
        """Column cx (the agent) red, column cg (the goal) green."""
        cached = self.camera_cache.get((cx, cg))
        if cached is None:
            image = np.zeros((self.height, self.width, 3), dtype=np.uint8)
            image[:, cx, 0] = 255
            image[:, cg, 1] = 255
            cached = camera_observation("CameraSensor", image, self.layout, self.compression, self.image_module)
            self.camera_cache[(cx, cg)] = cached
        return cached

    def reset(self) -> bytes:
        self._start(np.arange(self.n))
        return self._decisions(np.zeros(self.n, dtype=np.float32))

    def _decisions(self, rewards: np.ndarray) -> bytes:
        rb = _float_bytes(rewards)
        obs = self._observations(self.x, self.g)
        info = self.enc.info
        return b"".join([info(i, rb[4 * i : 4 * i + 4], obs[i]) for i in range(self.n)])

    def step(self, actions: list[bytes]) -> bytes:
        a = np.zeros(self.n)
        for i, raw in enumerate(actions[: self.n]):
            cont, _ = decode_action(raw)
            if cont:
                a[i] = cont[0]
        a = np.clip(np.nan_to_num(a), -1.0, 1.0)
        self.x = np.clip(self.x + 0.25 * a, -1.0, 1.0)
        self.steps += 1
        distance = np.abs(self.g - self.x)
        reached = distance < 0.15
        rewards = np.where(reached, 1.0, -0.1 * distance).astype(np.float32)
        cut = ~reached & (self.steps >= self.episode_length)
        done = np.flatnonzero(reached | cut)
        terminal = b""
        if len(done):
            rb = _float_bytes(rewards[done])
            obs = self._observations(self.x[done], self.g[done])
            info = self.enc.info
            terminal = b"".join([
                info(i, rb[4 * j : 4 * j + 4], obs[j], done=True, max_step=bool(cut[i]),
                     group_reward=self.group_reward if reached[i] else b"")
                for j, i in enumerate(done.tolist())
            ])
            self.world.episodes += len(done)
            self.world.stats.add_many("Standin/Goal Distance", distance[done], HISTOGRAM)
            self._start(done)
            rewards[done] = 0.0
        return terminal + self._decisions(rewards)


class Picker:
    name = PICKER

    def __init__(self, world: World, n: int) -> None:
        self.world = world
        self.n = n
        self.steps = np.zeros(n, dtype=np.int64)
        self.cue = np.zeros(n, dtype=np.int64)
        self.flag = np.zeros(n, dtype=np.int64)
        self.disabled = np.zeros(n, dtype=np.int64)
        self.enc = InfoEncoder(n, [0] * n)
        self.obs_head, self.obs_tail = vector_observation("VectorSensor", 4)
        self.masks = [
            _ld(11, bytes(1 if b == d else 0 for b in range(3)) + b"\x00\x00") for d in range(3)
        ]  # packed bools, branch 0 then branch 1
        self.eye = np.eye(3)

    def brain_parameters(self) -> bytes:
        return brain_parameters_bytes(self.name, continuous=0, branches=[3, 2])

    def _draw(self) -> None:
        rng = self.world.rng
        self.cue = rng.integers(0, 3, self.n)
        self.flag = rng.integers(0, 2, self.n)
        self.disabled = (self.cue + rng.integers(1, 3, self.n)) % 3

    def _observations(self, idx: np.ndarray) -> list[bytes]:
        obs = np.concatenate([self.eye[self.cue[idx]], self.flag[idx, None]], axis=1)
        floats = _float_bytes(obs)
        return [self.obs_head + floats[16 * j : 16 * j + 16] + self.obs_tail for j in range(len(idx))]

    def reset(self) -> bytes:
        self.steps[:] = 0
        self._draw()
        self.world.stats.add("Standin/Masked Actions Taken", 0.0, SUM)
        return self._decisions(np.zeros(self.n, dtype=np.float32))

    def _decisions(self, rewards: np.ndarray) -> bytes:
        rb = _float_bytes(rewards)
        obs = self._observations(np.arange(self.n))
        info, masks, disabled = self.enc.info, self.masks, self.disabled.tolist()
        return b"".join([info(i, rb[4 * i : 4 * i + 4], obs[i], mask=masks[disabled[i]]) for i in range(self.n)])

    def step(self, actions: list[bytes]) -> bytes:
        b0 = np.zeros(self.n, dtype=np.int64)
        b1 = np.zeros(self.n, dtype=np.int64)
        for i, raw in enumerate(actions[: self.n]):
            _, disc = decode_action(raw)
            if disc:
                b0[i] = disc[0]
                if len(disc) > 1:
                    b1[i] = disc[1]
        masked = b0 == self.disabled
        rewards = (0.5 * (b0 == self.cue) + 0.5 * (b1 == self.flag)).astype(np.float32)
        rewards[masked] = -1.0
        self.world.stats.add("Standin/Masked Actions Taken", float(masked.sum()), SUM)
        self.steps += 1
        self._draw()
        done = np.flatnonzero(self.steps >= PICKER_EPISODE)
        terminal = b""
        if len(done):
            rb = _float_bytes(rewards[done])
            obs = self._observations(done)
            terminal = b"".join([
                self.enc.info(i, rb[4 * j : 4 * j + 4], obs[j], done=True) for j, i in enumerate(done.tolist())
            ])
            self.world.episodes += len(done)
            self.steps[done] = 0
            rewards[done] = 0.0
        return terminal + self._decisions(rewards)


# Behaviors of issue 13: groups (Mates), memory (Recall), a buffer sensor (Crowd). Unlike Seeker
# and Picker their agents get a new id every episode, as Unity's episode ids.

MOVE = 0.2
TIME_PENALTY = 0.01
SUCCESS = 1.0 + 6 * TIME_PENALTY  # the best return of a reach from 0 to +-1 is about 1.0
RECALL_SHOW_STEPS = 2
CROWD_ENTITIES, CROWD_ENTITY_SIZE = 4, 3
VARIABLE_SIZE = 4  # DimensionProperty.VARIABLE_SIZE
GROUP_ID_BASE = 1000


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
    body = _packed_varints(1, list(values.shape)) + _ld(4, _ld(1, _float_bytes(values))) + props + _ld(8, name.encode())
    return _ld(13, body)


def vector(name: str, values: np.ndarray) -> bytes:
    head, tail = vector_observation(name, len(values))
    return head + _float_bytes(values) + tail


class _Episodic:
    """Agents that each get a new id when a new episode starts."""

    def __init__(self, world: World, n: int) -> None:
        self.world = world
        self.n = n
        self.ids = np.zeros(n, dtype=np.int64)  # every episode (a RESET's too) gets new ids: 0, 1, ...
        self.next_id = 0

    def _new_ids(self, idx: np.ndarray) -> None:
        self.ids[idx] = np.arange(self.next_id, self.next_id + len(idx))
        self.next_id += len(idx)

    @staticmethod
    def _moves(actions: list[bytes], n: int) -> np.ndarray:
        a = np.zeros(n)
        for i, raw in enumerate(actions[:n]):
            cont, _ = decode_action(raw)
            if cont:
                a[i] = cont[0]
        return np.clip(np.nan_to_num(a), -1.0, 1.0)


class Mates(_Episodic):
    """Groups of two 1-D reaches with a group reward (see the module docstring)."""

    name = MATES
    GROUP = 2

    def __init__(self, world: World, n_groups: int, episode_length: int) -> None:
        super().__init__(world, n_groups * self.GROUP)
        self.n_groups = n_groups
        self.episode_length = episode_length
        self.group_ids = GROUP_ID_BASE + 1 + np.arange(self.n) // self.GROUP
        self.x = np.zeros(self.n)
        self.goal = np.ones(self.n)
        self.success = np.zeros(self.n)
        self.active = np.ones(self.n, dtype=bool)
        self.t = np.zeros(n_groups, dtype=np.int64)

    def brain_parameters(self) -> bytes:
        return brain_parameters_bytes(self.name, continuous=1, branches=[])

    def _start(self, groups: np.ndarray) -> None:
        idx = (groups[:, None] * self.GROUP + np.arange(self.GROUP)).ravel()
        self.x[idx] = 0.0
        self.goal[idx] = self.world.rng.choice([-1.0, 1.0], len(idx))
        self.success[idx] = 0.0
        self.active[idx] = True
        self.t[groups] = 0
        self._new_ids(idx)

    def _info(self, i: int, reward: float, **kw: Any) -> bytes:
        obs = vector("VectorSensor", np.array([self.goal[i], self.x[i]]))
        return agent_info(int(self.ids[i]), reward, obs, group_id=int(self.group_ids[i]), **kw)

    def reset(self) -> bytes:
        self._start(np.arange(self.n_groups))
        return b"".join(self._info(i, 0.0) for i in range(self.n))

    def step(self, actions: list[bytes]) -> bytes:
        acting = np.flatnonzero(self.active)  # the agents asked for a decision last time, in that order
        self.x[acting] = np.clip(self.x[acting] + np.clip(self._moves(actions, len(acting)), -MOVE, MOVE), -1.0, 1.0)
        self.t += 1
        ended = self.active & (np.abs(self.x) >= 1.0 - 1e-6)
        self.success[ended] = SUCCESS * np.sign(self.x[ended]) * self.goal[ended]
        still = (self.active & ~ended).reshape(self.n_groups, self.GROUP)
        group_over = ~still.any(axis=1)
        cut = ~group_over & (self.t >= self.episode_length)
        group_of = np.arange(self.n) // self.GROUP
        terminal: list[bytes] = []
        for i in np.flatnonzero(ended).tolist():
            g = group_of[i]
            if group_over[g]:  # AddGroupReward(mean success), then EndGroupEpisode
                mean = float(self.success[g * self.GROUP : (g + 1) * self.GROUP].mean())
                terminal.append(self._info(i, 0.0, done=True, group_reward=mean))
            else:  # leaves its group early
                terminal.append(self._info(i, min(-TIME_PENALTY, float(self.success[i])), done=True))
        for i in np.flatnonzero(still.ravel() & cut[group_of]).tolist():  # GroupEpisodeInterrupted
            terminal.append(self._info(i, -TIME_PENALTY, done=True, max_step=True))
        interrupted = still.ravel() & cut[group_of]
        self.world.record(self.name, self.success[ended].tolist() + [0.0] * int(interrupted.sum()))  # cut: no success
        self.world.episodes += int(ended.sum()) + int(interrupted.sum())
        self.active &= ~ended
        restart = np.flatnonzero(group_over | cut)
        if len(restart):
            self._start(restart)
        fresh = np.isin(group_of, restart)
        decisions = [self._info(i, 0.0 if fresh[i] else -TIME_PENALTY) for i in np.flatnonzero(self.active).tolist()]
        return b"".join(terminal + decisions)


class _Reach(_Episodic):
    """A one-dimensional reach per agent (Recall, Crowd): position x moves by the action clamped to
    +-MOVE; at -1 or +1 the episode ends with SUCCESS * sign(x) * goal; each other step costs
    TIME_PENALTY; an episode is cut after ``episode_length`` steps. Subclasses set up an episode in
    ``_start`` and say what an agent observes in ``_info``."""

    x: np.ndarray
    t: np.ndarray
    goal: np.ndarray
    returns: np.ndarray
    episode_length: int
    _start: Callable[[np.ndarray], None]  # set up the episodes of these agents
    _info: Callable[..., bytes]  # (agent, reward, **agent_info keywords): its AgentInfo bytes

    def reset(self) -> bytes:
        self._start(np.arange(self.n))
        return b"".join(self._info(i, 0.0) for i in range(self.n))

    def step(self, actions: list[bytes]) -> bytes:
        self.x = np.clip(self.x + np.clip(self._moves(actions, self.n), -MOVE, MOVE), -1.0, 1.0)
        self.t += 1
        finished = np.abs(self.x) >= 1.0 - 1e-6
        rewards = np.where(finished, SUCCESS * np.sign(self.x) * self.goal, -TIME_PENALTY)
        self.returns += rewards
        cut = ~finished & (self.t >= self.episode_length)
        done = np.flatnonzero(finished | cut)
        terminal = [self._info(i, float(rewards[i]), done=True, max_step=bool(cut[i])) for i in done.tolist()]
        self.world.record(self.name, self.returns[done].tolist())
        self.world.episodes += len(done)
        self._start(done)
        rewards[done] = 0.0
        return b"".join(terminal + [self._info(i, float(rewards[i])) for i in range(self.n)])


class Recall(_Reach):
    """The goal is shown only in an episode's first decisions (see the module docstring)."""

    name = RECALL

    def __init__(self, world: World, n: int, episode_length: int) -> None:
        super().__init__(world, n)
        self.episode_length = episode_length
        self.x = np.zeros(n)
        self.goal = np.ones(n)
        self.t = np.zeros(n, dtype=np.int64)
        self.returns = np.zeros(n)

    def brain_parameters(self) -> bytes:
        return brain_parameters_bytes(self.name, continuous=1, branches=[])

    def _start(self, idx: np.ndarray) -> None:
        self.x[idx] = 0.0
        self.goal[idx] = self.world.rng.choice([-1.0, 1.0], len(idx))
        self.t[idx] = 0
        self.returns[idx] = 0.0
        self._new_ids(idx)

    def _info(self, i: int, reward: float, **kw: Any) -> bytes:
        cue = self.goal[i] if self.t[i] < RECALL_SHOW_STEPS else 0.0
        return agent_info(int(self.ids[i]), reward, vector("VectorSensor", np.array([cue])), **kw)


class Crowd(_Reach):
    """A reach to the one goal among 1 to 4 entities of a buffer sensor (see the module docstring)."""

    name = CROWD

    def __init__(self, world: World, n: int, episode_length: int) -> None:
        super().__init__(world, n)
        self.episode_length = episode_length
        self.x = np.zeros(n)
        self.goal = np.zeros(n)
        self.places = np.zeros((n, CROWD_ENTITIES))  # entity positions, in row order
        self.kinds = np.zeros((n, CROWD_ENTITIES, 2))  # rows [is_goal, is_decoy]; padding rows all 0
        self.t = np.zeros(n, dtype=np.int64)
        self.returns = np.zeros(n)

    def brain_parameters(self) -> bytes:
        return brain_parameters_bytes(self.name, continuous=1, branches=[])

    def _start(self, idx: np.ndarray) -> None:
        rng = self.world.rng
        for i in idx.tolist():
            count = int(rng.integers(1, CROWD_ENTITIES + 1))  # appended in a random order, one of them the goal
            self.places[i] = 0.0
            self.places[i, :count] = rng.choice([-1.0, 1.0], count)
            self.kinds[i] = 0.0
            self.kinds[i, :count, 1] = 1.0
            goal = int(rng.integers(0, count))
            self.kinds[i, goal] = (1.0, 0.0)
            self.goal[i] = self.places[i, goal]
        self.x[idx] = 0.0
        self.t[idx] = 0
        self.returns[idx] = 0.0
        self._new_ids(idx)

    def entities(self, i: int) -> np.ndarray:
        """The buffer: rows [p / 2, is_goal, is_decoy], then rows of zeros (a present row sums to
        0.5 or 1.5: never all zeros, nor summing to 0 as padding rows do)."""
        return np.concatenate([self.places[i, :, None] / 2.0, self.kinds[i]], axis=1)

    def _info(self, i: int, reward: float, **kw: Any) -> bytes:
        obs = vector("VectorSensor", np.array([self.x[i]])) + float_observation(
            "BufferSensor", self.entities(i), (VARIABLE_SIZE, NONE)
        )
        return agent_info(int(self.ids[i]), reward, obs, **kw)


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


class World:
    def __init__(self, opts: Options, seed: int, num_areas: int, log: Callable[[str], None]) -> None:
        self.log = log
        self.rng = np.random.default_rng(seed & 0xFFFFFFFF)
        self.stats = Stats(enabled=not opts.no_stats)
        self.params: dict[str, Any] = {}  # key -> float or Sampler
        self.time_scale: Optional[float] = None
        self.episodes = 0
        areas = max(1, num_areas)
        n = opts.agents * areas
        self.behaviors: list[Any] = []
        self.returns_file: Optional[TextIO] = None
        if opts.returns_file:
            try:
                self.returns_file = open(opts.returns_file, "a", encoding="utf-8")  # kept open for the life of the process
            except OSError as err:
                log(f"cannot open returns file {opts.returns_file!r}: {err}; no returns written")
        for name in opts.behavior_names():
            if name == SEEKER:
                self.behaviors.append(Seeker(self, n, opts.agents, opts.episode_length, opts))
            elif name == PICKER:
                self.behaviors.append(Picker(self, n))
            elif name == MATES:
                self.behaviors.append(Mates(self, max(1, opts.agents // 2) * areas, opts.episode_length))
            elif name == RECALL:
                self.behaviors.append(Recall(self, n, opts.episode_length))
            else:
                self.behaviors.append(Crowd(self, n, opts.episode_length))
        self.announced: set[str] = set()
        self.unknown_channels: set[uuid.UUID] = set()
        self.started = False

    def record(self, behavior: str, values: list[float]) -> None:
        """Ended episodes' returns (or successes) to --returns-file, one line each."""
        if self.returns_file is None or not values:
            return
        short = behavior.split("?")[0]
        try:
            self.returns_file.write("".join(f"{short} {v:.6f}\n" for v in values))
            self.returns_file.flush()
        except (OSError, ValueError):
            pass

    def parameter(self, key: str, n: int, default: float) -> np.ndarray:
        value = self.params.get(key)
        if value is None:
            return np.full(n, default)
        if isinstance(value, Sampler):
            return value.draw(n)
        return np.full(n, float(value))

    # side channels (Python -> Unity) ------------------------------------------------------
    def read_side_channel(self, data: bytes) -> None:
        for channel, payload in split_side_channel(data):
            try:
                if channel == ENGINE_CHANNEL:
                    self._engine(Reader(payload))
                elif channel == PARAMS_CHANNEL:
                    self._parameter(Reader(payload))
                elif channel not in self.unknown_channels:
                    self.unknown_channels.add(channel)
                    what = "training analytics" if channel == ANALYTICS_CHANNEL else "unknown"
                    self.log(f"side channel {channel} ({what}) ignored")
            except struct.error:
                self.log(f"side channel {channel}: truncated message ignored")

    def _engine(self, r: Reader) -> None:
        kind = r.int32()
        if kind == 0:
            width, height = r.int32(), r.int32()
            self.log(f"engine configuration: screen resolution {width}x{height}")
        elif kind == 1:
            self.log(f"engine configuration: quality_level {r.int32()}")
        elif kind == 2:
            self.time_scale = r.float32()
            self.log(f"engine configuration: time_scale {self.time_scale}")
        elif kind == 3:
            self.log(f"engine configuration: target_frame_rate {r.int32()}")
        elif kind == 4:
            self.log(f"engine configuration: capture_frame_rate {r.int32()}")
        else:
            self.log(f"engine configuration: unknown type {kind} ignored")

    def _parameter(self, r: Reader) -> None:
        key = r.string()
        kind = r.int32()
        if kind == 0:
            value = r.float32()
            self.params[key] = value
            self.log(f"environment parameter {key} = {value}")
        elif kind == 1:
            seed = r.int32()
            sampler_kind = r.int32()
            args = r.float_list() if sampler_kind == 2 else [r.float32(), r.float32()]
            sampler = Sampler(sampler_kind, seed, args)
            sampler.draw(1)  # so that a value is known (and reported) at once
            self.params[key] = sampler
            self.log(f"environment parameter {key} = {sampler.describe()}")
        else:
            self.log(f"environment parameter {key}: unknown type {kind} ignored")

    # commands ------------------------------------------------------------------------------
    def reset(self) -> bytes:
        self.started = True
        return self._output([(b.name, b.reset()) for b in self.behaviors])

    def step(self, actions: dict[str, list[bytes]]) -> bytes:
        if not self.started:
            return self.reset()
        return self._output([(b.name, b.step(actions.get(b.name, []))) for b in self.behaviors])

    def _output(self, infos: list[tuple[str, bytes]]) -> bytes:
        stats = self.stats
        stats.add("Standin/Episodes", float(self.episodes), SUM)
        self.episodes = 0
        if self.time_scale is not None:
            stats.add("Standin/Time Scale", self.time_scale, MOST_RECENT)
        for key, value in self.params.items():
            stats.add(f"Standin/param/{key}", value.last if isinstance(value, Sampler) else value, MOST_RECENT)
        brains = []
        for behavior in self.behaviors:
            if behavior.name not in self.announced:
                self.announced.add(behavior.name)
                brains.append(behavior.brain_parameters())
        return encode_output(infos, brains, stats.take())


# --------------------------------------------------------------------------------------------
# Process
# --------------------------------------------------------------------------------------------


def handshake_message(opts: Options) -> bytes:
    from ml_arl.protocol.communicator_objects.unity_message_pb2 import UnityMessageProto

    msg = UnityMessageProto()
    msg.header.status = 200
    init = msg.unity_output.rl_initialization_output
    init.name = "AcademySingleton"
    init.communication_version = opts.comm_version
    init.package_version = PACKAGE_VERSION
    caps = init.capabilities
    caps.baseRLCapabilities = True
    caps.concatenatedPngObservations = True
    caps.compressedChannelMapping = True
    caps.hybridActions = True
    caps.trainingAnalytics = False
    caps.variableLengthObservation = True
    caps.multiAgentGroups = True
    return msg.SerializeToString()


def _exit(log: Log, code: int, channel: Optional[grpc.Channel] = None) -> None:
    log(f"exit {code}")
    if channel is not None:
        try:
            channel.close()
        except Exception:  # leaving anyway
            pass
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _hang(log: Log) -> None:
    """Stay alive without answering; leave only when orphaned (so no process is leaked)."""
    parent = os.getppid()
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            log("hang: parent process gone")
            _exit(log, 0)


def _trigger(opts: Options, step: int) -> Optional[str]:
    kind = None
    if opts.crash_at is not None and step == opts.crash_at:
        kind = "crash"
    elif opts.hang_at is not None and step == opts.hang_at:
        kind = "hang"
    elif opts.quit_at is not None and step == opts.quit_at:
        kind = "quit"
    if kind is None:
        return None
    if opts.once_file:
        if os.path.exists(opts.once_file):
            return None
        os.makedirs(os.path.dirname(os.path.abspath(opts.once_file)), exist_ok=True)
        with open(opts.once_file, "w") as f:
            f.write(f"{kind} at step {step}\n")
    return kind


def main(argv: list[str]) -> None:
    opts = parse_args(argv)
    log = Log(opts.log_file)
    if log.error:
        log(log.error)
    log(f"argv: {argv}")
    for warning in opts.warnings:
        log(f"warning: {warning}")
    mode = "player" if opts.mlagents_port is not None else "editor"
    log(f"connecting to localhost:{opts.port} ({mode} mode, communication version {opts.comm_version})")

    channel = grpc.insecure_channel(
        f"localhost:{opts.port}",
        options=[
            ("grpc.enable_http_proxy", 0),
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 500),
        ],
    )
    # raw bytes in and out: messages are encoded by hand (see the wire-format section)
    exchange = channel.unary_unary(EXCHANGE_METHOD)

    try:
        reply = decode_message(exchange(handshake_message(opts), wait_for_ready=True, timeout=opts.connect_timeout))
    except grpc.RpcError as err:
        log(f"handshake failed: {err.code()} {err.details()}")
        _exit(log, 1, channel)
        return
    if reply.status != 200:
        log(f"handshake answered with status {reply.status}")
        _exit(log, 0, channel)
    seed = reply.seed or 0
    log(
        f"handshake: seed {seed}, num_areas {reply.num_areas}, python communication version "
        f"{reply.communication_version}, package {reply.package_version}"
    )
    world = World(opts, seed, reply.num_areas, log)
    log(f"behaviors: {[b.name for b in world.behaviors]}, {world.behaviors[0].n} agents each")

    out = MESSAGE_EMPTY_200
    steps = 0
    while True:
        try:
            raw = exchange(out)
        except grpc.RpcError as err:
            log(f"connection closed: {err.code()} {err.details()}")
            _exit(log, 0, channel)
            return
        msg = decode_message(raw)
        if msg.status != 200:
            log(f"close: trainer sent status {msg.status}")
            _exit(log, 0, channel)
        if msg.side_channel:
            world.read_side_channel(msg.side_channel)
        if msg.command == COMMAND_RESET:
            log(f"RESET (after {steps} steps)")
            out = world.reset()
        elif msg.command == COMMAND_QUIT:
            log("QUIT command")
            _exit(log, 0, channel)
        else:
            steps += 1
            kind = _trigger(opts, steps) if (opts.crash_at or opts.hang_at or opts.quit_at) else None
            if kind == "crash":
                log(f"crash-at {steps}: SIGKILL")
                os.kill(os.getpid(), signal.SIGKILL)
            elif kind == "hang":
                log(f"hang-at {steps}: no more answers")
                _hang(log)
            elif kind == "quit":
                log(f"quit-at {steps}: sending status 400 (Application.Quit)")
                try:
                    exchange.future(MESSAGE_QUIT_400).result(timeout=2.0)
                except Exception:  # the trainer may not answer; leaving anyway
                    pass
                _exit(log, 0, channel)
            out = world.step(msg.actions)
        if opts.step_delay > 0:
            time.sleep(opts.step_delay)


if __name__ == "__main__":
    main(sys.argv[1:])
