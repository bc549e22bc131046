"""The fast Unity bridge (ml_arl.envs.adapters.unity_fast): its wire encoder/decoder against the generated
protobuf classes and mlagents-envs' own conversion, and a stand-in build stepped in lockstep
with the fast bridge on and off (identical steps, side-channel stats and error behaviour)."""

from __future__ import annotations

import io
import math
import re
import struct
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import numpy as np
import pytest
from mlagents_envs.base_env import (
    ActionSpec,
    ActionTuple,
    BehaviorSpec,
    DecisionSteps,
    DimensionProperty,
    ObservationSpec,
    ObservationType,
    TerminalSteps,
)
from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.exception import (
    UnityCommunicatorStoppedException,
    UnityEnvironmentException,
    UnityTimeOutException,
)
from mlagents_envs.rpc_utils import behavior_spec_from_proto, steps_from_proto
from mlagents_envs.side_channel.side_channel_manager import SideChannelManager
from mlagents_envs.side_channel.stats_side_channel import StatsSideChannel

from ml_arl.envs.adapters import unity_decode, unity_env, unity_fast, unity_wire
from ml_arl.envs.adapters.unity_env import UnityBuildEnv
from ml_arl.protocol.communicator_objects.unity_message_pb2 import UnityMessageProto
from ml_arl.protocol.communicator_objects.unity_output_pb2 import UnityOutputProto
from tests.support.unity_standin import free_base_port, make_build, wire

SEEKER = "Seeker?team=0"
PICKER = "Picker?team=0"


# --- comparing steps -------------------------------------------------------------------------


def assert_same_array(a: Any, b: Any, what: str) -> None:
    assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), what
    assert a.dtype == b.dtype and a.shape == b.shape, (what, a.dtype, b.dtype, a.shape, b.shape)
    assert a.strides == b.strides and a.flags.writeable == b.flags.writeable, what  # same memory layout
    np.testing.assert_array_equal(a, b, err_msg=what)
    if a.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b), err_msg=what)  # -0.0 stays -0.0


def assert_same_steps(fast: tuple[DecisionSteps, TerminalSteps], stock: tuple[DecisionSteps, TerminalSteps],
                      what: str = "") -> None:
    for kind, a, b in (("decision", fast[0], stock[0]), ("terminal", fast[1], stock[1])):
        w = f"{what} {kind}"
        assert type(a) is type(b), w
        assert len(a.obs) == len(b.obs), w
        for i, (x, y) in enumerate(zip(a.obs, b.obs)):
            assert_same_array(x, y, f"{w} obs {i}")
        for name in ("reward", "agent_id", "group_reward") + (("interrupted",) if kind == "terminal" else ()):
            assert_same_array(getattr(a, name), getattr(b, name), f"{w} {name}")
        assert type(a.group_id) is type(b.group_id) and list(a.group_id) == list(b.group_id), w
        if kind == "decision":
            if b.action_mask is None:
                assert a.action_mask is None, w
            else:
                assert a.action_mask is not None and len(a.action_mask) == len(b.action_mask), w
                for i, (x, y) in enumerate(zip(a.action_mask, b.action_mask)):
                    assert_same_array(x, y, f"{w} mask {i}")


# --- the wire format ---------------------------------------------------------------------------


def test_varints_and_fields() -> None:
    for value in (0, 1, 127, 128, 300, 2**31 - 1, 2**32, 2**63, 2**64 - 1):
        data = unity_wire.encode_varint(value)
        assert unity_wire.read_varint(data + b"\x05", 0) == (value, len(data))
    assert unity_wire.encode_varint(-1) == b"\xff" * 9 + b"\x01"
    assert unity_wire.int32(unity_wire.read_varint(unity_wire.encode_varint(-7), 0)[0]) == -7
    payload = (unity_wire.encode_key(3, 0) + unity_wire.encode_varint(300)
               + unity_wire.encode_length_delimited(4, b"abc")
               + unity_wire.encode_key(5, 5) + struct.pack("<f", 1.5)
               + unity_wire.encode_key(6, 1) + struct.pack("<d", 2.5))
    fields = [(f, w, v if w == 0 else bytes(v)) for f, w, v in unity_wire.iter_fields(memoryview(payload))]
    assert fields == [(3, 0, 300), (4, 2, b"abc"), (5, 5, struct.pack("<f", 1.5)), (6, 1, struct.pack("<d", 2.5))]
    for broken in (payload[:-1], unity_wire.encode_key(4, 2) + b"\x05ab", b"\x18", b"\x18\x80", b"\x1b"):
        with pytest.raises(unity_wire.WireError):
            list(unity_wire.iter_fields(broken))


