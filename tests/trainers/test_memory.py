"""Recurrent memory (network_settings.memory): the settings checks, the sequence layout and masked
losses of PPO's update, the numpy LSTM of the muscle against torch, memories in trajectories,
ONNX's recurrent contract run step by step in onnxruntime, and PPO learning a task whose goal is
shown only in an episode's first 2 steps (ML-Agents' test_recurrent_ppo, test_recurrent_sac and
test_recurrent_poca). SAC's replay buffer of sequences and POCA's recurrent critic."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Optional

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType

from ml_arl.acting.env_runner import EnvRunner
from ml_arl.acting.muscle import Muscle
from ml_arl.core.actor_weights import PolicyMessage
from ml_arl.core.exceptions import ConfigError
from ml_arl.core.experience import Trajectory
from ml_arl.demonstrations.reader import Demonstrations
from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.networks.layers import run_lstm
from ml_arl.networks.onnx_export import check_onnx, export_onnx
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import BehavioralCloningSettings, NetworkSettings, build_run_options
from ml_arl.trainers.behavioral_cloning import BehavioralCloning
from ml_arl.trainers.poca.trainer import POCATrainer, poca_loss
from ml_arl.trainers.ppo.trainer import PPOTrainer, masked_mean, ppo_loss, sequence_rows
from ml_arl.trainers.sac.replay_buffer import ReplayBuffer
from ml_arl.trainers.sac.trainer import SACTrainer
from ml_arl.training.controller import TrainerController
from tests.support.simple_envs import SUCCESS_THRESHOLD, GoalReach, last5, stop_when_solved

MEMORY = {"memory_size": 16, "sequence_length": 4}


def _spec(shapes: list[tuple[int, ...]], actions: ActionSpec) -> BehaviorSpec:
    obs = [ObservationSpec(s, (DimensionProperty.NONE,) * len(s), ObservationType.DEFAULT, f"obs{i}") for i, s in enumerate(shapes)]
    return BehaviorSpec(obs, actions)


def _net(actions: ActionSpec, seed: int = 0, normalize: bool = True, sac: bool = False) -> ActorCritic:
    """A recurrent actor with random weights; ``sac``: SAC's (state-dependent sigma, tanh-squashed, no critic)."""
    torch.manual_seed(seed)
    settings = NetworkSettings(hidden_units=16, normalize=normalize, memory=MEMORY)
    kinds = {"conditional_sigma": True, "tanh_squash": True, "critic": False} if sac else {}
    net = ActorCritic(_spec([(3,), (2,)], actions), settings, **kinds)  # type: ignore[arg-type]
    with torch.no_grad():
        for p in net.parameters():  # random weights everywhere (the heads start tiny)
            p.add_(torch.randn_like(p) * 0.3)
    if normalize:
        net.normalizer.update(torch.randn(32, 5) * 2.0 + 1.0)
    return net


# ---------------------------------------------------------------------------------- settings


def _options(network: dict[str, Any], trainer: str = "ppo", batch_size: int = 64) -> Any:
    section = {"trainer_type": trainer, "network_settings": network}
    if trainer != "poca":
        section["hyperparameters"] = {"batch_size": batch_size, "buffer_size": 128}
    return build_run_options({"behaviors": {"B": section}}, {}, "test")


def test_memory_settings_checks() -> None:
    options = _options({"memory": {"memory_size": 16, "sequence_length": 16}})
    assert options.behaviors["B"].network_settings.memory.memory_size == 16
    with pytest.raises(ConfigError, match="memory_size: 15 is invalid: must be even"):
        _options({"memory": {"memory_size": 15}})
    with pytest.raises(ConfigError, match="memory_size"):
        _options({"memory": {"memory_size": 0}})
    with pytest.raises(ConfigError, match="sequence_length: 128 is larger than hyperparameters.batch_size \\(64\\)"):
        _options({"memory": {"sequence_length": 128}})
    for trainer in ("sac", "poca"):  # memory for every built-in trainer; a sequence never longer than a batch
        options = _options({"memory": {"memory_size": 16, "sequence_length": 16}}, trainer)
        assert options.behaviors["B"].network_settings.memory.sequence_length == 16
    with pytest.raises(ConfigError, match="sequence_length: 256 is larger than hyperparameters.batch_size \\(64\\)"):
        _options({"memory": {"sequence_length": 256}}, "sac")


# ---------------------------------------------------------------------------------- sequences and losses


def test_sequence_rows_pad_each_trajectory_at_its_end() -> None:
    # trajectories of 5, 3 and 4 steps in sequences of 4: [0..3] [4 pad pad pad] [5 6 7 pad] [8..11]
    rows = sequence_rows([5, 3, 4], 4)
    assert rows.tolist() == [0, 1, 2, 3, 4, -1, -1, -1, 5, 6, 7, -1, 8, 9, 10, 11]
    assert sequence_rows([2], 1).tolist() == [0, 1]


