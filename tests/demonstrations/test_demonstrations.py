"""Unity ML-Agents .demo files: write -> read round trips, the byte layout ML-Agents' loader
expects, one-line errors for every bad path or file, and arl-learn --record-demo end to end."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest
from google.protobuf.internal.decoder import _DecodeVarint32
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType

from ml_arl.core.exceptions import ConfigError
from ml_arl.core.experience import Trajectory
from ml_arl.demonstrations import DemoWriter, check_demonstrations, load_demonstrations
from ml_arl.demonstrations.format import META_BYTES, brain_parameters, delimited, meta_header
from ml_arl.protocol.communicator_objects.agent_action_pb2 import AgentActionProto
from ml_arl.protocol.communicator_objects.agent_info_action_pair_pb2 import AgentInfoActionPairProto
from ml_arl.protocol.communicator_objects.agent_info_pb2 import AgentInfoProto
from ml_arl.protocol.communicator_objects.brain_parameters_pb2 import BrainParametersProto
from ml_arl.protocol.communicator_objects.demonstration_meta_pb2 import DemonstrationMetaProto
from ml_arl.protocol.communicator_objects.observation_pb2 import NONE, PNG, ObservationProto
from ml_arl.results.run_folder import record_demo_problem
from ml_arl.results.sqlite_store import read_results
from ml_arl.training.demo_recording import demo_file_stem, free_demo_path, sent_continuous
from tests.support.runs import arl_learn, arl_learn_here, tiny_config, write_config
from tests.support.simple_envs import GoalReach

NONE_PROP, TE = DimensionProperty.NONE, DimensionProperty.TRANSLATIONAL_EQUIVARIANCE


def vector(size: int) -> ObservationSpec:
    return ObservationSpec((size,), (NONE_PROP,), ObservationType.DEFAULT, f"vector{size}")


def image(h: int, w: int, c: int) -> ObservationSpec:
    return ObservationSpec((h, w, c), (TE, TE, NONE_PROP), ObservationType.DEFAULT, "camera")


SPECS = {
    "vector-continuous": BehaviorSpec([vector(3)], ActionSpec(2, ())),
    "png-images": BehaviorSpec([image(6, 5, 3), image(4, 4, 1), vector(2)], ActionSpec(1, ())),
    "float-images": BehaviorSpec([image(4, 6, 4)], ActionSpec(1, ())),
    "discrete-branches": BehaviorSpec([vector(2)], ActionSpec(0, (3, 2, 4))),
    "hybrid": BehaviorSpec([vector(4), image(5, 5, 5)], ActionSpec(2, (3,))),
}


def random_obs(rng: np.random.Generator, spec: ObservationSpec, n: int, quantized: bool) -> np.ndarray:
    if quantized:  # as images decoded from a build's PNGs: 8-bit values / 255
        return (rng.integers(0, 256, (n, *spec.shape)).astype(np.float32) / 255.0).astype(np.float32)
    return rng.normal(size=(n, *spec.shape)).astype(np.float32)


class Episode:
    """One agent's episode, acted: what a demo of it must hold."""

    def __init__(self, rng: np.random.Generator, spec: BehaviorSpec, agent: str, length: int, interrupted: bool,
                 quantized: bool):
        self.agent, self.length, self.interrupted = agent, length, interrupted
        every = [random_obs(rng, o, length + 1, quantized and len(o.shape) == 3) for o in spec.observation_specs]
        self.obs = [o[:-1] for o in every]
        self.next_obs = [o[1:] for o in every]
        self.continuous = rng.normal(size=(length, spec.action_spec.continuous_size)).astype(np.float32)
        branches = spec.action_spec.discrete_branches
        self.discrete = np.stack([rng.integers(0, b, length) for b in branches], axis=1).astype(np.int32) if branches \
            else np.zeros((length, 0), np.int32)
        self.allowed = np.ones((length, sum(branches)), bool) if branches else None
        self.rewards = rng.normal(size=length).astype(np.float32)

    def trajectories(self, behavior: str, horizon: int) -> list[Trajectory]:
        """Cut at ``horizon`` as AgentProcessor does: each piece's next_obs is the next piece's first obs."""
        pieces = []
        for start in range(0, self.length, horizon):
            end = min(start + horizon, self.length)
            last = end == self.length
            pieces.append(Trajectory(
                behavior=behavior, agent_id=self.agent,
                obs=[o[start:end] for o in self.obs], next_obs=[o[end - 1] for o in self.next_obs],
                continuous=self.continuous[start:end], discrete=self.discrete[start:end],
                allowed=None if self.allowed is None else self.allowed[start:end],
                log_prob=np.zeros(end - start, np.float32), rewards=self.rewards[start:end],
                group_rewards=np.zeros(end - start, np.float32), group_id=0, done=last,
                interrupted=last and self.interrupted, policy_version=0,
            ))
        return pieces


