"""The stand-in Unity player (tests/support/unity_standin) driven by plain mlagents_envs.UnityEnvironment:
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

from tests.support.unity_standin import free_base_port, make_build, options, start_editor, wire
from tests.support.unity_standin import standin as S

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


@pytest.mark.slow
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
    env = open_env(build, tmp_path, "--hang-at", "5")  # the default wait for the start (a busy machine)
    env._communicator.timeout_wait = 2  # then 2 s per step
    env._timeout_wait = 2  # and 2 s (not 10) for the hung build to exit before close() kills it
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
    from ml_arl.protocol.communicator_objects.unity_message_pb2 import UnityMessageProto

    opts = options.parse_args(["--behaviors", "Seeker,Picker", "--agents", "2", "--visual", "-logfile", "x.log"])
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
    for _channel, payload in wire.split_side_channel(side):
        (n,) = struct.unpack_from("<i", payload, 0)
        keys.append(payload[4 : 4 + n].decode())
    assert "Standin/Episodes" in keys and "Standin/Masked Actions Taken" in keys


def test_input_decoding() -> None:
    from ml_arl.protocol.communicator_objects.unity_message_pb2 import UnityMessageProto

    msg = UnityMessageProto()
    msg.header.status = 200
    init = msg.unity_input.rl_initialization_input
    init.seed = -42
    init.num_areas = 3
    init.communication_version = "1.5.0"
    decoded = wire.decode_message(msg.SerializeToString())
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
    decoded = wire.decode_message(msg.SerializeToString())
    assert decoded.command == 0 and decoded.side_channel == b"abc" and decoded.seed is None
    assert [wire.decode_action(a)[0] for a in decoded.actions[SEEKER]] == [[0.0], [0.5], [1.0]]
    assert [wire.decode_action(a)[1] for a in decoded.actions[PICKER]] == [[0, 300], [1, 300], [2, 300]]
    assert wire.decode_action(decoded.actions["Old"][0]) == ([2.0, 1.0], [2, 1])
    quit_msg = UnityMessageProto.FromString(wire.MESSAGE_QUIT_400)
    assert quit_msg.header.status == 400


# --- behaviors of issue 13: groups (Mates), memory (Recall), a buffer sensor (Crowd) -----------

MATES = "Mates?team=0"
RECALL = "Recall?team=0"
CROWD = "Crowd?team=0"


def test_mates_groups_group_rewards_and_agents_leaving_early(build: Path, tmp_path: Path) -> None:
    """As a SimpleMultiAgentGroup: group ids on every step; an agent that ends first leaves its group
    (a terminal step with its group id, then nothing); the last one's terminal step brings the
    group reward (the mean success); a cut group is interrupted; every episode new agent ids."""
    returns_file = tmp_path / "returns.txt"
    with unity(build, tmp_path, "--behaviors", "Mates", "--agents", "5", "--episode-length", "8",
               "--returns-file", str(returns_file), num_areas=2) as env:
        env.reset()
        spec = env.behavior_specs[MATES]
        assert [o.shape for o in spec.observation_specs] == [(2,)] and spec.action_spec.continuous_size == 1
        d, t = env.get_steps(MATES)
        assert len(t) == 0 and list(d.agent_id) == list(range(8))  # 5 // 2 = 2 groups of 2 per area, 2 areas
        assert list(d.group_id) == [1001, 1001, 1002, 1002, 1003, 1003, 1004, 1004]
        group_of = dict(zip(d.agent_id.tolist(), d.group_id))
        goal = dict(zip(d.agent_id.tolist(), d.obs[0][:, 0]))
        assert set(goal.values()) <= {-1.0, 1.0} and np.all(d.obs[0][:, 1] == 0)
        seen_ids: set[int] = set(group_of)
        left_early = group_ended = cut = 0
        gone: set[int] = set()
        for _ in range(30):
            d, _ = env.get_steps(MATES)
            for agent, g in zip(d.agent_id.tolist(), d.obs[0][:, 0]):
                group_of.setdefault(agent, 0)
                goal[agent] = float(g)
            # the first of each pair goes to its goal at full speed (0.2), the second at 0.15, and
            # in the second episode of each group the second stands still (its group is cut)
            first = np.array([a % 2 == 0 for a in d.agent_id])
            second_episode = d.agent_id >= 8
            speed = np.where(first, 1.0, np.where(second_episode, 0.0, 0.15))
            env.set_actions(MATES, ActionTuple(continuous=(speed * d.obs[0][:, 0])[:, None].astype(np.float32)))
            env.step()
            d, t = env.get_steps(MATES)
            assert not (set(d.agent_id.tolist()) & gone), "an agent that left still asks for decisions"
            assert not (set(t.agent_id.tolist()) & gone)
            new = set(d.agent_id.tolist()) - seen_ids
            assert all(a >= 8 for a in new)
            seen_ids |= new
            for agent, reward, group_reward, interrupted, group in zip(
                t.agent_id.tolist(), t.reward, t.group_reward, t.interrupted, t.group_id
            ):
                gone.add(agent)
                assert group in (1001, 1002, 1003, 1004)
                mate = agent + 1 if agent % 2 == 0 else agent - 1
                if interrupted:
                    cut += 1
                    assert reward == pytest.approx(-0.01) and group_reward == 0
                elif mate not in gone:  # leaves early
                    left_early += 1
                    assert reward == pytest.approx(-0.01) and group_reward == 0  # min(-0.01, success 1.06)
                else:  # ends the group: both reached their goals
                    group_ended += 1
                    assert reward == 0 and group_reward == pytest.approx(1.06)
            assert len(d.group_id) == len(d) and set(d.group_id) <= {1001, 1002, 1003, 1004}
        assert left_early >= 4 and group_ended >= 4 and cut >= 4, (left_early, group_ended, cut)
    lines = returns_file.read_text().split()
    successes = [float(v) for name, v in zip(lines[0::2], lines[1::2]) if name == "Mates"]
    assert successes.count(1.06) == left_early + group_ended and successes.count(0.0) == cut


def test_recall_shows_the_goal_only_at_an_episodes_start(build: Path, tmp_path: Path) -> None:
    returns_file = tmp_path / "returns.txt"
    with unity(build, tmp_path, "--behaviors", "Recall", "--agents", "6", "--returns-file", str(returns_file)) as env:
        env.reset()
        spec = env.behavior_specs[RECALL]
        assert [o.shape for o in spec.observation_specs] == [(1,)] and spec.action_spec.continuous_size == 1
        remembered: dict[int, float] = {}
        age: dict[int, int] = {}
        returns: list[float] = []
        running: dict[int, float] = {}
        for _ in range(40):
            d, _ = env.get_steps(RECALL)
            for agent, cue in zip(d.agent_id.tolist(), d.obs[0][:, 0]):
                age[agent] = age.get(agent, -1) + 1
                if age[agent] < 2:
                    assert cue in (-1.0, 1.0)
                    assert remembered.setdefault(agent, float(cue)) == cue  # the same goal both times
                else:
                    assert cue == 0.0  # hidden from the third decision on
            # a policy with a memory: the goal it saw
            env.set_actions(RECALL, ActionTuple(continuous=np.array([[remembered[a]] for a in d.agent_id], np.float32)))
            env.step()
            d, t = env.get_steps(RECALL)
            for agent, reward in zip(d.agent_id.tolist(), d.reward):
                running[agent] = running.get(agent, 0.0) + float(reward)
            for agent, reward, interrupted in zip(t.agent_id.tolist(), t.reward, t.interrupted):
                assert not interrupted and reward == pytest.approx(1.06)
                assert agent not in d.agent_id  # the next episode is a new agent
                returns.append(running.pop(agent, 0.0) + float(reward))
        assert len(returns) == 6 * 8 and np.allclose(returns, 1.06 - 4 * 0.01)  # 5 steps to the goal
    lines = returns_file.read_text().split()
    assert lines[0::2] == ["Recall"] * 48 and np.allclose([float(v) for v in lines[1::2]], returns, atol=1e-5)


def test_crowd_buffer_sensor_as_mlagents_envs_reports_it(build: Path, tmp_path: Path) -> None:
    """A BufferSensor observation: shape (max entities, entity size), dimension properties
    (VARIABLE_SIZE, NONE), float rows of the entities present, then zero rows."""
    from mlagents_envs.base_env import DimensionProperty, ObservationType

    with unity(build, tmp_path, "--behaviors", "Crowd,Seeker", "--agents", "8", num_areas=2) as env:
        env.reset()
        spec = env.behavior_specs[CROWD]
        vector_spec, buffer_spec = spec.observation_specs
        assert vector_spec.shape == (1,) and vector_spec.name == "VectorSensor"
        assert buffer_spec.shape == (4, 3) and buffer_spec.name == "BufferSensor"
        assert buffer_spec.dimension_property == (DimensionProperty.VARIABLE_SIZE, DimensionProperty.NONE)
        assert buffer_spec.observation_type == ObservationType.DEFAULT
        assert env.behavior_specs[SEEKER].observation_specs[0].shape == (2,)  # another behavior beside it
        counts: set[int] = set()
        returns = []
        for _ in range(30):
            d, _ = env.get_steps(CROWD)
            vector, entities = d.obs
            assert vector.shape == (16, 1) and entities.shape == (16, 4, 3) and entities.dtype == np.float32
            present = np.abs(entities).sum(axis=2) > 0
            for rows, mask in zip(entities, present):
                n = int(mask.sum())
                counts.add(n)
                assert 1 <= n <= 4 and mask[:n].all() and not rows[n:].any()  # padding: zero rows, last
                assert set(np.abs(rows[:n, 0]).tolist()) <= {0.5} and (rows[:n, 1] + rows[:n, 2] == 1).all()
                assert rows[:n, 1].sum() == 1  # exactly one goal
            goal_side = (entities[:, :, 0] * entities[:, :, 1]).sum(axis=1) * 2
            env.set_actions(CROWD, ActionTuple(continuous=goal_side[:, None].astype(np.float32)))
            env.step()
            returns += list(env.get_steps(CROWD)[1].reward)
        assert counts == {1, 2, 3, 4}
        assert len(returns) >= 16 * 5 and np.allclose(returns, 1.06)  # the scripted set policy always reaches the goal


def test_new_behaviors_encoding_parses() -> None:
    """The hand-written AgentInfos of Mates and Crowd against the generated classes."""
    from ml_arl.protocol.communicator_objects.unity_message_pb2 import UnityMessageProto

    world = S.World(options.parse_args(["--behaviors", "Mates,Crowd,Recall", "--agents", "2"]), seed=3, num_areas=1, log=lambda _: None)
    msg = UnityMessageProto.FromString(world.reset())
    infos = msg.unity_output.rl_output.agentInfos
    mates = infos[MATES].value
    assert [(i.id, i.group_id, i.done) for i in mates] == [(0, 1001, False), (1, 1001, False)]
    buffer = infos[CROWD].value[0].observations[1]
    assert list(buffer.shape) == [4, 3] and list(buffer.dimension_properties) == [4, 1] and buffer.compression_type == 0
    assert len(buffer.float_data.data) == 12 and buffer.name == "BufferSensor"
    assert len(infos[RECALL].value) == 2
    brains = {b.brain_name for b in msg.unity_output.rl_initialization_output.brain_parameters}
    assert brains == {MATES, CROWD, RECALL}
    # full speed to the goal: after 5 steps both mates end with the group reward
    for _ in range(5):
        actions = {MATES: [_continuous_action(g) for g in (i.observations[0].float_data.data[0] for i in mates)]}
        msg = UnityMessageProto.FromString(world.step(actions))
        mates = [i for i in msg.unity_output.rl_output.agentInfos[MATES].value if not i.done] or mates
    ended = [i for i in msg.unity_output.rl_output.agentInfos[MATES].value if i.done]
    assert [(i.id, i.group_id, round(i.group_reward, 4), i.max_step_reached) for i in ended] == [
        (0, 1001, 1.06, False), (1, 1001, 1.06, False)]
    assert [i.id for i in msg.unity_output.rl_output.agentInfos[MATES].value if not i.done] == [2, 3]


def _continuous_action(value: float) -> bytes:
    from ml_arl.protocol.communicator_objects.agent_action_pb2 import AgentActionProto

    return AgentActionProto(continuous_actions=[value]).SerializeToString()