def test_masked_losses_leave_padding_out() -> None:
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]])
    mask = torch.tensor([1.0, 1.0, 0.0])
    assert float(masked_mean(x, mask)) == pytest.approx(2.5)
    assert float(masked_mean(x[:, 0], mask)) == pytest.approx(2.0)
    gen = torch.Generator().manual_seed(0)
    real = [torch.randn(6, generator=gen) for _ in range(4)] + [torch.randn(6, 2, generator=gen) for _ in range(3)]
    padded = [torch.cat([t, torch.randn(t[:3].shape, generator=gen)]) for t in real]
    padded[0][6:] = 1e4  # the padding's probability ratio overflows to inf: it must still stay out
    want = ppo_loss(*real[:3], real[4], real[5], real[6], real[3], 0.2, 0.01)
    got = ppo_loss(*padded[:3], padded[4], padded[5], padded[6], padded[3], 0.2, 0.01, mask=torch.tensor([1.0] * 6 + [0.0] * 3))
    for a, b in zip(want, got):
        assert float(a) == pytest.approx(float(b), rel=1e-5)


# ---------------------------------------------------------------------------------- muscle vs torch


@pytest.mark.parametrize("actions", [ActionSpec(2, ()), ActionSpec(1, (3, 2))], ids=["continuous", "hybrid"])
def test_muscle_lstm_matches_torch_over_a_sequence(actions: ActionSpec) -> None:
    net = _net(actions)
    muscle = Muscle(net.muscle_weights(), seed=3)
    assert muscle.memory_size == 16
    rng = np.random.default_rng(1)
    agents, steps = 3, 6
    ids = np.array([7, 8, 9])
    obs = [rng.normal(size=(steps, agents, 3)).astype(np.float32), rng.normal(size=(steps, agents, 2)).astype(np.float32)]
    infos = [muscle.act([obs[0][t], obs[1][t]], None, ids) for t in range(steps)]
    assert np.all(infos[0].memory == 0) and np.all(infos[1].memory != 0)
    # torch: one sequence per agent (rows agent-major), from zero memories
    seq_obs = [torch.as_tensor(o.transpose(1, 0, 2).reshape(agents * steps, -1)) for o in obs]
    cont = torch.as_tensor(np.stack([i.continuous for i in infos], 1).reshape(agents * steps, -1))
    disc = torch.as_tensor(np.stack([i.discrete for i in infos], 1).reshape(agents * steps, -1))
    with torch.no_grad():
        log_prob, _, _ = net.evaluate(seq_obs, None, cont, disc, torch.zeros(agents, 16))
        # the memory before step t is what the LSTM holds after the first t steps
        _, after = net.recurrent(net.body(net.encoder([o[: agents * steps] for o in seq_obs])), torch.zeros(agents, 16))
    muscle_logp = np.stack([i.log_prob for i in infos], 1).reshape(agents * steps, -1)  # [rows, D]
    np.testing.assert_allclose(muscle_logp, log_prob.numpy(), atol=2e-4)
    last = muscle.memories
    np.testing.assert_allclose(np.stack([last[i] for i in ids]), after.numpy(), atol=1e-5)
    # a stored memory replays the rest of an episode: steps 2.. from the memory before step 2
    with torch.no_grad():
        tail = [o.reshape(agents, steps, -1)[:, 2:].reshape(-1, o.shape[1]) for o in seq_obs]
        tail_logp, _, _ = net.evaluate(
            tail, None, cont.reshape(agents, steps, -1)[:, 2:].reshape(agents * 4, -1),
            disc.reshape(agents, steps, -1)[:, 2:].reshape(agents * 4, -1), torch.as_tensor(infos[2].memory),
        )
    dims = muscle_logp.shape[1]
    np.testing.assert_allclose(muscle_logp.reshape(agents, steps, dims)[:, 2:].reshape(-1, dims), tail_logp.numpy(), atol=2e-4)
    muscle.forget(np.array([8]))
    again = muscle.act([obs[0][0], obs[1][0]], None, ids)
    assert np.all(again.memory[1] == 0) and np.all(again.memory[0] != 0)


def test_trajectories_carry_the_memories_the_workers_acted_with() -> None:
    env = GoalReach(continuous=1, n_agents=2, show_goal_steps=2, max_episode_steps=12, seed=3)
    net = ActorCritic(env.spec, NetworkSettings(hidden_units=8, memory=MEMORY))
    runner = EnvRunner(env, worker_id=0, seed=0)
    runner.set_policy("GoalReach", PolicyMessage(version=1, weights=net.muscle_weights(), time_horizon=4, deterministic=False))
    trajectories = runner.run(60).trajectories
    assert trajectories and all(t.memories is not None and t.memories.shape == (len(t), 16) for t in trajectories)
    starts: set[str] = set()
    for traj in trajectories:
        assert traj.memories is not None
        first = traj.agent_id not in starts  # GoalReach gives every episode a new agent id
        starts.add(traj.agent_id)
        assert np.all(traj.memories[0] == 0) == first  # zeros at an episode's start only; a cut carries on
        assert np.all(np.any(traj.memories[1:] != 0, axis=1))
    runner.reset()
    assert not runner.muscles["GoalReach"].memories  # type: ignore[attr-defined]


class _SameIdReach(GoalReach):
    """GoalReach whose one agent keeps its id from episode to episode, as Unity's agents do."""

    def _reset(self, idx: np.ndarray) -> None:
        super()._reset(idx)
        self.next_id = int(self.ids[idx].min())