def interleaved(episodes: list[Episode], behavior: str, horizon: int) -> list[Trajectory]:
    """The agents' pieces round-robin: agents interleave, each agent's pieces stay in order."""
    queues = [ep.trajectories(behavior, horizon) for ep in episodes]
    out: list[Trajectory] = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def acted(rng: np.random.Generator, spec: BehaviorSpec, quantized: bool) -> tuple[list[Episode], list[Episode]]:
    """Three agents; agent a plays two episodes (the second interrupted), b one, c one interrupted."""
    return [
        Episode(rng, spec, "0-0", 7, False, quantized), Episode(rng, spec, "0-1", 3, False, quantized),
        Episode(rng, spec, "1-0", 5, True, quantized),
    ], [Episode(rng, spec, "0-0", 4, True, quantized)]


def write_demo(path: Path, spec: BehaviorSpec, trajectories: list[Trajectory], behavior: str = "Reach") -> DemoWriter:
    writer = DemoWriter(str(path), behavior, spec)
    for traj in trajectories:
        writer.add(traj)
    assert writer.close()
    return writer


def in_write_order(trajectories: list[Trajectory], episodes: list[Episode]) -> list[Episode]:
    """Episodes in the order they ended (the order the writer writes them)."""
    remaining, ended = list(episodes), []
    for traj in trajectories:
        if traj.done:
            ended.append(next(e for e in remaining if e.agent == traj.agent_id))
            remaining.remove(ended[-1])
    assert not remaining
    return ended


@pytest.mark.parametrize("name", list(SPECS))
def test_round_trip(tmp_path: Path, name: str) -> None:
    spec = SPECS[name]
    rng = np.random.default_rng(1)
    first, second = acted(rng, spec, quantized=name != "float-images")
    trajectories = interleaved(first, "Reach", horizon=3) + interleaved(second, "Reach", horizon=3)
    write_demo(tmp_path / "Reach.demo", spec, trajectories)
    expected = in_write_order(trajectories, first + second)

    demo = load_demonstrations(str(tmp_path / "Reach.demo"))
    assert [tuple(o.shape) for o in demo.spec.observation_specs] == [tuple(o.shape) for o in spec.observation_specs]
    assert demo.spec.action_spec == spec.action_spec
    n = sum(ep.length for ep in expected)
    assert demo.steps == n and demo.episodes == 4 and demo.files == (str(tmp_path / "Reach.demo"),)
    for k in range(len(spec.observation_specs)):
        assert demo.obs[k].dtype == np.float32 and demo.obs[k].shape == (n, *spec.observation_specs[k].shape)
        np.testing.assert_array_equal(demo.obs[k], np.concatenate([ep.obs[k] for ep in expected]))
        np.testing.assert_array_equal(demo.next_obs[k], np.concatenate([ep.next_obs[k] for ep in expected]))
    np.testing.assert_array_equal(demo.continuous, np.concatenate([ep.continuous for ep in expected]))
    np.testing.assert_array_equal(demo.discrete, np.concatenate([ep.discrete for ep in expected]))
    np.testing.assert_array_equal(demo.rewards, np.concatenate([ep.rewards for ep in expected]))
    ends = np.cumsum([ep.length for ep in expected]) - 1
    assert np.flatnonzero(demo.dones).tolist() == ends.tolist()
    assert np.flatnonzero(demo.interrupted).tolist() == [e for e, ep in zip(ends, expected) if ep.interrupted]
    returns = [float(np.sum(ep.rewards, dtype=np.float64)) for ep in expected]
    assert demo.mean_reward == pytest.approx(np.mean(returns), rel=1e-5)