def _stock_input(actions: dict[str, ActionTuple], agents: dict[str, int], side_channel: bytes,
                 reset: bool = False) -> bytes:
    """What mlagents-envs' UnityEnvironment + RpcCommunicator serialize for the same step."""
    fake = SimpleNamespace(
        _env_state={name: ([None] * n, None) for name, n in agents.items()},
        _side_channel_manager=SimpleNamespace(generate_side_channel_messages=lambda: bytearray(side_channel)),
        _wrap_unity_input=UnityEnvironment._wrap_unity_input,
    )
    if reset:
        inputs = UnityEnvironment._generate_reset_input(fake)  # type: ignore[arg-type]
    else:
        inputs = UnityEnvironment._generate_step_input(fake, actions)  # type: ignore[arg-type]
    message = UnityMessageProto()
    message.header.status = 200
    message.unity_input.CopyFrom(inputs)
    # map entries in key order: the order of a map's entries is the serializer's choice (protobuf 3.20
    # kept insertion order, 7.x's upb does not); deterministic=True sorts them, the same in both
    return bytes(message.SerializeToString(deterministic=True))


def test_input_encoding_matches_the_generated_classes() -> None:
    rng = np.random.default_rng(3)
    cont = rng.normal(0, 3, (4, 2)).astype(np.float32)
    cont[0, 0] = -0.0
    cont[1, 1] = 3.0e38
    disc = np.array([[0, 1], [5, 127], [128, 300], [-1, 2**31 - 1]], dtype=np.int32)
    actions = {
        "Hybrid?team=0": ActionTuple(continuous=cont, discrete=disc),
        "Empty?team=0": ActionTuple(continuous=np.zeros((0, 1), np.float32)),  # no agents: left out
        "Cont?team=1": ActionTuple(continuous=cont[:3, :1]),
        "Disc?team=0": ActionTuple(discrete=disc[:2, :1]),
        "Nothing?team=0": ActionTuple(continuous=np.zeros((2, 0), np.float32)),  # agents without actions
    }
    agents = {"Hybrid?team=0": 4, "Empty?team=0": 0, "Cont?team=1": 3, "Disc?team=0": 2, "Nothing?team=0": 2}
    side_channel = uuid.uuid4().bytes_le + struct.pack("<i", 3) + b"abc"
    for sc in (side_channel, b""):
        encoded = [(name, unity_wire.encode_agent_actions(a, agents[name])) for name, a in sorted(actions.items())
                   if agents[name]]
        mine = unity_wire.encode_input_message(unity_wire.COMMAND_STEP, encoded, sc)
        stock = _stock_input(actions, agents, sc)
        assert UnityMessageProto.FromString(mine) == UnityMessageProto.FromString(stock)
        assert mine == stock  # byte for byte
        parsed = UnityMessageProto.FromString(mine).unity_input.rl_input
        hybrid = parsed.agent_actions["Hybrid?team=0"].value
        assert list(hybrid[3].discrete_actions) == [-1, 2**31 - 1]
        assert list(hybrid[1].continuous_actions) == [float(x) for x in cont[1]]
        assert "Empty?team=0" not in parsed.agent_actions and parsed.side_channel == sc
        reset = unity_wire.encode_input_message(unity_wire.COMMAND_RESET, [], sc)
        assert reset == _stock_input({}, {}, sc, reset=True)
        # and the stand-in reads it as a C# player would
        incoming = wire.decode_message(mine)
        assert incoming.status == 200 and incoming.side_channel == sc
        assert wire.decode_action(incoming.actions["Disc?team=0"][1]) == ([], [5])
    close = UnityMessageProto()
    close.header.status = 400
    assert unity_wire.header_message(400) == close.SerializeToString()


# --- decoding outputs ----------------------------------------------------------------------------