def test_an_agent_that_restarts_in_the_same_step_starts_from_zeros() -> None:
    env = _SameIdReach(continuous=1, show_goal_steps=2, max_episode_steps=8, seed=1)
    net = ActorCritic(env.spec, NetworkSettings(hidden_units=8, memory=MEMORY))
    runner = EnvRunner(env, worker_id=0, seed=0)
    runner.set_policy("GoalReach", PolicyMessage(version=1, weights=net.muscle_weights(), time_horizon=100, deterministic=False))
    trajectories = runner.run(40).trajectories
    assert len(trajectories) >= 3 and {t.agent_id for t in trajectories} == {"0-0"}
    for traj in trajectories:  # one trajectory per episode: each starts from zeros
        assert traj.memories is not None and traj.done
        assert np.all(traj.memories[0] == 0) and np.all(np.any(traj.memories[1:] != 0, axis=1))


def _piece(rng: np.random.Generator, agent: str, steps: int, done: bool) -> Trajectory:
    return Trajectory(
        behavior="GoalReach", agent_id=agent, obs=[rng.normal(size=(steps, 1)).astype(np.float32)],
        next_obs=[rng.normal(size=(1,)).astype(np.float32)], continuous=rng.normal(size=(steps, 1)).astype(np.float32),
        discrete=np.zeros((steps, 0), np.int32), allowed=None, log_prob=np.full(steps, -1.0, np.float32),
        rewards=rng.normal(size=steps).astype(np.float32), group_rewards=np.zeros(steps, np.float32), group_id=0,
        done=done, interrupted=False, policy_version=0, memories=rng.normal(size=(steps, 16)).astype(np.float32),
    )


@pytest.mark.parametrize("shared_critic", [False, True])
def test_the_critic_memory_carries_over_trajectories_of_an_episode(shared_critic: bool) -> None:
    section = {"hyperparameters": {"batch_size": 8, "buffer_size": 16, "shared_critic": shared_critic},
               "network_settings": {"hidden_units": 8, "memory": MEMORY}}
    settings = build_run_options({"behaviors": {"GoalReach": section}}, {}, "test").behaviors["GoalReach"]
    spec = GoalReach().spec
    torch.manual_seed(0)
    trainer = PPOTrainer("GoalReach", settings, spec, StatsReporter("GoalReach", []), None, torch.device("cpu"))
    net = trainer.network
    assert net.critic_lstm is not None and (net.critic_lstm is net.lstm) == shared_critic
    rng = np.random.default_rng(0)
    first, second, other = _piece(rng, "0-1", 6, False), _piece(rng, "0-1", 5, True), _piece(rng, "0-2", 7, False)
    for traj in (first, second, other):
        trainer.add_experience(traj)
    assert set(trainer.critic_memory) == {"0-2"}  # the ended episode's memory is dropped
    (starts1, end1), (starts2, _), (starts3, _) = trainer.buffer.critic_memories
    assert starts1.shape == (2, 16) and np.all(starts1[0] == 0) and np.all(starts3[0] == 0)
    np.testing.assert_allclose(starts2[0], end1)  # the second piece goes on from the first
    data, next_obs = trainer.buffer.batch(torch.device("cpu"))
    with torch.no_grad():
        values, next_values = trainer._recurrent_values(data, next_obs)
        episode = net.values([torch.as_tensor(np.concatenate([first.obs[0], second.obs[0]]))], torch.zeros(1, 16))
    np.testing.assert_allclose(values[:11], episode.numpy(), atol=1e-5)  # as one unbroken sequence
    assert data.critic_memories is not None
    np.testing.assert_allclose(data.critic_memories[[0, 4, 6, 10, 11, 15]].numpy(), np.concatenate([starts1, starts2, starts3]))
    trainer.update()  # sequences of 4 over pieces of 6, 5 and 7 steps: padded and masked
    assert all(torch.isfinite(p).all() for p in net.parameters())


def test_behavioral_cloning_learns_through_the_memory() -> None:
    """Demonstrated episodes of 4 steps that show the goal only at their first step and act it at
    every step: sequences of 4 from zero memories can imitate the last 3 steps only by remembering."""
    spec = GoalReach().spec
    rng = np.random.default_rng(0)
    episodes, length = 64, 4
    goal = rng.choice([-1.0, 1.0], episodes).astype(np.float32)
    obs = np.zeros((episodes, length, 1), np.float32)
    obs[:, 0, 0] = goal
    steps = episodes * length
    ends = np.tile(np.arange(length) == length - 1, episodes)
    demo = Demonstrations(
        spec, [obs.reshape(steps, 1)], [obs.reshape(steps, 1)], np.repeat(goal, length)[:, None], np.zeros((steps, 0), np.int32),
        np.zeros(steps, np.float32), ends, np.zeros(steps, bool), episodes, steps, 0.0, (),
    )
    torch.manual_seed(0)
    net = ActorCritic(spec, NetworkSettings(hidden_units=16, num_layers=1, memory={"memory_size": 16, "sequence_length": length}))
    settings = BehavioralCloningSettings(demo_path="unused.demo", strength=1.0)
    bc = BehavioralCloning(settings, net, demo, 1e-2, 64, 3, torch.device("cpu"), np.random.default_rng(1), length)

    def later_steps_right() -> float:
        with torch.no_grad():
            dist = net.distribution([torch.as_tensor(obs.reshape(steps, 1))], None, torch.zeros(episodes, 16))
        assert dist.mu is not None
        return float(np.mean(np.sign(dist.mu.numpy().reshape(episodes, length)[:, 1:]) == goal[:, None]))

    assert later_steps_right() < 0.75
    for step in range(6):
        bc.update(step)
    assert later_steps_right() > 0.95


