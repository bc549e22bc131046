"""--num-learners (ml_arl.trainers.learner_group): two gloo learners make the update one learner
makes on the whole buffer; a learner that dies ends the update with one line naming it; what
the group cannot train yet is a config error; CartPole solves with two learners."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, ObservationSpec, ObservationType
from mlagents_envs.base_env import DimensionProperty as D

import ml_arl
from ml_arl.core.exceptions import ConfigError, LearnerError
from ml_arl.core.experience import Trajectory
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import build_run_options
from ml_arl.trainers.learner_group import LearnerGroup
from ml_arl.trainers.ppo.trainer import PPOTrainer
from tests.support.runs import ROOT, scalars

SPEC = BehaviorSpec([ObservationSpec((5,), (D.NONE,), ObservationType.DEFAULT, "v")], ActionSpec(2, (3,)))


def _trajectories(seed: int, count: int = 8, steps: int = 16) -> list[Trajectory]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        out.append(Trajectory(
            behavior="B", agent_id=f"0-{k}", obs=[rng.normal(size=(steps, 5)).astype(np.float32)],
            next_obs=[rng.normal(size=(5,)).astype(np.float32)], continuous=rng.normal(size=(steps, 2)).astype(np.float32),
            discrete=rng.integers(0, 3, size=(steps, 1)).astype(np.int32), allowed=np.ones((steps, 3), bool),
            log_prob=rng.normal(-1.5, 0.3, size=(steps, 3)).astype(np.float32), rewards=rng.normal(size=steps).astype(np.float32),
            group_rewards=np.zeros(steps, np.float32), group_id=0, done=k % 3 == 0, interrupted=False, policy_version=0,
        ))
    return out


def _trainer(**hyperparameters: Any) -> PPOTrainer:
    section = {"hyperparameters": {"batch_size": 128, "buffer_size": 128, "num_epoch": 3, "max_grad_norm": 0.5, **hyperparameters},
               "network_settings": {"hidden_units": 16, "num_layers": 2, "normalize": True}}
    settings = build_run_options({"behaviors": {"B": section}}, {}, "test").behaviors["B"]
    torch.manual_seed(0)
    return PPOTrainer("B", settings, SPEC, StatsReporter("B", []), None, torch.device("cpu"), seed=3)


def _parameters(trainer: PPOTrainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.network.parameters()]


def updates_match(single: PPOTrainer, grouped: PPOTrainer, group: LearnerGroup) -> None:
    """Two updates of the same trajectories: ``single`` alone, ``grouped`` with ``group``; the
    parameters agree to float tolerance after each."""
    grouped.learners = group
    for seed in (1, 2):
        for traj in _trajectories(seed):
            single.add_experience(traj)
            grouped.add_experience(traj)
        single.update()
        grouped.update()
        for a, b in zip(_parameters(single), _parameters(grouped)):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_two_learners_make_the_update_one_learner_makes(tmp_path: Path) -> None:
    """Two updates, each of three epochs over one minibatch: one learner on the 128 rows, or two
    learners on 64 each with their gradients averaged. Gradient clipping is on (after the average)."""
    single, grouped = _trainer(), _trainer()
    start = _parameters(single)
    for a, b in zip(start, _parameters(grouped)):
        assert torch.equal(a, b)
    group = LearnerGroup(2, str(tmp_path))
    try:
        updates_match(single, grouped, group)
    finally:
        group.close()
    assert max(float((a - b).abs().max()) for a, b in zip(start, _parameters(single))) > 1e-3  # they did learn
    assert all(p.poll() == 0 for p in group.procs)  # the learner stopped when asked


def test_a_learner_that_dies_ends_the_update_with_one_line(tmp_path: Path) -> None:
    """Its exit is seen before the next scatter, at once: gloo's broadcast to a SIGKILLed learner once
    waited out a test's 240 s deadline."""
    import time

    trainer = _trainer()
    group = LearnerGroup(2, str(tmp_path))
    trainer.learners = group
    try:
        for traj in _trajectories(1):
            trainer.add_experience(traj)
        trainer.update()  # the group works
        os.kill(group.procs[0].pid, signal.SIGKILL)
        group.procs[0].wait(30)
        for traj in _trajectories(2):
            trainer.add_experience(traj)
        began = time.monotonic()
        with pytest.raises(LearnerError) as err:
            trainer.update()
        assert time.monotonic() - began < 30
    finally:
        group.close()
    text = str(err.value)
    assert "learner 1 stopped before its shard" in text and "killed by signal 9" in text and "learner-1.log" in text
    assert "\n" not in text