def _png(array: np.ndarray) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG")
    return out.getvalue()


def _stats_record(key: str, value: float, aggregation: int) -> bytes:
    payload = struct.pack("<i", len(key)) + key.encode() + struct.pack("<f", value) + struct.pack("<i", aggregation)
    return wire.STATS_CHANNEL.bytes_le + struct.pack("<i", len(payload)) + payload


HYBRID = "Hybrid?team=0"


def _output(n: int = 6, nan_reward: bool = False, short_obs: bool = False, bad_png: bool = False,
            nan_image: bool = False) -> UnityOutputProto:
    """A UnityOutputProto built with the generated classes: vector, rank-2, PNG (plain, grey,
    channel-mapped, concatenated) and uncompressed visual observations, masks of every kind,
    terminal agents (interrupted or not), negative ids, groups, side-channel stats."""
    rng = np.random.default_rng(11)
    out = UnityOutputProto()
    brain = out.rl_initialization_output.brain_parameters.add()
    brain.brain_name = HYBRID
    brain.is_training = True
    brain.action_spec.num_continuous_actions = 2
    brain.action_spec.num_discrete_actions = 2
    brain.action_spec.discrete_branch_sizes.extend([3, 2])
    ghost = out.rl_initialization_output.brain_parameters.add()  # announced, but no agents yet
    ghost.brain_name = "Ghost?team=0"
    ghost.action_spec.num_continuous_actions = 1
    images = [rng.integers(0, 256, (4, 5, 3), dtype=np.uint8) for _ in range(3)]
    infos = out.rl_output.agentInfos[HYBRID].value
    for i in range(n):
        info = infos.add()
        info.reward = float(rng.normal()) if i != 2 else 0.0
        if nan_reward and i == 4:
            info.reward = float("nan")
        info.done = i in (1, 4)
        info.max_step_reached = i == 4
        info.id = i - 2  # negative ids are 10-byte varints
        info.group_id = i % 3
        info.group_reward = 0.5 * (i % 2)
        if i % 3 == 0:
            info.action_mask.extend([bool(b) for b in rng.integers(0, 2, 5)])
        elif i == 5:
            info.action_mask.extend([True])  # wrong length: all False, as mlagents-envs does
        vector = info.observations.add()
        vector.shape.extend([3])
        vector.float_data.data.extend(rng.normal(size=3 if not (short_obs and i == 3) else 2).tolist())
        vector.name = "VectorSensor"
        rank2 = info.observations.add()
        rank2.shape.extend([2, 2])
        rank2.float_data.data.extend(rng.normal(size=4).tolist())
        camera = info.observations.add()
        camera.shape.extend([4, 5, 3])
        camera.compression_type = 1
        camera.compressed_data = _png(images[i % 3]) if not (bad_png and i == 0) else b"not a png"
        grey = info.observations.add()
        grey.shape.extend([4, 5, 1])
        grey.compression_type = 1
        grey.compressed_data = _png(images[(i + 1) % 3])
        mapped = info.observations.add()
        mapped.shape.extend([4, 5, 4])
        mapped.compression_type = 1
        mapped.compressed_data = _png(images[0]) + _png(images[(i + 2) % 3])
        mapped.compressed_channel_mapping.extend([0, 1, 2, 3, 3, -1])
        raw = info.observations.add()
        raw.shape.extend([2, 2, 2])
        raw.float_data.data.extend(rng.normal(size=8).tolist())
        if nan_image and i == 2:
            raw.float_data.data[3] = -math.nan  # no error for images; protobuf reads it as +NaN
    out.rl_output.agentInfos["Other?team=0"].value.add().reward = 1.0  # no spec: ignored
    out.rl_output.side_channel = _stats_record("Env/A", 2.5, 0) + _stats_record("Env/B", -1.0, 2)
    return out


def _spec_of(out: UnityOutputProto) -> BehaviorSpec:
    return behavior_spec_from_proto(out.rl_initialization_output.brain_parameters[0],  # type: ignore[no-any-return]
                                    out.rl_output.agentInfos[HYBRID].value[0])