# ---------------------------------------------------------------------------------- SAC's replay buffer of sequences


def _steps(agent: str, first: float, steps: int, done: bool, memory_size: int = 4) -> Trajectory:
    """A trajectory whose observation, reward and memories count its steps from ``first``."""
    obs = np.arange(first, first + steps, dtype=np.float32)[:, None]
    return Trajectory(
        behavior="B", agent_id=agent, obs=[obs], next_obs=[np.array([first + steps], np.float32)],
        continuous=obs.copy(), discrete=np.zeros((steps, 0), np.int32), allowed=None, log_prob=np.zeros(steps, np.float32),
        rewards=obs[:, 0].copy(), group_rewards=np.zeros(steps, np.float32), group_id=0, done=done, interrupted=False,
        policy_version=0, memories=np.repeat(obs, memory_size, axis=1),
    )


def _memory_buffer(capacity: int = 12) -> ReplayBuffer:
    return ReplayBuffer(capacity, [(1,)], 1, (), torch.device("cpu"), memory_size=4, sequence_length=4)


def test_replay_sequences_stay_in_their_trajectory_and_pad_its_end() -> None:
    buf = _memory_buffer()
    a, b = _steps("a", 0, 5, done=True), _steps("b", 10, 3, done=False)
    buf.add(a, -np.asarray(a.memories))  # critic memories: minus the actor's, to tell them apart
    buf.add(b, -np.asarray(b.memories))
    # a: rows 0-4 (places 0-4), b: rows 5-7: sequences start at a's steps 0 and 4 and b's step 0
    assert buf.sequence_starts().tolist() == [0, 4, 5]
    rows, mask = buf.sequence_rows(torch.tensor([0, 4, 5]))
    assert rows.tolist() == [0, 1, 2, 3, 4, 4, 4, 4, 5, 6, 7, 7]  # padding repeats the trajectory's last step
    assert mask.tolist() == [1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0]
    assert buf.dones[:8].tolist() == [0, 0, 0, 0, 1, 0, 0, 0]  # a ended, b was cut by the time horizon
    assert buf.next_obs[0][:8, 0].tolist() == [1, 2, 3, 4, 5, 11, 12, 13]
    # a third trajectory of 6 wraps the ring (rows 8-11 then 0-1) over a's first two steps
    c = _steps("c", 20, 6, done=True)
    buf.add(c, -np.asarray(c.memories))
    assert buf.obs[0][:, 0].tolist() == [24, 25, 2, 3, 4, 10, 11, 12, 20, 21, 22, 23]
    # a's step 4 still starts a sequence; c's steps 0 and 4 (rows 8 and 0) start theirs
    assert buf.sequence_starts().tolist() == [0, 4, 5, 8]
    rows, mask = buf.sequence_rows(torch.tensor([8, 0]))
    assert rows.tolist() == [8, 9, 10, 11, 0, 1, 1, 1] and mask.tolist() == [1, 1, 1, 1, 1, 1, 0, 0]
    # a sample: whole sequences, each with the memories stored at its steps
    batch = buf.sample_sequences(64, np.random.default_rng(0))
    assert len(batch) == 256 and batch.memories is not None and batch.critic_memories is not None and batch.mask is not None
    firsts = batch.obs[0][::4, 0]
    assert set(firsts.tolist()) == {4.0, 10.0, 20.0, 24.0}  # every start drawn
    steps = batch.obs[0][:, 0].reshape(64, 4)
    real = batch.mask.reshape(64, 4) > 0
    assert torch.equal(steps[real], (firsts[:, None] + torch.arange(4.0)).expand(64, 4)[real])  # consecutive steps
    np.testing.assert_array_equal(batch.memories.numpy(), np.repeat(batch.obs[0].numpy(), 4, axis=1))
    np.testing.assert_array_equal(batch.critic_memories.numpy(), -batch.memories.numpy())
    assert real.sum(1).tolist() == [{4.0: 1, 10.0: 3, 20.0: 4, 24.0: 2}[float(f)] for f in firsts]


