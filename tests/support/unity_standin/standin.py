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

This module is the process: the connection, the handshake, the environment parameters and engine
settings, the commands and the fault triggers. ``options.py`` reads the command line,
``behaviors.py`` holds the behaviors, ``wire.py`` encodes and decodes the messages by hand (proto3
wire format) so that the stand-in costs the bridge as little as a real player does. Run as a
program, it puts the repository's root on ``sys.path`` to import them as the package they are.
Dependencies: stdlib, numpy, grpc, ml_arl's protobuf modules (handshake, brain parameters), and
Pillow for PNG images.
"""

from __future__ import annotations

import os
import signal
import struct
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional, TextIO

import grpc
import numpy as np

if not __package__:  # run as a program (a build's launcher, python standin.py): its package's root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.support.unity_standin.behaviors import Crowd, Mates, Picker, Recall, Seeker  # noqa: E402
from tests.support.unity_standin.options import MATES, PICKER, RECALL, SEEKER, Options, parse_args  # noqa: E402
from tests.support.unity_standin.wire import (  # noqa: E402
    ANALYTICS_CHANNEL,
    COMMAND_QUIT,
    COMMAND_RESET,
    ENGINE_CHANNEL,
    EXCHANGE_METHOD,
    MESSAGE_EMPTY_200,
    MESSAGE_QUIT_400,
    MOST_RECENT,
    PACKAGE_VERSION,
    PARAMS_CHANNEL,
    SUM,
    Reader,
    Stats,
    decode_message,
    encode_output,
    split_side_channel,
)


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
