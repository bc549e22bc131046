"""The stand-in Unity player (tests/unity_standin) driven by plain mlagents_envs.UnityEnvironment:
behavior specs, stepping, side channels, visual observations, failure triggers, Editor mode, and
the hand-written wire codec checked against the generated protobuf classes."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mlagents_envs.base_env import ActionTuple
from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.exception import (
    UnityCommunicatorStoppedException,
    UnityEnvironmentException,
    UnityTimeOutException,
)
from mlagents_envs.side_channel.engine_configuration_channel import EngineConfigurationChannel
from mlagents_envs.side_channel.environment_parameters_channel import EnvironmentParametersChannel
from mlagents_envs.side_channel.stats_side_channel import StatsAggregationMethod, StatsSideChannel

from tests.unity_standin import free_base_port, make_build, start_editor
from tests.unity_standin import standin as S

SEEKER = "Seeker?team=0"
PICKER = "Picker?team=0"


class Channels:
    def __init__(self) -> None:
        self.engine = EngineConfigurationChannel()
        self.params = EnvironmentParametersChannel()
        self.stats = StatsSideChannel()

    def all(self) -> list[Any]:
        return [self.engine, self.params, self.stats]


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_build(tmp_path_factory.mktemp("build"))


def open_env(build: Path, log_folder: Path, *args: str, timeout_wait: int = 10, num_areas: int = 1,
             channels: Channels | None = None, seed: int = 0) -> UnityEnvironment:
    return UnityEnvironment(
        file_name=str(build), worker_id=0, base_port=free_base_port(), seed=seed, no_graphics=True,
        timeout_wait=timeout_wait, side_channels=(channels or Channels()).all(), log_folder=str(log_folder),
        additional_args=list(args), num_areas=num_areas,
    )


@contextmanager
def unity(build: Path, log_folder: Path, *args: str, **kwargs: Any) -> Iterator[UnityEnvironment]:
    env = open_env(build, log_folder, *args, **kwargs)
    try:
        yield env
    finally:
        env.close()


def seeker_policy(obs: np.ndarray) -> np.ndarray:
    return np.clip((obs[:, 1:2] - obs[:, 0:1]) / 0.25, -1, 1)


def test_specs_stepping_and_policies(build: Path, tmp_path: Path) -> None:
    channels = Channels()
    junk = ["--unknown-flag", "-force-vulkan", "--agents=3", "stray"]
    with unity(build, tmp_path, "--behaviors", "Seeker,Picker", *junk, num_areas=2, channels=channels) as env:
        env.reset()
        specs = env.behavior_specs
        assert sorted(specs) == [PICKER, SEEKER]
        seeker, picker = specs[SEEKER], specs[PICKER]
        assert [o.shape for o in seeker.observation_specs] == [(2,)]
        assert seeker.observation_specs[0].name == "VectorSensor"
        assert seeker.action_spec.continuous_size == 1 and seeker.action_spec.discrete_branches == ()
        assert [o.shape for o in picker.observation_specs] == [(4,)]
        assert picker.action_spec.continuous_size == 0 and picker.action_spec.discrete_branches == (3, 2)

        decisions, terminals = env.get_steps(SEEKER)
        assert list(decisions.agent_id) == list(range(6)) and len(terminals) == 0
        assert list(decisions.group_id) == [1, 1, 1, 2, 2, 2]

        seeker_returns: list[float] = []
        running = np.zeros(6)
        picker_rewards: list[float] = []
        picker_terminals = 0
        for _ in range(40):
            d, _ = env.get_steps(SEEKER)
            env.set_actions(SEEKER, ActionTuple(continuous=seeker_policy(d.obs[0])))
            p, _ = env.get_steps(PICKER)
            mask0, mask1 = p.action_mask
            assert mask0.shape == (6, 3) and mask1.shape == (6, 2)
            assert (mask0.sum(axis=1) == 1).all() and not mask1.any()
            cue = p.obs[0][:, :3].argmax(axis=1)
            assert not mask0[np.arange(6), cue].any()  # the right answer is never disabled
            flag = p.obs[0][:, 3].astype(int)
            env.set_actions(PICKER, ActionTuple(discrete=np.stack([cue, flag], axis=1)))
            env.step()

            d, t = env.get_steps(SEEKER)
            for agent, reward, interrupted, group_reward in zip(t.agent_id, t.reward, t.interrupted, t.group_reward):
                seeker_returns.append(running[agent] + reward)
                running[agent] = 0.0
                if not interrupted:
                    assert reward == pytest.approx(1.0) and group_reward == pytest.approx(0.5)
            running[d.agent_id] += d.reward
            p, pt = env.get_steps(PICKER)
            picker_terminals += len(pt)
            picker_rewards += list(pt.reward) + [r for a, r in zip(p.agent_id, p.reward) if a not in set(pt.agent_id)]
            assert list(d.agent_id) == list(range(6)) and list(p.agent_id) == list(range(6))
        assert len(seeker_returns) >= 12
        assert np.mean(seeker_returns) > 0.75  # the scripted policy is good
        assert picker_terminals == 6 * 8  # 5-decision episodes
        assert np.allclose(picker_rewards, 1.0)  # right answers, applied to the right agents

        stats = channels.stats.get_and_reset_stats()
        assert sum(v for v, _ in stats["Standin/Episodes"]) == len(seeker_returns) + picker_terminals
        assert sum(v for v, _ in stats["Standin/Masked Actions Taken"]) == 0
        assert len(stats["Standin/Goal Distance"]) == len(seeker_returns)
        assert stats["Standin/Goal Distance"][0][1] == StatsAggregationMethod.HISTOGRAM


def test_random_and_masked_actions(build: Path, tmp_path: Path) -> None:
    channels = Channels()
    with unity(build, tmp_path, "--behaviors", "picker,seeker", "--agents", "4", channels=channels) as env:
        env.reset()
        seeker_return = 0.0
        seeker_episodes = 0
        masked_taken = 0
        for _ in range(40):
            d, _ = env.get_steps(SEEKER)
            env.set_actions(SEEKER, env.behavior_specs[SEEKER].action_spec.random_action(len(d)))
            p, _ = env.get_steps(PICKER)
            disabled = p.action_mask[0].argmax(axis=1)
            env.set_actions(PICKER, ActionTuple(discrete=np.stack([disabled, np.zeros(4, int)], axis=1)))
            masked_taken += len(p)
            env.step()
            d, t = env.get_steps(SEEKER)
            seeker_return += float(d.reward.sum() + t.reward.sum())
            seeker_episodes += len(t)
            p, pt = env.get_steps(PICKER)
            assert np.allclose(pt.reward, -1.0)
            assert np.allclose(p.reward[~np.isin(p.agent_id, pt.agent_id)], -1.0)
        assert seeker_episodes > 0
        assert seeker_return / seeker_episodes < 0.5  # random is much worse than the scripted policy
        stats = channels.stats.get_and_reset_stats()
        assert sum(v for v, _ in stats["Standin/Masked Actions Taken"]) == masked_taken


def test_side_channels_and_log(build: Path, tmp_path: Path) -> None:
    channels = Channels()
    channels.engine.set_configuration_parameters(time_scale=7.5, width=84, height=84)
    channels.params.set_float_parameter("my_float", 2.5)
    channels.params.set_uniform_sampler_parameters("target_range", 0.3, 0.6, seed=3)
    with unity(build, tmp_path, "--agents", "8", channels=channels, seed=11) as env:
        env.reset()
        d, _ = env.get_steps(SEEKER)
        assert (np.abs(d.obs[0][:, 1]) <= 0.6 + 1e-6).all()
        for _ in range(3):
            env.step()
        stats = channels.stats.get_and_reset_stats()
        assert stats["Standin/Time Scale"][-1] == (7.5, StatsAggregationMethod.MOST_RECENT)
        assert stats["Standin/param/my_float"][-1] == (2.5, StatsAggregationMethod.MOST_RECENT)
        value, agg = stats["Standin/param/target_range"][-1]
        assert 0.3 <= value <= 0.6 and agg == StatsAggregationMethod.MOST_RECENT
        ranges = stats["Standin/target_range"]
        assert len(ranges) >= 8 and all(0.3 <= v <= 0.6 and a == StatsAggregationMethod.AVERAGE for v, a in ranges)

        # a float parameter sent with a later step applies to the episodes that start after it
        channels.params.set_float_parameter("target_range", 0.0)
        env.step()
        for _ in range(25):  # every episode ends within 20 steps
            env.step()
        d, _ = env.get_steps(SEEKER)
        assert np.allclose(d.obs[0][:, 1], 0.0)
    log = (tmp_path / "Player-0.log").read_text()
    for expected in ("argv:", "--mlagents-port", "handshake: seed 11, num_areas 1", "time_scale 7.5",
                     "screen resolution 84x84", "my_float = 2.5", "target_range = sampler uniform",
                     "RESET", "close: trainer sent status 400"):
        assert expected in log, expected


def test_episode_length_cut(build: Path, tmp_path: Path) -> None:
    channels = Channels()
    channels.params.set_float_parameter("target_range", 0.0)  # goal at 0, agents standing still
    with unity(build, tmp_path, "--episode-length", "3", "--agents", "8", channels=channels) as env:
        env.reset()
        x0 = env.get_steps(SEEKER)[0].obs[0][:, 0]
        ended: dict[int, tuple[int, bool, float]] = {}
        for step in range(1, 4):
            env.step()
            _, t = env.get_steps(SEEKER)
            for agent, interrupted, reward in zip(t.agent_id, t.interrupted, t.reward):
                ended.setdefault(int(agent), (step, bool(interrupted), float(reward)))
        assert sorted(ended) == list(range(8))
        for agent, (step, interrupted, reward) in ended.items():
            if abs(x0[agent]) < 0.15:
                assert (step, interrupted, reward) == (1, False, 1.0)
            else:
                assert step == 3 and interrupted and reward == pytest.approx(-0.1 * abs(x0[agent]), abs=1e-5)
        env.reset()  # a second RESET: fresh episodes, no terminal steps, specs unchanged
        d, t = env.get_steps(SEEKER)
        assert list(d.agent_id) == list(range(8)) and len(t) == 0 and np.allclose(d.reward, 0.0)


def test_visual_observation(build: Path, tmp_path: Path) -> None:
    with unity(build, tmp_path, "--visual", "--agents", "5") as env:
        env.reset()
        spec = env.behavior_specs[SEEKER]
        assert [o.shape for o in spec.observation_specs] == [(2,), (20, 20, 3)]
        assert spec.observation_specs[1].name == "CameraSensor"
        for _ in range(3):
            env.step()
            d, _ = env.get_steps(SEEKER)
            vector, image = d.obs
            assert image.shape == (5, 20, 20, 3) and image.dtype == np.float32
            assert image.min() >= 0.0 and image.max() <= 1.0
            cx = np.rint((vector[:, 0] + 1) * 9.5).astype(int)
            cg = np.rint((vector[:, 1] + 1) * 9.5).astype(int)
            for i in range(5):
                assert (image[i, :, cx[i], 0] == 1.0).all() and image[i, :, :, 0].sum() == 20
                assert (image[i, :, cg[i], 1] == 1.0).all() and image[i, :, :, 1].sum() == 20
                assert not image[i, :, :, 2].any()


def _step_until_failure(env: UnityEnvironment, steps: int = 10) -> None:
    env.reset()
    for _ in range(steps):
        env.step()


def test_crash_quit_hang(build: Path, tmp_path: Path) -> None:
    env = open_env(build, tmp_path, "--crash-at", "5")
    try:
        with pytest.raises(UnityEnvironmentException, match="return code -9"):
            _step_until_failure(env)
    finally:
        env.close()
    env = open_env(build, tmp_path, "--quit-at", "5")
    try:
        with pytest.raises(UnityCommunicatorStoppedException):
            _step_until_failure(env)
    finally:
        env.close()
    env = open_env(build, tmp_path, "--hang-at", "5", timeout_wait=2)
    try:
        with pytest.raises(UnityTimeOutException):
            _step_until_failure(env)
    finally:
        env.close()
    log = (tmp_path / "Player-0.log").read_text()
    assert "hang-at 5" in log


def test_once_file(build: Path, tmp_path: Path) -> None:
    once = tmp_path / "marker" / "crashed"
    env = open_env(build, tmp_path, "--crash-at", "2", "--once-file", str(once))
    try:
        with pytest.raises(UnityEnvironmentException):
            _step_until_failure(env)
    finally:
        env.close()
    assert once.exists()
    with unity(build, tmp_path, "--crash-at", "2", "--once-file", str(once)) as env:
        _step_until_failure(env, 5)  # the restarted build runs clean


def test_communication_version(build: Path, tmp_path: Path) -> None:
    with pytest.raises(UnityEnvironmentException, match="communication API version"):
        open_env(build, tmp_path, "--comm-version", "2.0.0")


def test_editor_mode(tmp_path: Path) -> None:
    port = free_base_port()
    proc = start_editor(port, "--agents", "2", log_file=tmp_path / "editor.log")
    try:
        env = UnityEnvironment(file_name=None, base_port=port, timeout_wait=10,
                               side_channels=[StatsSideChannel()])
        try:
            env.reset()
            env.step()
            assert list(env.get_steps(SEEKER)[0].agent_id) == [0, 1]
        finally:
            env.close()
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = (tmp_path / "editor.log").read_text()
    assert "editor mode" in log and f"localhost:{port}" in log


# --- wire codec against the generated classes -------------------------------------------------


def test_output_encoding_parses() -> None:
    from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto

    opts = S.parse_args(["--behaviors", "Seeker,Picker", "--agents", "2", "--visual", "-logfile", "x.log"])
    assert opts.log_file == "x.log" and opts.visual and opts.agents == 2
    world = S.World(opts, seed=-5, num_areas=2, log=lambda _: None)
    msg = UnityMessageProto.FromString(world.reset())
    assert msg.header.status == 200
    brains = {b.brain_name: b for b in msg.unity_output.rl_initialization_output.brain_parameters}
    assert brains[SEEKER].action_spec.num_continuous_actions == 1 and brains[SEEKER].is_training
    assert list(brains[PICKER].action_spec.discrete_branch_sizes) == [3, 2]
    infos = msg.unity_output.rl_output.agentInfos
    seeker = infos[SEEKER].value
    assert [i.id for i in seeker] == [0, 1, 2, 3] and [i.group_id for i in seeker] == [1, 1, 2, 2]
    assert list(seeker[0].observations[0].shape) == [2] and len(seeker[0].observations[0].float_data.data) == 2
    camera = seeker[0].observations[1]
    assert list(camera.shape) == [20, 20, 3] and camera.compression_type == 1
    assert camera.compressed_data.startswith(b"\x89PNG") and camera.name == "CameraSensor"
    picker = infos[PICKER].value
    assert len(picker[0].action_mask) == 5 and sum(picker[0].action_mask) == 1

    # the next output announces no brain again, and carries terminal infos before decisions
    for _ in range(5):
        out = UnityMessageProto.FromString(world.step({}))
        assert not out.unity_output.rl_initialization_output.brain_parameters
    picks = out.unity_output.rl_output.agentInfos[PICKER].value
    assert [(i.id, i.done) for i in picks] == [(k, True) for k in range(4)] + [(k, False) for k in range(4)]
    side = bytes(out.unity_output.rl_output.side_channel)
    keys = []
    for _channel, payload in S.split_side_channel(side):
        (n,) = struct.unpack_from("<i", payload, 0)
        keys.append(payload[4 : 4 + n].decode())
    assert "Standin/Episodes" in keys and "Standin/Masked Actions Taken" in keys


def test_input_decoding() -> None:
    from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto

    msg = UnityMessageProto()
    msg.header.status = 200
    init = msg.unity_input.rl_initialization_input
    init.seed = -42
    init.num_areas = 3
    init.communication_version = "1.5.0"
    decoded = S.decode_message(msg.SerializeToString())
    assert (decoded.status, decoded.seed, decoded.num_areas, decoded.communication_version) == (200, -42, 3, "1.5.0")

    msg = UnityMessageProto()
    msg.header.status = 200
    rl = msg.unity_input.rl_input
    rl.command = 0
    rl.side_channel = b"abc"
    for k in range(3):
        a = rl.agent_actions[SEEKER].value.add()
        a.continuous_actions.extend([0.5 * k])
        a = rl.agent_actions[PICKER].value.add()
        a.discrete_actions.extend([k, 300])
    rl.agent_actions["Old"].value.add().vector_actions_deprecated.extend([2.0, 1.0])
    decoded = S.decode_message(msg.SerializeToString())
    assert decoded.command == 0 and decoded.side_channel == b"abc" and decoded.seed is None
    assert [S.decode_action(a)[0] for a in decoded.actions[SEEKER]] == [[0.0], [0.5], [1.0]]
    assert [S.decode_action(a)[1] for a in decoded.actions[PICKER]] == [[0, 300], [1, 300], [2, 300]]
    assert S.decode_action(decoded.actions["Old"][0]) == ([2.0, 1.0], [2, 1])
    quit_msg = UnityMessageProto.FromString(S.MESSAGE_QUIT_400)
    assert quit_msg.header.status == 400