def test_replay_sequences_survive_save_and_load(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    buf = _memory_buffer()
    for traj in (_steps("a", 0, 5, True), _steps("b", 10, 3, False), _steps("c", 20, 6, True)):
        buf.add(traj, -np.asarray(traj.memories))
    path = tmp_path / "buffer.npz"
    buf.save(str(path))
    copy = _memory_buffer()
    copy.load(str(path))  # oldest first: c's last two steps now follow the rest
    assert len(copy) == 12 and copy.obs[0][:, 0].tolist() == [2, 3, 4, 10, 11, 12, 20, 21, 22, 23, 24, 25]
    assert copy.sequence_starts().tolist() == [2, 3, 6, 10]
    rows, mask = copy.sequence_rows(copy.sequence_starts())
    assert copy.obs[0][rows, 0].tolist() == [4, 4, 4, 4, 10, 11, 12, 12, 20, 21, 22, 23, 24, 25, 25, 25]
    assert mask.tolist() == [1, 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0]
    assert copy.memories is not None and buf.memories is not None
    np.testing.assert_array_equal(copy.memories[rows].numpy(), buf.memories[buf.sequence_rows(torch.tensor([4, 5, 8, 0]))[0]].numpy())
    plain = ReplayBuffer(12, [(1,)], 1, (), torch.device("cpu"))  # a buffer saved without memory does not fit one with
    plain.add(_steps("a", 0, 5, True))
    plain.save(str(path))
    copy = _memory_buffer()
    copy.load(str(path))
    assert len(copy) == 0 and "replay buffer not restored" in caplog.text


def _sac_trainer(memory: dict[str, int], **hp: Any) -> SACTrainer:
    section = {"trainer_type": "sac", "hyperparameters": {"batch_size": 16, "buffer_size": 100, **hp},
               "network_settings": {"hidden_units": 8, "num_layers": 1, "memory": memory}}
    settings = build_run_options({"behaviors": {"GoalReach": section}}, {}, "test").behaviors["GoalReach"]
    torch.manual_seed(0)
    return SACTrainer("GoalReach", settings, GoalReach().spec, StatsReporter("GoalReach", []), None, torch.device("cpu"))


def test_sac_sequences_from_stored_memories_equal_whole_episodes() -> None:
    """V's memories, recorded per sequence as trajectories arrive (each step holds the memory before
    its sequence), carry across an episode's trajectories; V and the target V run from them over a
    sequence that starts mid-episode as over the unbroken episode."""
    trainer = _sac_trainer(MEMORY)
    rng = np.random.default_rng(0)
    first, second = _piece(rng, "0-1", 6, False), _piece(rng, "0-1", 5, True)
    trainer.add_experience(first)
    assert set(trainer.critic_memory) == {"0-1"}
    trainer.add_experience(second)
    assert not trainer.critic_memory  # the ended episode's memory is dropped
    episode = [torch.as_tensor(np.concatenate([first.obs[0], second.obs[0], second.next_obs[0][None]]))]
    net = trainer.value_net
    assert net.lstm is not None and trainer.replay.critic_memories is not None
    with torch.no_grad():
        values = net(episode, None, torch.zeros(1, 16))  # the 12 observations as one sequence
        features = net.features(episode)
        before = [torch.zeros(16)] + [run_lstm(net.lstm, features[:t], torch.zeros(1, 16))[1][0] for t in (4, 6, 10)]  # type: ignore[index]
        # rows 6 and 10: the second piece's sequences (episode steps 6-9, and 10 with padding)
        batch = trainer.replay._rows(trainer.replay.sequence_rows(torch.tensor([6, 10]))[0])
    stored = trainer.replay.critic_memories[:11].numpy()
    want = np.stack([before[0]] * 4 + [before[1]] * 2 + [before[2]] * 4 + [before[3]])  # first's places 0-3, 4-5; second's 0-3, 4
    np.testing.assert_allclose(stored, want, atol=1e-6)
    assert trainer.replay.critic_memories is not None
    value_mem = trainer.replay.critic_memories[torch.tensor([6, 10])]
    with torch.no_grad():
        v = trainer.value_net(batch.obs, None, value_mem)[..., 0]
        targets = trainer._sequence_targets(batch, value_mem)
    np.testing.assert_allclose(v[:4].numpy(), values[6:10, :, 0].numpy(), atol=1e-5)
    np.testing.assert_allclose(v[4].numpy(), values[10, :, 0].numpy(), atol=1e-5)
    np.testing.assert_allclose(targets[:4].numpy(), values[7:11, :, 0].numpy(), atol=1e-5)  # target = V until a step
    np.testing.assert_allclose(targets[4].numpy(), values[11, :, 0].numpy(), atol=1e-5)  # the observation after the episode


def test_sac_padding_stays_out_of_the_gradient_step() -> None:
    trainer = _sac_trainer(MEMORY)
    rng = np.random.default_rng(0)
    for agent, steps in (("0-1", 6), ("0-2", 7), ("0-3", 3)):
        trainer.add_experience(_piece(rng, agent, steps, True))
    batch = trainer.replay.sample_sequences(8, np.random.default_rng(1))
    assert batch.mask is not None and 0 < int(batch.mask.sum()) < len(batch)
    pad = batch.mask == 0
    garbage = copy.deepcopy(batch)
    for t in (*garbage.obs, *garbage.next_obs, garbage.continuous):
        t[pad] = 1e3
    garbage.rewards[pad] = -1e3
    garbage.dones[pad] = 1.0
    before = copy.deepcopy(trainer.state())
    torch.manual_seed(5)
    stats = trainer._gradient_step(batch)
    after = [p.detach().clone() for p in trainer.q1.parameters()]
    trainer.load_state(before, resume=True)
    torch.manual_seed(5)
    stats_garbage = trainer._gradient_step(garbage)
    np.testing.assert_allclose(stats.numpy(), stats_garbage.numpy(), rtol=1e-5)
    for p, q in zip(after, trainer.q1.parameters()):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), atol=1e-6)
    trainer.update_steps, trainer.step = 1, 20
    trainer.update()  # bursts of sequence steps: every parameter stays finite
    assert all(torch.isfinite(p).all() for p in trainer.network.parameters())