def test_learners_outlive_a_wait_for_an_update_longer_than_the_collective_timeout(tmp_path: Path) -> None:
    """A learner waits for its next message inside a gloo collective, which fails after the
    group's timeout (600 s in a run; 10 s here): updates further apart than that (a large buffer, a
    slow environment, a phase that does not train) would end the run. Rank 0 sends a KeepAlive
    whenever it has sent nothing for keepalive_s, so the second update, 12 s after the first,
    still finds the learner. (Without them the learner's wait fails: its collective times out.)"""
    import time

    trainer = _trainer()
    group = LearnerGroup(2, str(tmp_path), timeout_s=10.0, keepalive_s=1.0)
    trainer.learners = group
    try:
        for traj in _trajectories(1):
            trainer.add_experience(traj)
        trainer.update()
        began, deadline = time.monotonic(), time.monotonic() + 120.0
        # the state waited for: the gap past the learner's timeout, and keep-alives sent within it
        while time.monotonic() - began < 12.0 or group.keepalives < 5:
            assert time.monotonic() < deadline, f"{group.keepalives} keep-alives in 120 s"
            time.sleep(0.1)
        assert group.keepalives >= 5
        for traj in _trajectories(2):
            trainer.add_experience(traj)
        trainer.update()
    finally:
        group.close()
    assert all(p.poll() == 0 for p in group.procs), (tmp_path / "learner-1.log").read_text()


def test_what_the_group_cannot_train_yet_is_one_config_error(tmp_path: Path) -> None:
    config = {"env_settings": {"env_path": "builtin:Reach", "num_envs": 1},
              "behaviors": {"Reach": {"network_settings": {"memory": {"memory_size": 8}}}}}
    with pytest.raises(ConfigError, match="behaviors.Reach: --num-learners > 1 does not support network_settings.memory"):
        ml_arl.train(config, run_id="poca", results_dir=str(tmp_path), num_learners=2)
    assert not (tmp_path / "memory" / "Reach").exists()


@pytest.mark.slow
def test_cartpole_solves_with_two_learners(tmp_path: Path) -> None:
    """--deterministic (with --num-learners: the workers in lockstep, the trainer in the main loop,
    the group's all-reduce in a fixed order), so the run is the same on a slow machine and a fast one.
    The run stops once the last 20 returns average 475 (seed 1: at about 20,000 of its 50,000 steps;
    every summary from 20,000 to 50,000 read 500 when it trained on)."""
    config = yaml.safe_load((ROOT / "config" / "ppo" / "CartPole.yaml").read_text())
    config["behaviors"]["CartPole"].update({"max_steps": 50000, "summary_freq": 2500})
    solved = ml_arl.StopOnReward("CartPole", threshold=475, window=20)
    run = ml_arl.train(config, run_id="cartpole-2", results_dir=str(tmp_path), num_learners=2, seed=1, deterministic=True,
                       callbacks=[solved])
    assert solved.reached_at is not None and solved.mean is not None and solved.mean >= 475, list(solved.returns)
    assert run.steps["CartPole"] < 50000
    assert (tmp_path / "cartpole-2" / "run_logs" / "learner-1.log").is_file()