def _fast_steps(out: UnityOutputProto, name: str, spec: BehaviorSpec) -> tuple[DecisionSteps, TerminalSteps]:
    decoded = unity_decode.decode_output(out.SerializeToString())
    return unity_decode.steps_from_wire(decoded.agent_infos[name], spec)


def _stock_steps(out: UnityOutputProto, name: str, spec: BehaviorSpec) -> tuple[DecisionSteps, TerminalSteps]:
    """What mlagents-envs makes of the same bytes (parsed: protobuf reads every NaN as +NaN)."""
    parsed = UnityOutputProto.FromString(out.SerializeToString())
    return steps_from_proto(parsed.rl_output.agentInfos[name].value, spec)  # type: ignore[no-any-return]


def test_output_decoding_matches_steps_from_proto() -> None:
    out = _output()
    spec = _spec_of(out)
    before = unity_decode.fallbacks
    for n in (6, 1, 0):  # n=0: no decision agents, no mask
        msg = _output(n) if n != 6 else out
        if n == 0:
            del msg.rl_output.agentInfos[HYBRID].value[:]
        fast = _fast_steps(msg, HYBRID, spec)
        assert_same_steps(fast, _stock_steps(msg, HYBRID, spec), f"{n} agents")
    assert unity_decode.fallbacks == before  # all of it through the fast decoder
    nan_image = _output(nan_image=True)
    assert_same_steps(_fast_steps(nan_image, HYBRID, spec), _stock_steps(nan_image, HYBRID, spec), "NaN image")
    assert unity_decode.fallbacks == before + 1
    decisions, terminals = _fast_steps(out, HYBRID, spec)
    assert list(terminals.agent_id) == [-1, 2] and list(terminals.interrupted) == [False, True]
    assert [o.shape for o in decisions.obs] == [(4, 3), (4, 2, 2), (4, 4, 5, 3), (4, 4, 5, 1), (4, 4, 5, 4), (4, 2, 2, 2)]
    assert decisions.action_mask is not None and decisions.action_mask[0].shape == (4, 3)
    assert not decisions.action_mask[0][3].any()  # agent 5: a mask of the wrong length

    # deterministic: map entries in key order (upb's own order can differ between two copies of a message)
    payload = out.SerializeToString(deterministic=True)
    message = UnityMessageProto(unity_output=out)
    assert unity_decode.split_message(message.SerializeToString())[0] == 0  # no header: status 0
    message.header.status = 200
    status, unity_output = unity_decode.split_message(message.SerializeToString(deterministic=True))
    assert status == 200 and bytes(unity_output) == payload
    decoded = unity_decode.decode_output(payload)
    assert decoded.side_channel == out.rl_output.side_channel
    assert [bytes(b) for b in decoded.brain_parameters] == [
        b.SerializeToString() for b in out.rl_initialization_output.brain_parameters]

    # two messages back to back are one merged message to protobuf: a map key seen again replaces
    # its entry, the last side channel wins, brain parameters add up
    later = _output(3)
    later.rl_output.side_channel = b"later"
    merged = payload + later.SerializeToString()
    parsed = UnityOutputProto.FromString(merged)
    decoded = unity_decode.decode_output(merged)
    assert decoded.side_channel == b"later" and len(decoded.brain_parameters) == 4
    assert_same_steps(unity_decode.steps_from_wire(decoded.agent_infos[HYBRID], spec),
                      steps_from_proto(parsed.rl_output.agentInfos[HYBRID].value, spec), "merged")
    assert len(parsed.rl_output.agentInfos[HYBRID].value) == 3


@pytest.mark.parametrize("kind", ["nan_reward", "short_obs", "bad_png"])
def test_unusual_infos_get_mlagents_own_error(kind: str) -> None:
    spec = _spec_of(_output())
    out = _output(**{kind: True})
    before = unity_decode.fallbacks
    with pytest.raises(Exception) as stock_error:
        _stock_steps(out, HYBRID, spec)
    with pytest.raises(Exception) as fast_error:
        _fast_steps(out, HYBRID, spec)
    assert type(fast_error.value) is type(stock_error.value)
    address = re.compile(r" at 0x[0-9a-fA-F]+")  # PIL names the file object it could not read
    assert address.sub("", str(fast_error.value)) == address.sub("", str(stock_error.value))
    assert unity_decode.fallbacks == before + 1