# ---------------------------------------------------------------------------------- POCA's recurrent critic


def _poca_trainer(memory: Optional[dict[str, int]] = MEMORY) -> POCATrainer:
    network: dict[str, Any] = {"hidden_units": 8, "num_layers": 1}
    if memory is not None:
        network["memory"] = memory
    section = {"trainer_type": "poca", "hyperparameters": {"batch_size": 8, "buffer_size": 16}, "network_settings": network}
    settings = build_run_options({"behaviors": {"GoalReach": section}}, {}, "test").behaviors["GoalReach"]
    torch.manual_seed(0)
    return POCATrainer("GoalReach", settings, GoalReach().spec, StatsReporter("GoalReach", []), None, torch.device("cpu"))


def test_poca_critic_memories_carry_over_trajectories_of_an_episode() -> None:
    trainer = _poca_trainer()
    critic = trainer.critic
    assert critic.lstm is not None and trainer.network.lstm is not None
    rng = np.random.default_rng(0)
    first, second, other = _piece(rng, "0-1", 6, False), _piece(rng, "0-1", 5, True), _piece(rng, "0-2", 7, False)
    for traj in (first, second, other):
        trainer.add_experience(traj)
    assert set(trainer.value_memory) == set(trainer.baseline_memory) == {"0-2"}
    (v1, b1, end1), (v2, b2, _), (v3, _, _) = trainer.critic_memories
    assert v1.shape == b1.shape == (2, 16) and np.all(v1[0] == 0) and np.all(b1[0] == 0) and np.all(v3[0] == 0)
    np.testing.assert_allclose(v2[0], end1)  # the second piece goes on from the first
    np.testing.assert_allclose(b2[0], v2[0], atol=1e-6)  # alone (no group) the baseline's input is the value's
    data = trainer._batch()
    assert data.mask is not None and data.mask.tolist() == [1] * 6 + [0] * 2 + [1] * 5 + [0] * 3 + [1] * 7 + [0]
    empty = [torch.zeros(11, 0, 1)]
    no_mates = torch.zeros(11, 0, dtype=torch.bool)
    with torch.no_grad():  # the episode as one unbroken sequence: the values the trainer computed piece by piece
        episode = critic.values([torch.as_tensor(np.concatenate([first.obs[0], second.obs[0]]))], empty, no_mates, torch.zeros(1, 16))
    real = data.mask > 0
    np.testing.assert_allclose(data.values[real][:11].numpy(), episode.numpy(), atol=1e-5)
    trainer.update()  # sequences of 4 over pieces of 6, 5 and 7 steps: padded and masked
    assert all(torch.isfinite(p).all() for p in (*trainer.network.parameters(), *critic.parameters()))


@pytest.mark.parametrize("memory", [None, MEMORY], ids=["feedforward", "memory"])
def test_poca_learns_from_agents_without_a_group(memory: Optional[dict[str, int]]) -> None:
    """A buffer in which no agent has a group (no groupmate slots): the critic values each agent alone."""
    trainer = _poca_trainer(memory)
    rng = np.random.default_rng(0)
    for agent, steps in (("0-1", 9), ("0-2", 8)):
        trainer.add_experience(_piece(rng, agent, steps, True))
    with torch.no_grad():
        alone = trainer.critic.values([torch.zeros(3, 1)], [torch.zeros(3, 0, 1)], torch.zeros(3, 0, dtype=torch.bool),
                                      None if memory is None else torch.zeros(1, 16))
    assert alone.shape == (3, 1) and torch.isfinite(alone).all()
    trainer.update()
    assert all(torch.isfinite(p).all() for p in (*trainer.network.parameters(), *trainer.critic.parameters()))


def test_poca_loss_leaves_padding_out() -> None:
    gen = torch.Generator().manual_seed(0)
    real = [torch.randn(6, generator=gen) for _ in range(3)] + [torch.randn(6, 2, generator=gen) for _ in range(4)] + [torch.randn(6, generator=gen)]
    padded = [torch.cat([t, torch.full_like(t[:3], 1e4)]) for t in real]
    want = poca_loss(*real, 0.2, 0.01)
    got = poca_loss(*padded, 0.2, 0.01, mask=torch.tensor([1.0] * 6 + [0.0] * 3))
    for a, b in zip(want, got):
        assert float(a) == pytest.approx(float(b), rel=1e-5)