def records_of(path: Path) -> list[AgentInfoActionPairProto]:
    data = path.read_bytes()
    size, pos = _DecodeVarint32(data, META_BYTES)
    pos += size
    records = []
    while pos < len(data):
        size, pos = _DecodeVarint32(data, pos)
        records.append(AgentInfoActionPairProto.FromString(data[pos : pos + size]))
        pos += size
    return records


def test_images_are_png_when_png_keeps_them_exactly(tmp_path: Path) -> None:
    spec = BehaviorSpec([image(6, 5, 3), image(4, 4, 1), image(3, 3, 2), vector(2)], ActionSpec(1, ()))
    rng = np.random.default_rng(2)
    ep = Episode(rng, spec, "0-0", 3, False, quantized=True)
    ep.obs[2] = ep.obs[2] + 0.001  # not 8-bit values: float data
    write_demo(tmp_path / "a.demo", spec, ep.trajectories("Reach", 10))
    kinds = [[o.compression_type for o in r.agent_info.observations] for r in records_of(tmp_path / "a.demo")]
    assert kinds[:3] == [[PNG, PNG, NONE, NONE]] * 3
    np.testing.assert_array_equal(load_demonstrations(str(tmp_path / "a.demo")).obs[2], ep.obs[2])


def test_bytes_are_what_ml_agents_loader_reads(tmp_path: Path) -> None:
    """The reading steps of ML-Agents' demo_loader, done by hand: delimited metadata at 0, delimited
    brain parameters at 33, then number_steps delimited records; a step pairs record i's
    observation and action with record i + 1's reward and done."""
    spec = BehaviorSpec([vector(3)], ActionSpec(2, ()))
    rng = np.random.default_rng(3)
    episodes = [Episode(rng, spec, "0-0", 4, False, False), Episode(rng, spec, "0-1", 2, True, False)]
    trajectories = interleaved(episodes, "Reach?team=0", horizon=3)
    sent = [np.clip(t.continuous, -3, 3) / 3 for t in trajectories]
    writer = DemoWriter(str(tmp_path / "Reach.demo"), "Reach?team=0", spec)
    for traj, cont in zip(trajectories, sent):
        writer.add(traj, cont)
    assert writer.close()
    data = (tmp_path / "Reach.demo").read_bytes()

    size, pos = _DecodeVarint32(data, 0)
    assert pos + size <= META_BYTES
    meta = DemonstrationMetaProto.FromString(data[pos : pos + size])
    assert meta.api_version == 1 and meta.demonstration_name == "Reach"
    assert meta.number_episodes == 2 and meta.number_steps == 6 + 2  # every record, the terminal ones too
    assert meta.mean_reward == pytest.approx(np.mean([ep.rewards.sum() for ep in episodes]), rel=1e-5)
    size, pos = _DecodeVarint32(data, META_BYTES)
    brain = BrainParametersProto.FromString(data[pos : pos + size])
    assert brain.brain_name == "Reach" and brain.action_spec.num_continuous_actions == 2
    assert brain.vector_action_space_type_deprecated == 1 and list(brain.vector_action_size_deprecated) == [2]
    discrete = brain_parameters("D", ActionSpec(0, (3, 2)))  # older loaders read the deprecated fields
    assert discrete.vector_action_space_type_deprecated == 0 and list(discrete.vector_action_size_deprecated) == [3, 2]
    hybrid = brain_parameters("H", ActionSpec(2, (3,)))  # which have no hybrid form
    header = meta_header("Ä" * 40, 2**31 - 1, 10**6, 1.5)  # a long name is shortened to fit 33 bytes
    long_size, long_pos = _DecodeVarint32(header, 0)
    long = DemonstrationMetaProto.FromString(header[long_pos : long_pos + long_size])
    assert len(header) == META_BYTES and long.number_steps == 2**31 - 1 and set(long.demonstration_name) == {"Ä"}
    assert list(hybrid.action_spec.discrete_branch_sizes) == [3] and not hybrid.vector_action_size_deprecated
    pos += size
    records = []
    while len(records) < meta.number_steps:
        size, pos = _DecodeVarint32(data, pos)
        records.append(AgentInfoActionPairProto.FromString(data[pos : pos + size]))
        pos += size
    assert pos == len(data)

    first, second = (episodes[1], episodes[0])  # agent 0-1's 2 steps end first
    assert [r.agent_info.done for r in records] == [False, False, True, False, False, False, False, True]
    assert [r.agent_info.max_step_reached for r in records if r.agent_info.done] == [True, False]
    for offset, ep in ((0, first), (3, second)):
        chunk = records[offset : offset + ep.length + 1]  # the episode is contiguous
        assert chunk[0].agent_info.reward == 0.0
        np.testing.assert_allclose([r.agent_info.reward for r in chunk[1:]], ep.rewards)  # record i + 1: step i's reward
        np.testing.assert_allclose([list(r.agent_info.observations[0].float_data.data) for r in chunk],
                                   np.concatenate([ep.obs[0], ep.next_obs[0][-1:]]))
        np.testing.assert_allclose([list(r.action_info.continuous_actions) for r in chunk[:-1]],
                                   np.clip(ep.continuous, -3, 3) / 3, rtol=1e-6)
        assert list(chunk[-1].action_info.continuous_actions) == [0.0, 0.0]
        assert len({r.agent_info.id for r in chunk}) == 1
    assert records[0].agent_info.id != records[3].agent_info.id