def test_output_applied_like_update_behavior_specs_and_update_state() -> None:
    """Specs of new brains, empty steps for known behaviors without infos, side channel."""
    out = _output()
    known = BehaviorSpec(
        [ObservationSpec((2,), (DimensionProperty.UNSPECIFIED,), ObservationType.DEFAULT, "v")], ActionSpec(1, ())
    )

    def fake_env() -> Any:
        stats = StatsSideChannel()
        return SimpleNamespace(_env_specs={"Known?team=0": known, "Ghost?team=0": known}, _env_state={},
                               _side_channel_manager=SideChannelManager([stats]), stats=stats)

    fast, stock = fake_env(), fake_env()
    unity_fast.apply_output(fast, memoryview(out.SerializeToString()))
    parsed = UnityOutputProto.FromString(out.SerializeToString())
    UnityEnvironment._update_behavior_specs(stock, parsed)  # type: ignore[arg-type]
    UnityEnvironment._update_state(stock, parsed.rl_output)  # type: ignore[arg-type]
    assert fast._env_specs == stock._env_specs and list(fast._env_specs) == list(stock._env_specs)
    assert list(fast._env_state) == list(stock._env_state) == ["Known?team=0", "Ghost?team=0", HYBRID]
    for name in stock._env_state:
        assert_same_steps(fast._env_state[name], stock._env_state[name], name)
    assert fast.stats.get_and_reset_stats() == stock.stats.get_and_reset_stats()


# --- a stand-in build, fast and stock in lockstep ----------------------------------------------


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_build(tmp_path_factory.mktemp("build"))


def open_env(build: Path, log_folder: Path, fast: Optional[bool], *args: str, timeout_wait: int = 10,
             num_areas: int = 1, seed: int = 0) -> UnityBuildEnv:
    return UnityBuildEnv(
        str(build), base_port=free_base_port(), seed=seed, no_graphics=True, timeout_wait=timeout_wait,
        additional_args=list(args), log_folder=str(log_folder), num_areas=num_areas, fast_bridge=fast,
        engine={"time_scale": 20.0}, environment_parameters={"target_range": 0.6},
    )


def _actions(rng: np.random.Generator, spec: BehaviorSpec, n: int) -> ActionTuple:
    branches = spec.action_spec.discrete_branches
    return ActionTuple(
        continuous=rng.uniform(-1, 1, (n, spec.action_spec.continuous_size)).astype(np.float32),
        discrete=np.stack([rng.integers(0, b, n) for b in branches], axis=1) if branches else np.zeros((n, 0)),
    )


def test_lockstep_fast_and_stock(build: Path, tmp_path: Path) -> None:
    args = ("--agents", "3", "--behaviors", "Seeker,Picker", "--visual", "--episode-length", "6")
    assert unity_env.FAST_BRIDGE_DEFAULT is True
    before = unity_decode.fallbacks
    envs: list[UnityBuildEnv] = []
    try:
        for fast in (None, False):  # None: the default, the fast bridge
            envs.append(open_env(build, tmp_path / f"logs-{fast}", fast, *args, num_areas=2, seed=7))
        fast_env, stock_env = envs
        assert fast_env.fast_bridge and not stock_env.fast_bridge
        assert isinstance(fast_env._communicator, unity_fast.RawExchange)
        assert not isinstance(stock_env._communicator, unity_fast.RawExchange)
        for env in envs:
            env.reset()
        assert dict(fast_env.behavior_specs) == dict(stock_env.behavior_specs)
        assert list(fast_env.behavior_specs) == [SEEKER, PICKER]
        rng = np.random.default_rng(0)
        seen = {"terminal": 0, "interrupted": 0, "group_reward": 0, "stats": 0}
        for t in range(50):
            for name, spec in fast_env.behavior_specs.items():
                steps = fast_env.get_steps(name)
                assert_same_steps(steps, stock_env.get_steps(name), f"step {t} {name}")
                seen["terminal"] += len(steps[1])
                seen["interrupted"] += int(steps[1].interrupted.sum())
                seen["group_reward"] += int((steps[1].group_reward != 0).sum())
                if t % 7 == 3:
                    continue  # no actions set: zeros
                action = _actions(rng, spec, len(steps[0]))
                for env in envs:
                    if t % 7 == 5 and len(steps[0]):
                        agent = int(steps[0].agent_id[-1])
                        one = ActionTuple(continuous=action.continuous[-1:], discrete=action.discrete[-1:])
                        env.set_action_for_agent(name, agent, one)
                    else:
                        env.set_actions(name, action)
            for env in envs:
                if t == 25:
                    env.reset()
                else:
                    env.step()
            stats = fast_env.take_environment_stats()
            assert stats == stock_env.take_environment_stats(), f"step {t}"
            seen["stats"] += bool(stats)
        assert all(seen.values()), seen  # episode ends, cuts, group rewards and stats were compared
        assert unity_decode.fallbacks == before
        procs = [env._process for env in envs]
    finally:
        for env in envs:
            env.close()
    assert [p.returncode for p in procs if p is not None] == [0, 0]  # both builds got the close message