@pytest.mark.slow
def test_a_learner_killed_mid_run_ends_it_and_resume_continues(tmp_path: Path) -> None:
    """SIGKILL a learner once a checkpoint is saved: the run exits 1 with one error line naming the
    learner; the checkpoint is whole, and --resume with two learners goes on from it to the end."""
    import re

    from tests.support.runs import arl_learn, arl_learn_watched, tiny_config, write_config

    config = tiny_config("builtin:Reach", max_steps=12000, checkpoint_interval=2000, summary_freq=2000)
    path = write_config(tmp_path / "reach.yaml", config)
    args = [path, "--run-id", "killed", "--results-dir", tmp_path / "results", "--num-learners", "2", "--seed", "2"]
    log = tmp_path / "results" / "killed" / "run_logs" / "learner-1.log"
    killed: list[int] = []

    def kill_learner(line: str) -> None:
        if "Saved checkpoint" in line and not killed:
            pid = int(re.search(r"pid (\d+)", log.read_text()).group(1))  # type: ignore[union-attr]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    first = arl_learn_watched(args, ROOT, on_line=kill_learner)
    assert killed and first.returncode == 1, first.stdout
    errors = [line for line in first.stdout.splitlines() if line.startswith("[ERROR]")]
    assert len(errors) == 1 and "learner 1 stopped" in errors[0] and "killed by signal 9" in errors[0], first.stdout
    assert "Traceback" not in first.stdout
    saved = sorted((tmp_path / "results" / "killed" / "Reach").glob("Reach-*.pt"))
    assert saved
    torch.load(saved[-1], weights_only=True)  # whole
    second = arl_learn([*args, "--resume"], ROOT, timeout=240)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Resum" in second.stdout + second.stderr
    assert (tmp_path / "results" / "killed" / "Reach.onnx").is_file()


DISCRETE = BehaviorSpec([ObservationSpec((5,), (D.NONE,), ObservationType.DEFAULT, "v")], ActionSpec(0, (3, 2)))


def _sac() -> Any:
    from ml_arl.trainers.sac.trainer import SACTrainer

    section = {"trainer_type": "sac",
               "hyperparameters": {"batch_size": 64, "buffer_size": 1000, "buffer_init_steps": 0, "steps_per_update": 10},
               "network_settings": {"hidden_units": 16, "num_layers": 2, "normalize": True}}
    settings = build_run_options({"behaviors": {"B": section}}, {}, "test").behaviors["B"]
    torch.manual_seed(0)
    return SACTrainer("B", settings, DISCRETE, StatsReporter("B", []), None, torch.device("cpu"), seed=3)


def discrete_trajectories(seed: int) -> list[Trajectory]:
    """_trajectories for DISCRETE: no continuous action, two branches of two."""
    return [Trajectory(**{**t._asdict(), "continuous": np.zeros((16, 0), np.float32),
                          "discrete": t.discrete.repeat(2, axis=1) % 2, "allowed": np.ones((16, 5), bool)})
            for t in _trajectories(seed, count=8, steps=16)]


def _sac_parameters(trainer: Any) -> list[torch.Tensor]:
    modules = (trainer.network, trainer.q1, trainer.q2, trainer.value_net, trainer.target_net)
    return [p.detach().clone() for m in modules for p in m.parameters()] + [a.detach().clone() for a in trainer.alphas.parameters()]


def test_two_sac_learners_take_the_gradient_steps_one_learner_takes(tmp_path: Path) -> None:
    """Rank 0 draws each due minibatch of 64 rows as one learner draws it; two learners take each
    step on 32 rows each. Discrete actions: the actor's loss needs no sampled noise, so the two
    runs draw nothing else at random (continuous SAC samples its noise on each learner)."""
    single, grouped = _sac(), _sac()
    group = LearnerGroup(2, str(tmp_path))
    grouped.learners = group
    start = _sac_parameters(single)
    try:
        for round_ in (1, 2):
            for traj in discrete_trajectories(round_):
                single.add_experience(traj)
                grouped.add_experience(traj)
            single.step = grouped.step = 128 * round_
            single.update()
            grouped.update()
            assert single.update_steps == grouped.update_steps > 1
            for a, b in zip(_sac_parameters(single), _sac_parameters(grouped)):
                torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    finally:
        group.close()
    assert max(float((a - b).abs().max()) for a, b in zip(start, _sac_parameters(single)) if a.numel()) > 1e-3


@pytest.mark.slow
def test_sac_reach_learns_with_two_learners(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "config" / "sac" / "Reach.yaml").read_text())
    run = ml_arl.train(config, run_id="sac-2", results_dir=str(tmp_path), num_learners=2, seed=1)
    assert run.steps["Reach"] >= 8000
    rewards = [value for _step, value in scalars(tmp_path / "sac-2" / "Reach", "Environment/Cumulative Reward")]
    assert rewards[-1] >= 0.9, rewards  # 0.96 with seed 1, as with one learner


