"""Images from Unity builds in both layouts: height x width x channels as com.unity.ml-agents 2.x
describes them, channels-first as 3.x does (ml_arl.protocol.image_layout). The decision rule, the
decoders against hand-made arrays, both bridges (mlagents-envs' path and the fast wire decoder)
turning the same channels-first image into the same (H, W, C) array, the stand-in build's
channels-first mode, and arl-learn training from pixels alone in either layout."""

from __future__ import annotations

import io
import math
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import numpy as np
import pytest
import yaml
from mlagents_envs.base_env import (
    ActionSpec,
    BehaviorSpec,
    DecisionSteps,
    DimensionProperty,
    ObservationSpec,
    ObservationType,
    TerminalSteps,
)
from mlagents_envs.exception import UnityObservationException
from mlagents_envs.rpc_utils import behavior_spec_from_proto, steps_from_proto
from mlagents_envs.side_channel.side_channel_manager import SideChannelManager
from PIL import Image

from ml_arl.envs.adapters import unity_decode, unity_fast
from ml_arl.envs.adapters.unity_env import UnityBuildEnv
from ml_arl.protocol import image_layout
from ml_arl.protocol.communicator_objects.observation_pb2 import ObservationProto
from ml_arl.protocol.communicator_objects.unity_message_pb2 import UnityMessageProto
from ml_arl.protocol.communicator_objects.unity_output_pb2 import UnityOutputProto
from ml_arl.protocol.image_layout import CHW, HWC
from ml_arl.protocol.image_layout import image_layout as layout_of
from tests.support.runs import arl_learn_here, arl_learn_watched
from tests.support.unity_standin import free_base_port, make_build, options
from tests.support.unity_standin import standin as S

UNSPEC, NONE, TE = DimensionProperty.UNSPECIFIED, DimensionProperty.NONE, DimensionProperty.TRANSLATIONAL_EQUIVARIANCE
PROPS = {HWC: (TE, TE, NONE), CHW: (NONE, TE, TE)}
CAM = "Cam?team=0"


# --- the decision rule ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "props", "expected"),
    [
        ((84, 84, 3), (TE, TE, NONE), HWC),  # ObservationSpec.Visual in com.unity.ml-agents 2.x
        ((3, 84, 84), (NONE, TE, TE), CHW),  # ... and in 3.x
        ((20, 24, 1), (TE, TE, NONE), HWC),
        ((1, 20, 24), (NONE, TE, TE), CHW),
        ((84, 84, 12), (TE, TE, NONE), HWC),  # 4 stacked RGB frames
        ((12, 84, 84), (NONE, TE, TE), CHW),
        ((5, 4, 3), (NONE, TE, TE), CHW),  # the properties name the channel axis, whatever the sizes
        ((5, 4, 3), (TE, TE, NONE), HWC),
        ((3, 20, 20), (2, 2, 1), HWC),  # plain ints as on the wire
        ((3, 20, 20), (1, 2, 2), CHW),
        # properties that do not single out the channel axis: the shape decides
        ((3, 84, 84), (), CHW),
        ((3, 84, 84), (UNSPEC, UNSPEC, UNSPEC), CHW),  # what mlagents-envs fills in when none were sent
        ((84, 84, 3), (UNSPEC, UNSPEC, UNSPEC), HWC),
        ((1, 20, 20), (TE, TE, TE), CHW),
        ((4, 30, 40), (NONE, NONE, NONE), CHW),
        ((20, 20, 3), (TE, TE, TE), HWC),
        ((5, 84, 84), (), HWC),  # more than 4 leading "channels": mlagents-envs 0.28's HWC
        ((3, 20, 4), (), HWC),  # the last dimension is as channel-like as the first
        ((4, 4, 4), (), HWC),
        ((2, 2, 2), (UNSPEC, UNSPEC, UNSPEC), HWC),
    ],
)
def test_layout_rule(shape: tuple[int, ...], props: tuple[Any, ...], expected: str) -> None:
    assert layout_of(shape, props) == expected