def test_lockstep_groups_memory_and_buffer_sensor(build: Path, tmp_path: Path) -> None:
    """The stand-in's Mates (groups, group rewards, agents leaving early), Recall and Crowd (a
    BufferSensor observation, VARIABLE_SIZE) decode the same through the fast bridge."""
    args = ("--agents", "4", "--behaviors", "Mates,Recall,Crowd", "--episode-length", "9")
    before = unity_decode.fallbacks
    envs: list[UnityBuildEnv] = []
    try:
        for fast in (True, False):
            envs.append(open_env(build, tmp_path / f"logs-{fast}", fast, *args, num_areas=2, seed=5))
        fast_env, stock_env = envs
        for env in envs:
            env.reset()
        assert dict(fast_env.behavior_specs) == dict(stock_env.behavior_specs)
        assert fast_env.behavior_specs["Crowd?team=0"].observation_specs[1].shape == (4, 3)
        rng = np.random.default_rng(1)
        seen = {"group_reward": 0, "left_early": 0, "interrupted": 0, "crowd_terminal": 0}
        for t in range(40):
            for name, spec in fast_env.behavior_specs.items():
                steps = fast_env.get_steps(name)
                assert_same_steps(steps, stock_env.get_steps(name), f"step {t} {name}")
                if name.startswith("Mates"):
                    seen["group_reward"] += int((steps[1].group_reward != 0).sum())
                    seen["left_early"] += int(((steps[1].group_reward == 0) & ~steps[1].interrupted).sum())
                seen["interrupted"] += int(steps[1].interrupted.sum())
                seen["crowd_terminal"] += len(steps[1]) if name.startswith("Crowd") else 0
                action = _actions(rng, spec, len(steps[0]))
                if name.startswith("Mates"):  # towards the goal, at different speeds: groups end together and apart
                    goal = steps[0].obs[0][:, :1]
                    action = ActionTuple(continuous=(goal * rng.uniform(0.1, 1.0, goal.shape)).astype(np.float32))
                for env in envs:
                    env.set_actions(name, action)
            for env in envs:
                env.step()
        assert all(seen.values()), seen
        assert unity_decode.fallbacks == before
    finally:
        for env in envs:
            env.close()


@pytest.mark.parametrize(
    ("trigger", "error", "timeout_wait"),
    [("--quit-at", UnityCommunicatorStoppedException, 10), ("--crash-at", UnityEnvironmentException, 10),
     ("--hang-at", UnityTimeOutException, 2)],
)
def test_failures_as_with_the_stock_bridge(build: Path, tmp_path: Path, trigger: str, error: type,
                                           timeout_wait: int) -> None:
    env = open_env(build, tmp_path, True, trigger, "3", timeout_wait=timeout_wait)
    try:
        env.reset()
        with pytest.raises(error) as raised:
            for _ in range(10):
                env.step()
        if trigger == "--crash-at":
            assert "return code -9" in str(raised.value)
        if trigger == "--hang-at":
            assert f"port {env._port}" in str(raised.value)
    finally:
        env.close()
    with pytest.raises(UnityEnvironmentException, match="No Unity environment is loaded"):
        env.step()


# --- speed: python -m tests.envs.test_unity_fast [--seconds S] [--repeats R] [--agents 1 16] -------------