@pytest.mark.parametrize("trainer_type", ["ppo", "sac", "poca"])
def test_a_critic_memory_of_an_episode_a_reset_cut_off_is_not_carried_into_the_next(trainer_type: str) -> None:
    """An agent's trajectory cut by the time horizon leaves its critic memory for the next one; a reset
    then drops the episode, and the agent's next trajectory (``episode_start``) starts from zeros."""
    rng = np.random.default_rng(0)
    cut, piece = _piece(rng, "0-1", 6, False), _piece(rng, "0-1", 5, True)
    new = Trajectory(**{**piece._asdict(), "episode_start": True})  # (_replace trips on __len__)
    if trainer_type == "ppo":
        section = {"hyperparameters": {"batch_size": 8, "buffer_size": 16}, "network_settings": {"hidden_units": 8, "memory": MEMORY}}
        settings = build_run_options({"behaviors": {"GoalReach": section}}, {}, "test").behaviors["GoalReach"]
        ppo = PPOTrainer("GoalReach", settings, GoalReach().spec, StatsReporter("GoalReach", []), None, torch.device("cpu"))
        ppo.add_experience(cut)
        assert set(ppo.critic_memory) == {"0-1"}
        ppo.add_experience(new)
        firsts = [ppo.buffer.critic_memories[1][0][0]]  # the memory before its first sequence
    elif trainer_type == "sac":
        sac = _sac_trainer(MEMORY)
        sac.add_experience(cut)
        assert set(sac.critic_memory) == {"0-1"}
        sac.add_experience(new)
        assert sac.replay.critic_memories is not None
        firsts = list(sac.replay.critic_memories[6:10].numpy())  # its first sequence's rows (steps 0-3)
    else:
        poca = _poca_trainer()
        poca.add_experience(cut)
        assert set(poca.value_memory) == set(poca.baseline_memory) == {"0-1"}
        poca.add_experience(new)
        value_starts, baseline_starts, _ = poca.critic_memories[1]
        firsts = [value_starts[0], baseline_starts[0]]
    assert all(m.shape == (16,) and np.all(m == 0) for m in firsts)


# ---------------------------------------------------------------------------------- ONNX