def test_layout_rule_needs_three_dimensions() -> None:
    for shape in ((8,), (4, 2), (1, 2, 3, 4)):
        with pytest.raises(ValueError, match="3 dimensions"):
            layout_of(shape, ())


def test_specs_describe_the_arrays_the_trainer_gets() -> None:
    vector = ObservationSpec((3,), (NONE,), ObservationType.DEFAULT, "v")
    chw = ObservationSpec((3, 6, 11), PROPS[CHW], ObservationType.GOAL_SIGNAL, "camera")
    hwc = ObservationSpec((6, 11, 1), PROPS[HWC], ObservationType.DEFAULT, "grey")
    guessed = ObservationSpec((1, 8, 9), (UNSPEC,) * 3, ObservationType.DEFAULT, "old")
    wire = BehaviorSpec([vector, chw, hwc, guessed], ActionSpec(1, (2,)))
    spec, indices = image_layout.hwc_behavior_spec(wire)
    assert indices == (1, 3) == image_layout.chw_observations(wire)
    assert spec.action_spec == wire.action_spec
    assert spec.observation_specs[0] is vector and spec.observation_specs[2] is hwc
    assert spec.observation_specs[1] == ObservationSpec((6, 11, 3), PROPS[HWC], ObservationType.GOAL_SIGNAL, "camera")
    assert spec.observation_specs[3] == ObservationSpec((8, 9, 1), (UNSPEC,) * 3, ObservationType.DEFAULT, "old")
    assert image_layout.chw_observations(spec) == ()  # a converted spec is all HWC
    plain = BehaviorSpec([vector, hwc], ActionSpec(1, ()))
    assert image_layout.hwc_behavior_spec(plain) == (plain, ()) and image_layout.hwc_behavior_spec(plain)[0] is plain


# --- decoders against hand-made arrays -----------------------------------------------------------