def test_a_demo_written_by_mlagents_1x_reads_as_its_own_loader_reads_it() -> None:
    """tests/data/mlagents_1x.demo: written by ML-Agents 1.1.0's own write_demo (protobuf 3.20), three
    episodes of a hybrid behavior, the last cut by max steps; mlagents_1x.npz: what its demo_to_buffer
    read (tests/data/record_mlagents_demo.py). ML-Agents also pairs each episode's terminal record
    with the next episode's first, a row whose action no decision made; ml_arl leaves those out."""
    data = Path(__file__).resolve().parents[1] / "data"
    demo = load_demonstrations(str(data / "mlagents_1x.demo"))
    theirs = np.load(data / "mlagents_1x.npz")
    keep = ~np.r_[False, theirs["dones"][:-1]]  # rows that start at a decision, not at a terminal record
    assert len(theirs["dones"]) == 14 and demo.steps == int(keep.sum()) == 12
    np.testing.assert_array_equal(demo.obs[0], theirs["obs"][keep])
    np.testing.assert_array_equal(demo.continuous, theirs["continuous"][keep])
    np.testing.assert_array_equal(demo.discrete, theirs["discrete"][keep])
    np.testing.assert_array_equal(demo.rewards, theirs["rewards"][keep])
    np.testing.assert_array_equal(demo.dones, theirs["dones"][keep])
    assert demo.episodes == 3 and demo.interrupted.tolist() == [False] * 11 + [True]
    assert demo.spec.action_spec == ActionSpec(2, (3,)) and demo.spec.observation_specs[0].shape == (4,)