def _poca() -> Any:
    from ml_arl.trainers.poca.trainer import POCATrainer

    section = {"trainer_type": "poca", "hyperparameters": {"batch_size": 4096, "buffer_size": 4096, "num_epoch": 2, "max_grad_norm": 0.5},
               "network_settings": {"hidden_units": 16, "num_layers": 1}}
    settings = build_run_options({"behaviors": {"GroupReach": section}}, {}, "test").behaviors["GroupReach"]
    from ml_arl.envs.games.builtin import GroupReach

    torch.manual_seed(0)
    return POCATrainer("GroupReach", settings, GroupReach("continuous", seed=0).spec, StatsReporter("GroupReach", []), None,
                       torch.device("cpu"), seed=3)


def test_two_poca_learners_make_the_update_one_learner_makes(tmp_path: Path) -> None:
    """Trajectories with groupmates from the built-in GroupReach, acted by the trainer's first
    policy; one minibatch of the whole buffer per epoch (an even number of rows, half on each learner)."""
    from ml_arl.acting.env_runner import EnvRunner
    from ml_arl.envs.games.builtin import GroupReach
    from ml_arl.training.policy_message import policy_message

    single, grouped = _poca(), _poca()
    runner = EnvRunner(GroupReach("continuous", seed=0), 0, 0)
    runner.set_policy("GroupReach", policy_message(single.policy_snapshot(), single.settings, None, collect=True))
    trajectories: list[Trajectory] = []
    while sum(len(t) for t in trajectories) < 128:
        trajectories += runner.run(16).trajectories
    assert any(t.groupmates is not None for t in trajectories)
    if sum(len(t) for t in trajectories) % 2:  # equal shards: leave out one trajectory of an odd length
        trajectories.remove(next(t for t in trajectories if len(t) % 2))
    group = LearnerGroup(2, str(tmp_path))
    grouped.learners = group
    start = [p.detach().clone() for p in single.optimizer.params]
    try:
        for traj in trajectories:
            single.add_experience(traj)
            grouped.add_experience(traj)
        single.update()
        grouped.update()
        for a, b in zip(single.optimizer.params, grouped.optimizer.params):
            torch.testing.assert_close(a.detach(), b.detach(), atol=1e-5, rtol=1e-4)
    finally:
        group.close()
    assert max(float((a - b.detach()).abs().max()) for a, b in zip(start, single.optimizer.params) if a.numel()) > 1e-4


@pytest.mark.slow
def test_poca_group_reach_learns_with_two_learners(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "config" / "poca" / "GroupReach.yaml").read_text())
    run = ml_arl.train(config, run_id="poca-2", results_dir=str(tmp_path), num_learners=2, seed=1)
    assert run.steps["GroupReach"] >= 8000
    rewards = [value for _step, value in scalars(tmp_path / "poca-2" / "GroupReach", "Environment/Group Cumulative Reward")]
    assert rewards and rewards[-1] >= 0.9, rewards  # 1.06 with seed 1, as with one learner


class _Work:
    """An asynchronous collective as gloo's Work answers wait(timeout): timed out ``slices`` times, then done."""

    def __init__(self, slices: int, error: str = "") -> None:
        self.slices, self.error, self.waits = slices, error, 0

    def wait(self, timeout: Any = None) -> None:
        self.waits += 1
        if self.error:
            raise RuntimeError(self.error)
        if self.waits <= self.slices:
            raise RuntimeError("[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Operation timed out!")


def test_rank_0_checks_its_learners_between_slices_of_a_collective_wait() -> None:
    """learner_collectives.finish: without a check one plain wait; with one, timed-out slices run the check
    (a gone learner ends the wait with its error) until the collective is done; gloo's own errors pass at once."""
    from ml_arl.trainers.learner_collectives import finish

    plain = _Work(0)
    finish(plain, None)
    assert plain.waits == 1
    checks: list[int] = []
    work = _Work(3)
    finish(work, lambda: checks.append(1))
    assert work.waits == 4 and len(checks) == 3

    def gone() -> None:
        raise LearnerError("learner 1 stopped during an update (killed by signal 9)")

    with pytest.raises(LearnerError, match="learner 1 stopped during an update"):
        finish(_Work(5), gone)
    with pytest.raises(RuntimeError, match="Connection closed by peer"):
        finish(_Work(0, "Connection closed by peer [127.0.0.1]:1234"), gone)
    with pytest.raises(RuntimeError, match="timed out"):  # past the deadline: the timeout itself is the error
        finish(_Work(10), lambda: None, timeout_s=0.0)