def png(image: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(image).save(out, format="PNG")
    return out.getvalue()


def test_decoders_against_hand_made_arrays() -> None:
    rng = np.random.default_rng(5)
    a, b = (rng.integers(0, 256, (4, 5, 3), dtype=np.uint8) for _ in range(2))
    fa, fb = a.astype(np.float32) / 255.0, b.astype(np.float32) / 255.0
    # PNG: the bytes do not depend on the declared layout; decode_png gives (H, W, C)
    np.testing.assert_array_equal(image_layout.decode_png(png(a), (4, 5, 3)), fa)
    np.testing.assert_array_equal(image_layout.decode_png(png(a), (4, 5, 1)), fa.mean(axis=2, keepdims=True))
    stacked = image_layout.decode_png(png(a) + png(b), (4, 5, 4), [0, 1, 2, 3, 3, -1])
    np.testing.assert_array_equal(stacked[..., :3], fa)
    np.testing.assert_allclose(stacked[..., 3], (fb[..., 0] + fb[..., 1]) / 2, rtol=0, atol=1e-7)
    # uncompressed floats come in the order of the declared shape
    floats = rng.normal(size=(4, 5, 2)).astype(np.float32)
    view = image_layout.chw_floats_to_hwc(floats.transpose(2, 0, 1).ravel(), (2, 4, 5))
    assert view.shape == (4, 5, 2)
    np.testing.assert_array_equal(view, floats)

    # generated-class messages rewritten for mlagents-envs' decoder
    raw = ObservationProto(shape=[2, 4, 5], dimension_properties=[1, 2, 2], name="raw")
    raw.float_data.data.extend(floats.transpose(2, 0, 1).ravel().tolist())
    image_layout.proto_to_hwc(raw)
    assert list(raw.shape) == [4, 5, 2] and list(raw.dimension_properties) == [1, 2, 2]
    np.testing.assert_array_equal(np.array(raw.float_data.data, dtype=np.float32), floats.ravel())
    compressed = ObservationProto(shape=[4, 4, 5], compression_type=1, compressed_data=png(a) + png(b),
                                  compressed_channel_mapping=[0, 1, 2, 3, 3, -1])
    image_layout.proto_to_hwc(compressed)
    assert list(compressed.shape) == [4, 5, 4] and compressed.compressed_data == png(a) + png(b)
    assert list(compressed.compressed_channel_mapping) == [0, 1, 2, 3, 3, -1]
    short = ObservationProto(shape=[2, 4, 5])
    short.float_data.data.extend([1.0, 2.0])  # not an image of that shape: only the shape moves
    image_layout.proto_to_hwc(short)
    assert list(short.shape) == [4, 5, 2] and list(short.float_data.data) == [1.0, 2.0]
    vector = ObservationProto(shape=[3])
    vector.float_data.data.extend([1.0, 2.0, 3.0])
    image_layout.proto_to_hwc(vector)
    assert list(vector.shape) == [3] and list(vector.float_data.data) == [1.0, 2.0, 3.0]


# --- both bridges, one channels-first message ----------------------------------------------------


def _observation(info: Any, hwc: tuple[int, int, int], layout: str, data: Any, mapping: tuple[int, ...] = ()) -> None:
    """An image observation described as a build of ``layout`` describes it: PNG bytes, or an
    (H, W, C) float array written in the declared order."""
    obs = info.observations.add()
    h, w, c = hwc
    obs.shape.extend([h, w, c] if layout == HWC else [c, h, w])
    obs.dimension_properties.extend(int(p) for p in PROPS[layout])
    if isinstance(data, bytes):
        obs.compression_type = 1
        obs.compressed_data = data
        obs.compressed_channel_mapping.extend(mapping)
    else:
        ordered = data if layout == HWC else data.transpose(2, 0, 1)
        obs.float_data.data.extend(ordered.ravel().tolist())


def camera_output(layout: str, n: int = 4, nan_at: Optional[int] = None, bad_shape_at: Optional[int] = None
                  ) -> tuple[UnityOutputProto, list[list[np.ndarray]]]:
    """A new behavior whose agents see a vector, an RGB camera (PNG), a grey camera (PNG), 4 stacked
    channels (two PNGs, channel mapping) and 2 uncompressed channels, every image 4x5; agent 1 is
    terminal. Returns the message and, per agent, the (H, W, C) arrays it must decode to."""
    rng = np.random.default_rng(17)
    out = UnityOutputProto()
    brain = out.rl_initialization_output.brain_parameters.add()
    brain.brain_name = CAM
    brain.is_training = True
    brain.action_spec.num_continuous_actions = 1
    expected = []
    for i in range(n):
        info = out.rl_output.agentInfos[CAM].value.add()
        info.id = i
        info.reward = 0.25 * i
        info.done = i == 1
        vector = info.observations.add()
        vector.shape.append(2)
        vector.dimension_properties.append(1)
        vector.float_data.data.extend([i, -i])
        rgb, other = (rng.integers(0, 256, (4, 5, 3), dtype=np.uint8) for _ in range(2))
        raw = rng.normal(size=(4, 5, 2)).astype(np.float32)
        if nan_at == i:
            raw[2, 3, 1] = math.nan
        f_rgb, f_other = rgb.astype(np.float32) / 255.0, other.astype(np.float32) / 255.0
        _observation(info, (4, 5, 3), layout, png(rgb))
        _observation(info, (4, 5, 1), layout, png(other))
        _observation(info, (4, 5, 4), layout, png(rgb) + png(other), (0, 1, 2, 3, 3, -1))
        _observation(info, (4, 5, 2) if bad_shape_at != i else (5, 4, 2), layout, raw)
        stacked = np.concatenate([f_rgb, ((f_other[..., 0] + f_other[..., 1]) / 2)[..., None]], axis=2)
        expected.append([np.array([i, -i], np.float32), f_rgb, f_other.mean(axis=2, keepdims=True), stacked, raw])
    return out, expected


def decode_fast(out: UnityOutputProto) -> Any:
    env = SimpleNamespace(_env_specs={}, _env_state={}, _side_channel_manager=SideChannelManager([]))
    unity_fast.apply_output(env, memoryview(out.SerializeToString()))
    return env


def decode_stock(out: UnityOutputProto) -> Any:
    """UnityBuildEnv's own _update_behavior_specs / _update_state (mlagents-envs' decoder), on an
    env that is not connected to anything."""
    env = object.__new__(UnityBuildEnv)
    env._env_specs, env._env_state, env._side_channel_manager = {}, {}, SideChannelManager([])
    env.chw_observations = {}
    parsed = UnityOutputProto.FromString(out.SerializeToString())
    env._update_behavior_specs(parsed)
    env._update_state(parsed.rl_output)
    return env


def assert_same_steps(a: tuple[DecisionSteps, TerminalSteps], b: tuple[DecisionSteps, TerminalSteps]) -> None:
    for x, y in zip(a, b):
        assert len(x.obs) == len(y.obs)
        for u, v in zip(x.obs, y.obs):
            assert u.dtype == v.dtype and u.shape == v.shape and u.strides == v.strides
            np.testing.assert_array_equal(u, v)
        np.testing.assert_array_equal(x.agent_id, y.agent_id)
        np.testing.assert_array_equal(x.reward, y.reward)


def test_both_bridges_decode_channels_first_to_the_same_arrays() -> None:
    chw_out, expected = camera_output(CHW)
    hwc_out, expected_hwc = camera_output(HWC)
    assert all(np.array_equal(u, v) for e, f in zip(expected, expected_hwc) for u, v in zip(e, f))
    # what mlagents-envs 0.28 alone makes of a 3.x build's camera: it takes shape[2] as the channels
    wire_spec = behavior_spec_from_proto(chw_out.rl_initialization_output.brain_parameters[0],
                                         chw_out.rl_output.agentInfos[CAM].value[0])
    with pytest.raises(UnityObservationException, match="Decompressed observation did not have the expected shape"):
        steps_from_proto(chw_out.rl_output.agentInfos[CAM].value, wire_spec)

    before = unity_decode.fallbacks
    decoded = {(layout, bridge): decode(out) for layout, out in ((CHW, chw_out), (HWC, hwc_out))
               for bridge, decode in (("fast", decode_fast), ("stock", decode_stock))}
    assert unity_decode.fallbacks == before  # the fast decoder handled all of it
    reference = decoded[(HWC, "stock")]  # a 2.x build through mlagents-envs: today's behaviour
    spec = reference._env_specs[CAM]
    assert [o.shape for o in spec.observation_specs] == [(2,), (4, 5, 3), (4, 5, 1), (4, 5, 4), (4, 5, 2)]
    assert all(o.dimension_property == PROPS[HWC] for o in spec.observation_specs[1:])
    for (layout, bridge), env in decoded.items():
        assert env._env_specs == {CAM: spec}, (layout, bridge)
        assert env.chw_observations == ({CAM: (1, 2, 3, 4)} if layout == CHW else {}), (layout, bridge)
        assert_same_steps(env._env_state[CAM], reference._env_state[CAM])
    decisions, terminals = reference._env_state[CAM]
    assert list(decisions.agent_id) == [0, 2, 3] and list(terminals.agent_id) == [1]
    for k in range(5):
        np.testing.assert_array_equal(decisions.obs[k], np.stack([expected[i][k] for i in (0, 2, 3)]))
        np.testing.assert_array_equal(terminals.obs[k], expected[1][k][None])

    # the next message of a known behavior (no brain parameters): the layouts are remembered
    later, _ = camera_output(CHW, n=2)
    del later.rl_initialization_output.brain_parameters[:]
    for env, apply in ((decoded[(CHW, "fast")], lambda e, o: unity_fast.apply_output(e, o.SerializeToString())),
                       (decoded[(CHW, "stock")], lambda e, o: (e._update_behavior_specs(o), e._update_state(o.rl_output)))):
        apply(env, later)
        assert env._env_specs == {CAM: spec} and env._env_state[CAM][0].obs[4].shape == (1, 4, 5, 2)


def test_unusual_channels_first_infos_fall_back_alike() -> None:
    """A NaN in an uncompressed image (the fast decoder leaves it to mlagents-envs) still decodes
    to the same (H, W, C) arrays; an image of another shape is the same error on both paths."""
    out, expected = camera_output(CHW, nan_at=2)
    before = unity_decode.fallbacks
    fast, stock = decode_fast(out), decode_stock(out)
    assert unity_decode.fallbacks == before + 1
    assert_same_steps(fast._env_state[CAM], stock._env_state[CAM])
    raw = fast._env_state[CAM][0].obs[4][1]  # agent 2 is the second decision agent
    assert math.isnan(raw[2, 3, 1]) and np.isnan(raw).sum() == 1
    np.testing.assert_array_equal(np.nan_to_num(raw, nan=7.0), np.nan_to_num(expected[2][4], nan=7.0))

    spec = decode_stock(camera_output(CHW)[0])._env_specs[CAM]
    bad, _ = camera_output(CHW, bad_shape_at=3)
    del bad.rl_initialization_output.brain_parameters[:]
    errors = []
    for decode in (decode_fast, decode_stock):
        env = decode(camera_output(CHW)[0])
        with pytest.raises(UnityObservationException) as raised:
            if decode is decode_fast:
                unity_fast.apply_output(env, bad.SerializeToString())
            else:
                parsed = UnityOutputProto.FromString(bad.SerializeToString())
                env._update_state(parsed.rl_output)
        assert env._env_specs[CAM] == spec
        errors.append(str(raised.value))
    assert errors[0] == errors[1] and "(4, 5, 2)" in errors[0], errors


# --- the stand-in build's channels-first mode -----------------------------------------------------


def test_standin_options_and_messages() -> None:
    opts = options.parse_args(["--visual-layout", "CHW", "--visual-compression", "none", "--image-size", "6x11"])
    assert (opts.visual_layout, opts.visual_compression, opts.image_height, opts.image_width) == ("chw", "none", 6, 11)
    assert not opts.visual and options.parse_args(["--visual-only"]).visual
    bad = options.parse_args(["--visual-layout", "nchw", "--visual-compression", "jpg", "--image-size", "0x3"])
    assert (bad.visual_layout, bad.visual_compression, bad.image_height) == ("hwc", "png", 20) and len(bad.warnings) == 3
    assert (options.parse_args(["--image-size", "7"]).image_height, options.parse_args(["--image-size", "7"]).image_width) == (7, 7)
    for layout in ("hwc", "chw"):
        for compression in ("png", "none"):
            args = ["--visual", "--visual-layout", layout, "--visual-compression", compression, "--image-size", "6x11"]
            world = S.World(options.parse_args(args + ["--agents", "2"]), seed=1, num_areas=1, log=lambda _: None)
            info = UnityMessageProto.FromString(world.reset()).unity_output.rl_output.agentInfos[options.SEEKER].value[0]
            camera = info.observations[1]
            assert list(camera.shape) == ([6, 11, 3] if layout == "hwc" else [3, 6, 11])
            assert list(camera.dimension_properties) == [int(p) for p in PROPS[layout]]
            assert camera.compression_type == (1 if compression == "png" else 0) and camera.name == "CameraSensor"
            x, g = info.observations[0].float_data.data
            image = np.zeros((6, 11, 3), np.float32)
            image[:, round((x + 1) * 5), 0] = 1.0
            image[:, round((g + 1) * 5), 1] = 1.0
            if compression == "png":
                decoded = image_layout.decode_png(camera.compressed_data, (6, 11, 3))
            else:
                floats = np.array(camera.float_data.data, np.float32)
                decoded = image_layout.chw_floats_to_hwc(floats, (3, 6, 11)) if layout == "chw" else floats.reshape(6, 11, 3)
            np.testing.assert_array_equal(decoded, image)
    only = S.World(options.parse_args(["--visual-only"]), seed=1, num_areas=1, log=lambda _: None)
    info = UnityMessageProto.FromString(only.reset()).unity_output.rl_output.agentInfos[options.SEEKER].value[0]
    assert [list(o.shape) for o in info.observations] == [[20, 20, 3]]


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_build(tmp_path_factory.mktemp("build"))


@pytest.mark.slow
def test_standin_in_either_layout_through_both_bridges(build: Path, tmp_path: Path) -> None:
    """The stand-in sending its camera HWC or CHW, PNG or floats: every bridge hands on the same
    (H, W, C) arrays, step by step, and they show the agent and goal columns."""
    before = unity_decode.fallbacks
    runs: dict[tuple[str, str, bool], list[np.ndarray]] = {}
    specs: list[BehaviorSpec] = []
    for layout in ("hwc", "chw"):
        for compression in ("png", "none"):
            args = ["--visual", "--visual-layout", layout, "--visual-compression", compression,
                    "--image-size", "6x11", "--agents", "3", "--episode-length", "3"]
            for fast in (True, False):
                env = UnityBuildEnv(str(build), base_port=free_base_port(), seed=4, no_graphics=True, timeout_wait=10,
                                    additional_args=args, log_folder=str(tmp_path), fast_bridge=fast)
                try:
                    env.reset()
                    specs.append(env.behavior_specs[options.SEEKER])
                    assert env.chw_observations == ({options.SEEKER: (1,)} if layout == "chw" else {})
                    seen = runs.setdefault((layout, compression, fast), [])
                    for _ in range(4):
                        d, t = env.get_steps(options.SEEKER)
                        seen += [d.obs[0], d.obs[1], t.obs[1]]
                        env.step()
                finally:
                    env.close()
    assert unity_decode.fallbacks == before
    spec = specs[0]
    assert all(s == spec for s in specs)
    assert [(o.shape, o.dimension_property) for o in spec.observation_specs] == [((2,), (UNSPEC,)), ((6, 11, 3), PROPS[HWC])]
    reference = runs[("hwc", "png", False)]
    assert sum(len(a) for a in reference[2::3]) > 0  # terminal steps were compared too
    for key, seen in runs.items():
        assert len(seen) == len(reference), key
        for a, b in zip(seen, reference):
            assert a.shape == b.shape and a.dtype == b.dtype, key
            np.testing.assert_array_equal(a, b, err_msg=str(key))
    vectors, images = reference[0::3], reference[1::3]
    for vector, image in zip(vectors, images):
        for (x, g), pixels in zip(vector, image):
            assert (pixels[:, round((x + 1) * 5), 0] == 1).all() and pixels[..., 0].sum() == 6
            assert (pixels[:, round((g + 1) * 5), 1] == 1).all() and pixels[..., 1].sum() == 6
            assert not pixels[..., 2].any()


# --- arl-learn from pixels, either layout --------------------------------------------------------


def mean_rewards(stdout: str, behavior: str = "Seeker") -> list[float]:
    return [float(m) for m in re.findall(rf"{behavior}\. Step: \d+\. .*?Mean Reward: (-?\d+\.\d+)", stdout)]


def learned(rewards: list[float]) -> bool:
    """What the pixel runs must show: at least 10 summaries, the best of the last 3 at 0.2 or more
    and 0.6 or more above the first (random play scores about -0.7); and, as a summary covers only
    500 steps, the last 2 both at 0.2 or more (not one lucky summary)."""
    return (len(rewards) >= 10 and max(rewards[-3:]) >= 0.2 and max(rewards[-3:]) - rewards[0] >= 0.6
            and min(rewards[-2:]) >= 0.2)


def last_step(stdout: str, behavior: str = "Seeker") -> int:
    steps = re.findall(rf"{behavior}\. Step: (\d+)\.", stdout)
    return int(steps[-1]) if steps else 0


def learn_until(args: list[str], cwd: Path, max_steps: int, here: bool) -> subprocess.CompletedProcess[str]:
    """arl-learn (the command, or its main() in this process when ``here``) stopped as Ctrl-C
    stops it (save, export, exit 0) as soon as its summaries show ``learned``, else at max_steps."""
    if not here:
        return arl_learn_watched(  # SIGTERM once learned: what Ctrl-C does, save and exit 0
            args, cwd, stop=lambda lines: bool(mean_rewards(lines[-1])) and learned(mean_rewards("".join(lines))),
        )
    # main() here: its stdout is sys.stdout (a StringIO) while it runs, and its SIGTERM handler (save
    # and exit 0) is installed: SIGTERM goes to this (the main) thread, never on the last summary
    # (max_steps: main() is still running) nor once main() has returned.
    from ml_arl.cli import learn as cli

    lock, finished = threading.Lock(), threading.Event()

    def watch() -> None:
        while not finished.wait(0.1):
            text = getattr(sys.stdout, "getvalue", lambda: "")()
            with lock:
                if (not finished.is_set() and learned(mean_rewards(text)) and last_step(text) < max_steps
                        and signal.getsignal(signal.SIGTERM) is cli._sigterm):
                    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)
                    return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        proc = arl_learn_here(args, cwd=cwd)
    finally:
        with lock:
            finished.set()
        watcher.join()
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["hwc", "chw"])
def test_arl_learn_trains_from_pixels_in_either_layout(tmp_path: Path, build: Path, layout: str) -> None:
    """The Seeker sees nothing but a 6x11 camera (its column red, the goal's green), PNG, described
    as 2.x (HWC) or 3.x (CHW) builds do. Random play scores about -0.7; both layouts learn alike and
    export the same NCHW model input. A run stops (as Ctrl-C does) once it shows what is asserted."""
    settings = {
        "trainer_type": "ppo",
        "hyperparameters": {"batch_size": 128, "buffer_size": 512, "learning_rate": 3.0e-3, "beta": 1.0e-3, "num_epoch": 8},
        "network_settings": {"hidden_units": 64, "num_layers": 2, "vis_encode_type": "fully_connected"},
        "reward_signals": {"extrinsic": {"gamma": 0.95}},
        "max_steps": 12000,
        "time_horizon": 32,
        "summary_freq": 500,
        "checkpoint_interval": 20000,
        "threaded": True,
    }
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"behaviors": {"Seeker": settings}}))
    args = [str(cfg), "--env", str(build), "--base-port", str(free_base_port(1)), "--run-id", layout, "--seed", "3",
            "--env-args", "--visual-only", "--visual-layout", layout, "--image-size", "6x11", "--agents", "16"]
    # HWC through the command itself, CHW through its main() in this process (the build in its worker either way)
    proc = learn_until(args, tmp_path, settings["max_steps"], here=layout == "chw")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    run = tmp_path / "results" / layout
    assert f"'--visual-layout', '{layout}'" in (run / "run_logs" / "Player-0.log").read_text()
    rewards = mean_rewards(proc.stdout)
    print(f"{layout}: stopped at step {last_step(proc.stdout)}: {rewards}")
    assert learned(rewards), out
    import onnx

    model = onnx.load(str(run / "Seeker.onnx"))
    assert [i.name for i in model.graph.input] == ["obs_0"]
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim][1:] == [3, 6, 11]  # NCHW