def test_unfinished_episodes_are_dropped_at_close(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    spec = SPECS["vector-continuous"]
    rng = np.random.default_rng(4)
    done, open_ = Episode(rng, spec, "0-0", 4, False, False), Episode(rng, spec, "0-1", 6, False, False)
    writer = DemoWriter(str(tmp_path / "Reach.demo"), "Reach", spec)
    writer.add(done.trajectories("Reach", 10)[0])
    writer.add(open_.trajectories("Reach", 3)[0])  # its second half never comes
    assert not (tmp_path / "Reach.demo").exists() and list(tmp_path.glob(".tmp-*"))  # written aside until close
    with caplog.at_level(logging.INFO):
        assert writer.close()
    assert "1 unfinished episode(s) (3 steps) were not written" in caplog.text
    demo = load_demonstrations(str(tmp_path / "Reach.demo"))
    assert demo.steps == 4 and demo.episodes == 1 and not list(tmp_path.glob(".tmp-*"))

    nothing = DemoWriter(str(tmp_path / "None.demo"), "None", spec)
    nothing.add(open_.trajectories("Reach", 3)[0])
    assert not nothing.close() and not (tmp_path / "None.demo").exists() and not list(tmp_path.glob(".tmp-*"))


def test_an_episode_cut_by_a_reset_is_dropped(tmp_path: Path) -> None:
    spec = SPECS["vector-continuous"]
    rng = np.random.default_rng(5)
    broken, fresh = Episode(rng, spec, "0-0", 6, False, False), Episode(rng, spec, "0-0", 2, False, False)
    write_demo(tmp_path / "Reach.demo", spec, broken.trajectories("Reach", 3)[:1] + fresh.trajectories("Reach", 3))
    demo = load_demonstrations(str(tmp_path / "Reach.demo"))
    assert demo.steps == 2 and demo.episodes == 1
    np.testing.assert_array_equal(demo.obs[0], fresh.obs[0])


def handmade_file(path: Path, brain: BrainParametersProto, records: list[AgentInfoActionPairProto]) -> None:
    path.write_bytes(meta_header("x", len(records), 1, 0.0) + delimited(brain) + b"".join(delimited(r) for r in records))


def test_unity_3x_channels_first_images_and_old_action_fields(tmp_path: Path) -> None:
    """A 3.x build declares images (C, H, W): they load (H, W, C), as ml_arl's envs give them;
    files from before action specs keep actions in vector_actions_deprecated."""
    chw = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    brain = BrainParametersProto(vector_action_space_type_deprecated=0)
    brain.vector_action_size_deprecated.extend([3])
    records = []
    for step, done in enumerate([False, True]):
        obs = ObservationProto(shape=[3, 4, 5], dimension_properties=[int(NONE_PROP), int(TE), int(TE)],
                               compression_type=NONE)
        obs.float_data.data.extend((chw + step).ravel().tolist())
        info = AgentInfoProto(reward=0.5 * step, done=done, observations=[obs])
        records.append(AgentInfoActionPairProto(agent_info=info, action_info=AgentActionProto(vector_actions_deprecated=[2.0])))
    handmade_file(tmp_path / "old.demo", brain, records)
    demo = load_demonstrations(str(tmp_path / "old.demo"))
    assert demo.spec.observation_specs[0].shape == (4, 5, 3) and demo.spec.action_spec == ActionSpec(0, (3,))
    np.testing.assert_array_equal(demo.obs[0][0], chw.transpose(1, 2, 0))
    np.testing.assert_array_equal(demo.next_obs[0][0], chw.transpose(1, 2, 0) + 1)
    assert demo.discrete.tolist() == [[2]] and demo.rewards.tolist() == [0.5] and demo.dones.tolist() == [True]
    spec = BehaviorSpec([image(4, 5, 3)], ActionSpec(0, (3,)))
    assert check_demonstrations(str(tmp_path / "old.demo"), spec, "demo_path") is None


# ------------------------------------------------------------------------------------ errors


@pytest.fixture
def good_demo(tmp_path: Path) -> Path:
    spec = SPECS["vector-continuous"]
    ep = Episode(np.random.default_rng(6), spec, "0-0", 40, False, False)
    path = tmp_path / "good" / "Reach.demo"
    write_demo(path, spec, ep.trajectories("Reach", 16))
    return path


def one_line(problem: Optional[str]) -> str:
    assert problem is not None and "\n" not in problem and "Traceback" not in problem
    return problem


WHERE = "behaviors.Reach.behavioral_cloning.demo_path"


def test_check_errors_are_one_line(tmp_path: Path, good_demo: Path) -> None:
    spec = SPECS["vector-continuous"]

    def check(path: Path, against: BehaviorSpec = spec) -> Optional[str]:
        return check_demonstrations(str(path), against, WHERE, "Reach")

    assert check(good_demo) is None and check(good_demo.parent) is None
    missing = one_line(check(tmp_path / "nope.demo"))
    assert missing.startswith(f"{WHERE}: {tmp_path / 'nope.demo'}: no such file or folder")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x")
    assert "the folder holds no .demo files" in one_line(check(tmp_path / "empty"))
    assert "is not a .demo file" in one_line(check(tmp_path / "empty" / "notes.txt"))

    data = good_demo.read_bytes()
    for name, cut in [("truncated", data[: len(data) // 2]), ("header", data[:20]), ("records-cut", data[:-1])]:
        (tmp_path / f"{name}.demo").write_bytes(cut)
        line = one_line(check(tmp_path / f"{name}.demo"))
        assert line.startswith(f"{WHERE}: {tmp_path / name}.demo: not a readable .demo file") and "record it again" in line
        assert "truncated" in line or "fewer than" in line, line
        with pytest.raises(ConfigError) as err:
            load_demonstrations(str(tmp_path / f"{name}.demo"))
        assert len(err.value.problems) == 1 and str(tmp_path / f"{name}.demo") in err.value.problems[0]
    (tmp_path / "garbage.demo").write_bytes(b"\x05hello" + bytes(27) + b"\xff" * 40)
    assert "not a readable .demo file" in one_line(check(tmp_path / "garbage.demo"))

    wider = BehaviorSpec([vector(6)], spec.action_spec)
    line = one_line(check(good_demo, wider))
    assert f"{good_demo}: obs 0 is (3,) in the demo, (6,) in behavior Reach" in line and "--record-demo" in line
    two_obs = BehaviorSpec([vector(3), vector(1)], spec.action_spec)
    assert "the demo has 1 observations, behavior Reach has 2" in one_line(check(good_demo, two_obs))
    discrete = BehaviorSpec([vector(3)], ActionSpec(0, (3, 2)))
    assert "the actions are 2 continuous in the demo, discrete branches (3, 2) in behavior Reach" in one_line(
        check(good_demo, discrete)
    )


def test_a_folder_holds_one_behavior(tmp_path: Path, good_demo: Path) -> None:
    spec = SPECS["discrete-branches"]
    write_demo(good_demo.parent / "Other.demo", spec, Episode(np.random.default_rng(7), spec, "0-0", 3, False, False)
               .trajectories("Other", 5))
    with pytest.raises(ConfigError) as err:
        load_demonstrations(str(good_demo.parent), where="demo_path")
    (line,) = err.value.problems
    assert line.startswith(f"demo_path: {good_demo}: obs 0 is (3,) in this file, (2,) in {good_demo.parent / 'Other.demo'}")
    assert "one behavior" in line


def test_recording_helpers(tmp_path: Path) -> None:
    raw = np.array([[-6.0, -1.5, 0.0, 4.5]], np.float32)
    np.testing.assert_allclose(sent_continuous("ppo")(raw), [[-1.0, -0.5, 0.0, 1.0]])
    np.testing.assert_array_equal(sent_continuous("sac")(raw), raw)
    assert demo_file_stem("Tag?team=1") == "Tag-team1" and demo_file_stem("Reach") == "Reach"
    (tmp_path / "Reach.demo").write_bytes(b"")
    assert free_demo_path(str(tmp_path), "Reach") == str(tmp_path / "Reach_1.demo")
    assert record_demo_problem(str(tmp_path / "new" / "deeper")) is None
    assert "exists and is not a folder" in one_line(record_demo_problem(str(tmp_path / "Reach.demo")))
    assert "is a file, so the folder cannot be created" in one_line(record_demo_problem(str(tmp_path / "Reach.demo" / "d")))


# ------------------------------------------------------------------------------------ arl-learn


def test_record_demo_end_to_end(tmp_path: Path) -> None:
    """arl-learn --inference --record-demo (a policy's episodes become demonstrations): the file
    holds exactly the episodes the run finished (as the results store counts them), with the actions
    the environment received."""
    config = tiny_config("builtin:Reach", max_steps=600, time_horizon=16)
    config["env_settings"]["manager"] = "inprocess"
    cfg = write_config(tmp_path / "reach.yaml", config)
    proc = arl_learn_here([cfg, "--run-id", "r", "--seed", "2", "--inference", "--record-demo", "demos"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Recording the episodes of Reach to demos/Reach.demo" in proc.stdout
    demo = load_demonstrations(str(tmp_path / "demos"))
    (series,) = read_results(str(tmp_path / "results" / "r" / "results.sqlite")).series
    assert demo.episodes == len(series) > 0
    ends = np.flatnonzero(demo.dones)
    assert ends[-1] == demo.steps - 1
    lengths = np.diff(np.concatenate([[-1], ends])).tolist()
    returns = [float(r.sum()) for r in np.split(demo.rewards, ends[:-1] + 1)]
    assert sorted(lengths) == sorted(series.length) and sum(lengths) == demo.steps
    assert sorted(returns) == pytest.approx(sorted(series.env_reward), abs=1e-4)
    assert demo.interrupted.any() and np.abs(demo.continuous).max() <= 1.0  # clamp(a, -3, 3) / 3
    assert f"wrote {demo.episodes} episodes ({demo.steps} steps" in proc.stdout

    bad = arl_learn_here([cfg, "--run-id", "r2", "--record-demo", "reach.yaml"], cwd=tmp_path)
    assert bad.returncode == 2 and not (tmp_path / "results" / "r2").exists()
    assert "--record-demo reach.yaml: exists and is not a folder" in bad.stderr + bad.stdout
    assert "Traceback" not in bad.stderr + bad.stdout
    assert os.listdir(tmp_path / "demos") == ["Reach.demo"]


DEMO_KEYS = {"gail": "reward_signals.gail.demo_path", "bc": "behavioral_cloning.demo_path"}


def goal_reach_demo(path: Path, spec: BehaviorSpec) -> Path:
    """Three short finished episodes of a behavior with ``spec``, written by DemoWriter (images as PNGs)."""
    rng = np.random.default_rng(3)
    writer = DemoWriter(str(path), "GoalReach", spec)
    for number in range(3):
        for traj in Episode(rng, spec, f"0-{number}", 6, False, True).trajectories("GoalReach", 4):
            writer.add(traj)
    assert writer.close()
    return path


def demo_config(trainer: str, key: str, demo: Path, manager: str = "inprocess", env_args: Optional[list[str]] = None) -> dict[str, Any]:
    settings: dict[str, Any] = {"trainer_type": trainer, "max_steps": 200, "summary_freq": 100,
                                "network_settings": {"hidden_units": 16, "num_layers": 1}}
    if key == "gail":
        settings["reward_signals"] = {"extrinsic": {"gamma": 0.99}, "gail": {"demo_path": str(demo)}}
    else:
        settings["behavioral_cloning"] = {"demo_path": str(demo)}
    env = {"env_path": "tests.support.simple_envs:goal_reach", "manager": manager, "env_args": env_args or []}
    return {"env_settings": env, "default_settings": settings, "behaviors": {"GoalReach": {}}}


IMAGE_ONLY = ["vectors=0", "images=1"]  # GoalReach seeing a 20x20x3 image


@pytest.fixture(scope="module")
def bad_demos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """.demo files GoalReach (1 vector of 1, 1 continuous action) cannot learn from."""
    folder = tmp_path_factory.mktemp("bad-demos")
    good = goal_reach_demo(folder / "good.demo", GoalReach(continuous=1).spec)
    data = good.read_bytes()
    (folder / "truncated.demo").write_bytes(data[: len(data) * 2 // 3])
    damaged = bytearray(data)
    damaged[META_BYTES + 40 : META_BYTES + 60] = b"\xff" * 20  # inside the brain parameters and the first record
    (folder / "damaged.demo").write_bytes(bytes(damaged))
    images = bytearray(goal_reach_demo(folder / "images.demo", GoalReach(continuous=1, vectors=0, images=1).spec).read_bytes())
    idat = images.index(b"IDAT")
    images[idat + 10 : idat + 30] = bytes(20)  # inside one PNG's pixel data: the .demo's framing is whole
    (folder / "png.demo").write_bytes(bytes(images))
    return {
        "truncated": folder / "truncated.demo",
        "damaged": folder / "damaged.demo",
        "png": folder / "png.demo",
        "observation": goal_reach_demo(folder / "wide.demo", BehaviorSpec([vector(3)], ActionSpec(1, ()))),
        "actions": goal_reach_demo(folder / "discrete.demo", GoalReach(continuous=0, discrete=1).spec),
    }


# (which .demo, under which key, trainer, through the command itself)
BAD_DEMO_RUNS = [
    ("truncated", "gail", "sac", True),
    ("damaged", "bc", "ppo", False),
    ("png", "gail", "ppo", False),
    ("truncated", "bc", "sac", False),
    ("observation", "gail", "ppo", False),
    ("observation", "bc", "sac", False),
    ("actions", "gail", "sac", False),
    ("actions", "bc", "ppo", False),
]


@pytest.mark.parametrize("demo,key,trainer,command", BAD_DEMO_RUNS, ids=["-".join(map(str, case[:3])) for case in BAD_DEMO_RUNS])
def test_a_bad_demo_is_a_one_line_error_before_anything_is_written(
    tmp_path: Path, bad_demos: dict[str, Path], demo: str, key: str, trainer: str, command: bool
) -> None:
    """A damaged .demo, or one of other observations or actions, under GAIL's or BC's demo_path:
    one line naming the key and the file, exit code 2, no traceback, no results folder. One case
    through arl-learn itself (its workers in processes), the others through its main() in this process."""
    path = bad_demos[demo]
    config = demo_config(trainer, key, path, "subprocess" if command else "inprocess", IMAGE_ONLY if demo == "png" else None)
    cfg = write_config(tmp_path / "c.yaml", config)
    proc = (arl_learn if command else arl_learn_here)([str(cfg), "--run-id", "bad"], cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out, out
    errors = [line for line in out.splitlines() if line.strip()]
    assert len(errors) == 1, out
    (line,) = errors
    assert f"behaviors.GoalReach.{DEMO_KEYS[key]}: {path}: " in line, line
    expected = {"truncated": "truncated", "damaged": "not a readable .demo file", "observation": "obs 0 is (3,) in the demo, (1,)",
                "png": "record 0 obs 0: the PNG chunk at byte 33 is damaged (its CRC does not match)",
                "actions": "the actions are discrete branches (2,) in the demo, 1 continuous in behavior GoalReach"}
    assert expected[demo] in line, line
    assert not (tmp_path / "results").exists(), sorted(p for p in tmp_path.rglob("*"))


def test_damaged_png_observations(tmp_path: Path) -> None:
    """The check finds damaged PNG bytes without decoding them; the loader, decoding, never lets
    PIL's own error kinds (SyntaxError, AttributeError for bytes that look like another format) out."""
    from ml_arl.demonstrations.format import PNG_SIGNATURE, png_problem

    spec = BehaviorSpec([image(6, 5, 3), image(4, 4, 4)], ActionSpec(1, ()))  # 4 channels: two PNGs in one
    good = goal_reach_demo(tmp_path / "good.demo", spec)
    assert check_demonstrations(str(good), spec) is None
    data = good.read_bytes()
    start = data.index(PNG_SIGNATURE)
    png = data[start : data.index(b"IEND", start) + 8]
    assert png_problem(png) is None and png_problem(png + png) is None
    assert png_problem(b"") == "no image bytes" and png_problem(png[:-3]) == f"the PNG is cut off at byte {len(png) - 12}"
    assert "no PNG signature at byte 0" in str(png_problem(b"junk\nxyz" + png[8:]))
    assert png_problem(png + b"x") == f"no PNG signature at byte {len(png)}"
    not_png = data[:start] + b"junk\nxyz" + data[start + 8 :]  # PIL reads it as an IM file and fails inside
    (tmp_path / "im.demo").write_bytes(not_png)
    assert "record 0 obs 0: no PNG signature at byte 0" in one_line(check_demonstrations(str(tmp_path / "im.demo"), spec))
    with pytest.raises(ConfigError) as err:
        load_demonstrations(str(tmp_path / "im.demo"), "demo_path")
    (line,) = err.value.problems
    assert line == f"demo_path: {tmp_path / 'im.demo'}: not a readable .demo file: obs 0: a PNG observation does not decode " \
        "(its bytes are damaged); record it again or remove it"