@pytest.mark.parametrize(
    ("actions", "sac"),
    [(ActionSpec(2, ()), False), (ActionSpec(1, (3, 2)), False), (ActionSpec(2, ()), True), (ActionSpec(1, (3, 2)), True)],
    ids=["continuous", "hybrid", "sac-continuous", "sac-hybrid"],
)
def test_onnx_recurrent_contract_step_by_step(actions: ActionSpec, sac: bool, tmp_path: Path) -> None:
    net = _net(actions, normalize=True, sac=sac)
    path = tmp_path / "policy.onnx"
    export_onnx(net, str(path))
    check_onnx(str(path))
    model = onnx.load(str(path))
    assert [(o.domain, o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")] == [("", 9)]
    assert "LSTM" in {n.op_type for n in model.graph.node}
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inputs = [i.name for i in session.get_inputs()]
    outputs = [o.name for o in session.get_outputs()]
    assert inputs[-1] == "recurrent_in" and outputs[-1] == "recurrent_out"
    assert session.get_inputs()[-1].shape[1:] == [1, 16]
    muscle = Muscle(net.muscle_weights(), deterministic=True)
    rng = np.random.default_rng(5)
    batch = 4
    ids = np.arange(batch)
    memory = np.zeros((batch, 1, 16), np.float32)
    allowed = np.ones((batch, sum(net.branches)), bool)
    for _ in range(5):
        obs = [rng.normal(size=(batch, 3)).astype(np.float32) * 2, rng.normal(size=(batch, 2)).astype(np.float32)]
        feed = {"obs_0": obs[0], "obs_1": obs[1], "recurrent_in": memory}
        if net.branches:
            feed["action_masks"] = allowed.astype(np.float32)
        out = dict(zip(outputs, session.run(None, feed)))
        assert out["memory_size"].tolist() == [16.0]
        info = muscle.act(obs, allowed if net.branches else None, ids)
        np.testing.assert_allclose(memory[:, 0], info.memory, atol=1e-5)  # the same memory went in
        if net.n_cont:
            np.testing.assert_allclose(out["deterministic_continuous_actions"], info.env_action.continuous, atol=1e-5)
        if net.branches:
            np.testing.assert_array_equal(out["deterministic_discrete_actions"], info.discrete)
        memory = out["recurrent_out"]
        assert memory.shape == (batch, 1, 16)
    with torch.no_grad():  # torch: the memory after the five steps, from the stored one of the last step
        _, after = net.recurrent(net.body(net.encoder([torch.as_tensor(o) for o in obs])), torch.as_tensor(info.memory))
    np.testing.assert_allclose(memory[:, 0], after.numpy(), atol=1e-5)


# ---------------------------------------------------------------------------------- learning


def _memory_config(tmp_path: Path, trainer_type: str, actions: str, max_steps: int, hyperparameters: dict[str, Any], memory_size: int = 16,
                   n_agents: int = 1) -> dict[str, Any]:
    """GoalReach showing its goal only in an episode's first 2 steps, one worker in-process (``n_agents``
    agents acting in one call: recurrent PPO solves in about as many steps with 4 as with 1, in a third less time)."""
    env_args = [actions, "continuous=0"] if actions.startswith("discrete") else [actions]
    return {
        "env_settings": {"env_path": "tests.support.simple_envs:goal_reach", "manager": "inprocess", "seed": 1,
                         "env_args": [*env_args, "show_goal_steps=2", f"n_agents={n_agents}"]},
        "checkpoint_settings": {"results_dir": str(tmp_path), "run_id": "memory"},
        "default_settings": {
            "trainer_type": trainer_type, "summary_freq": 500, "max_steps": max_steps,
            "hyperparameters": {"learning_rate_schedule": "constant", **hyperparameters},
            "network_settings": {"num_layers": 1, "hidden_units": 32, "memory": {"memory_size": memory_size, "sequence_length": 16}},
        },
        "behaviors": {},
    }


def _remembers(tmp_path: Path, config: dict[str, Any]) -> None:
    # stop once the last 20 returns average 0.95 (0.9 can stop a discrete run one miss early)
    controller = TrainerController(build_run_options(config, {}, "test"), callbacks=stop_when_solved(0.95))
    controller.start_learning()
    returns = list(controller.managers["GoalReach"].recent_rewards)
    assert last5(returns) > SUCCESS_THRESHOLD, returns[-10:]
    check_onnx(str(tmp_path / "memory" / "GoalReach.onnx"))


@pytest.mark.parametrize(
    ("actions", "shared_critic", "memory_size"),
    [("continuous=1", False, 16), ("discrete=1", False, 16), ("continuous=1", True, 32)],
)
def test_recurrent_ppo_remembers_the_goal(tmp_path: Path, actions: str, shared_critic: bool, memory_size: int) -> None:
    """ML-Agents' test_recurrent_ppo: memory_size 16, learning_rate 1e-3, batch 64, buffer 128, 6000 steps.
    A shared critic reads the actor's LSTM: 16 (8 hidden units) is too small for both heads here."""
    hp = {"learning_rate": 1.0e-3, "batch_size": 64, "buffer_size": 128, "shared_critic": shared_critic}
    # 4 agents acting per call; the shared critic learns too slowly that way (1 of 2 runs not solved at 6000 steps)
    _remembers(tmp_path, _memory_config(tmp_path, "ppo", actions, 6000, hp, memory_size, n_agents=1 if shared_critic else 4))


@pytest.mark.parametrize("actions", ["continuous=1", "discrete=1"])
def test_recurrent_sac_remembers_the_goal(tmp_path: Path, actions: str) -> None:
    """ML-Agents' test_recurrent_sac (memory_size 16, sequence_length 16, learning_rate 1e-3, batch 256,
    4000 steps) with tests/trainers/test_sac.py's hyperparameters: 4 sequences a gradient step, solved in ~300-700 steps."""
    hp = {"learning_rate": 5.0e-3, "batch_size": 64, "buffer_size": 5000, "buffer_init_steps": 100, "tau": 0.01, "init_entcoef": 0.01}
    _remembers(tmp_path, _memory_config(tmp_path, "sac", actions, 2000, hp))


def test_recurrent_poca_remembers_the_goal(tmp_path: Path) -> None:
    """ML-Agents' test_recurrent_poca (memory_size 16, sequence_length 16, learning_rate 1e-3, batch 64,
    buffer 128, 8000 steps); no groups here: the critic values the agent alone, through its LSTM."""
    hp = {"learning_rate": 1.0e-3, "batch_size": 64, "buffer_size": 128}
    _remembers(tmp_path, _memory_config(tmp_path, "poca", "continuous=1", 6000, hp))


def test_sac_resumes_with_the_memories_of_its_saved_replay_buffer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """save_replay_buffer with memory: --resume restores every step's memories and places, and sequences go on from them."""
    restored: list[ReplayBuffer] = []
    original = SACTrainer.load

    def load(trainer: SACTrainer, path: str, resume: bool) -> None:
        original(trainer, path, resume)
        restored.append(copy.deepcopy(trainer.replay))

    monkeypatch.setattr(SACTrainer, "load", load)
    hp = {"batch_size": 32, "buffer_size": 5000, "buffer_init_steps": 50, "steps_per_update": 4, "save_replay_buffer": True}
    config = _memory_config(tmp_path, "sac", "continuous=1", 100, hp)
    TrainerController(build_run_options(copy.deepcopy(config), {}, "test")).start_learning()
    with np.load(tmp_path / "memory" / "GoalReach" / "last_replay_buffer.npz") as data:
        saved = {k: data[k] for k in data.files}
    assert {"memories", "critic_memories", "place", "left"} <= set(saved) and len(saved["rewards"]) >= 100
    assert np.any(saved["memories"] != 0) and np.any(saved["critic_memories"] != 0)
    config["checkpoint_settings"]["resume"] = True
    config["default_settings"]["max_steps"] = 120
    TrainerController(build_run_options(config, {}, "test")).start_learning()
    (buffer,) = restored
    n = len(saved["rewards"])
    assert len(buffer) == n and buffer.memories is not None and buffer.critic_memories is not None
    np.testing.assert_array_equal(buffer.memories[:n].numpy(), saved["memories"])
    np.testing.assert_array_equal(buffer.critic_memories[:n].numpy(), saved["critic_memories"])
    np.testing.assert_array_equal(buffer.place[:n].numpy(), saved["place"])
    starts = buffer.sequence_starts()
    assert len(starts) and np.all(saved["place"][starts.numpy()] % 16 == 0)
