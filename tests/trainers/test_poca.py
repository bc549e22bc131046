"""POCA: the loss pieces against hand values, the groupmate data the worker assembles, an agent
that leaves its group early, and learning on GroupReach (two-agent groups) with continuous and
with discrete actions, in the manner of ML-Agents' test_simple_poca."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from mlagents_envs.base_env import ActionSpec, ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps

from ml_arl.acting.agent_processor import AgentProcessor
from ml_arl.acting.muscle import ActionInfo
from ml_arl.acting.observation_slots import FILE_PREFIX, SharedFiles
from ml_arl.core.behavior_specs import vector_obs_spec
from ml_arl.core.experience import Trajectory
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import POCASettings, TrainerSettings, build_run_options
from ml_arl.trainers.poca.trainer import POCATrainer, clipped_value_loss, group_done, poca_loss
from ml_arl.trainers.returns import lambda_returns
from ml_arl.training.controller import TrainerController
from tests.support import simple_envs
from tests.support.simple_envs import SUCCESS_THRESHOLD, last5, stop_when_groups_solved

SPEC = BehaviorSpec([vector_obs_spec(1)], ActionSpec(1, ()))


# ---------------------------------------------------------------- maths


def test_lambda_returns_by_hand() -> None:
    r = np.array([1.0, 0.0, 2.0], np.float32)
    v = np.array([0.5, 1.0, 3.0], np.float32)
    gamma, lambd, v_next = 0.9, 0.8, 4.0
    g2 = 2.0 + 0.9 * 4.0  # 5.6
    g1 = 0.0 + 0.9 * (0.2 * 3.0 + 0.8 * g2)  # 4.572
    g0 = 1.0 + 0.9 * (0.2 * 1.0 + 0.8 * g1)  # 4.47184
    np.testing.assert_allclose(lambda_returns(r, v, v_next, gamma, lambd), [g0, g1, g2], rtol=1e-6)
    # lambda 1: discounted returns; lambda 0: one-step TD targets
    np.testing.assert_allclose(lambda_returns(r, v, 0.0, 0.5, 1.0), [1.0 + 0.5 * 0 + 0.25 * 2, 1.0, 2.0], rtol=1e-6)
    np.testing.assert_allclose(lambda_returns(r, v, 0.0, 0.5, 0.0), [1.0 + 0.5, 0.0 + 1.5, 2.0], rtol=1e-6)


def test_clipped_value_loss_and_poca_loss_by_hand() -> None:
    est, old, ret = torch.tensor([[1.0], [0.0]]), torch.tensor([[0.0], [0.0]]), torch.tensor([[2.0], [-1.0]])
    # row 0: estimate 1 (error 1), clipped 0.2 (error 3.24) -> 3.24; row 1: estimate 0 -> 1
    assert clipped_value_loss(est, old, ret, 0.2).item() == pytest.approx((3.24 + 1.0) / 2)
    logp, old_logp = torch.log(torch.tensor([1.5, 0.5])), torch.zeros(2)
    adv = torch.tensor([1.0, -1.0])
    # ratios 1.5 and 0.5, clipped to 1.2 and 0.8: surrogates min(1.5, 1.2) = 1.2 and min(-0.5, -0.8) = -0.8
    loss = poca_loss(logp, old_logp, adv, est, torch.zeros(2, 1), old, ret, torch.tensor([1.0, 3.0]), 0.2, 0.01)
    assert loss.policy.item() == pytest.approx(-(1.2 - 0.8) / 2)
    # the value loss is plain, as ML-Agents 1.1.0's (its clip reference is the returns themselves): (1 + 1) / 2;
    # the baseline's is clipped around the stored baselines: errors 2 and 1 (0 is within 0.2 of 0)
    assert loss.value.item() == pytest.approx(1.0)
    assert loss.baseline.item() == pytest.approx((4.0 + 1.0) / 2)
    assert loss.total.item() == pytest.approx(-0.2 + 0.5 * (1.0 + 0.5 * 2.5) - 0.01 * 2.0)


def test_poca_settings_are_ml_agents_defaults() -> None:
    hp = POCASettings()
    assert (hp.batch_size, hp.buffer_size, hp.learning_rate, hp.beta, hp.epsilon, hp.lambd, hp.num_epoch) == (1024, 10240, 3e-4, 5e-3, 0.2, 0.95, 3)
    assert hp.learning_rate_schedule == hp.beta_schedule == hp.epsilon_schedule == "linear"
    assert POCASettings(learning_rate_schedule="constant").epsilon_schedule == "constant"


# ---------------------------------------------------------------- groupmates in the worker


def _decisions(ids: list[int], obs: list[float], groups: list[int], group_reward: float = 0.0) -> DecisionSteps:
    n = len(ids)
    return DecisionSteps([np.array(obs, np.float32).reshape(n, 1)], np.zeros(n, np.float32), np.array(ids, np.int32), None,
                         np.array(groups, np.int32), np.full(n, group_reward, np.float32))


def _terminals(ids: list[int], obs: list[float], groups: list[int], group_reward: float = 0.0) -> TerminalSteps:
    n = len(ids)
    return TerminalSteps([np.array(obs, np.float32).reshape(n, 1)], np.zeros(n, np.float32), np.zeros(n, bool), np.array(ids, np.int32),
                         np.array(groups, np.int32), np.full(n, group_reward, np.float32))


def _acts(actions: list[float]) -> ActionInfo:
    n = len(actions)
    cont = np.array(actions, np.float32).reshape(n, 1)
    disc = np.zeros((n, 0), np.int32)
    return ActionInfo(cont, disc, np.zeros(n, np.float32), np.zeros(n, np.float32), None, ActionTuple(cont, disc))


@pytest.mark.parametrize("shared", [False, True], ids=["heap", "shared"])
def test_groupmates_are_assembled_per_step_and_an_agent_leaving_early_keeps_the_group_value(tmp_path: Path, shared: bool) -> None:
    files = SharedFiles(str(tmp_path / f"{FILE_PREFIX}{os.getpid()}-0-0-"), 2**20) if shared else None  # as in a worker process
    proc = AgentProcessor("B", SPEC, time_horizon=100, worker_id=0, shared=files)
    empty = TerminalSteps.empty(SPEC)
    # agents 1 and 2 in group 7, agent 3 alone (no group)
    proc.add_experiences(_decisions([1, 2, 3], [10, 20, 30], [7, 7, 0]), empty, _acts([0.1, 0.2, 0.3]))
    proc.add_experiences(_decisions([1, 2, 3], [11, 21, 31], [7, 7, 0]), empty, _acts([1.1, 1.2, 1.3]))
    # agent 2 ends early; agent 1 goes on
    proc.add_experiences(_decisions([1, 3], [12, 32], [7, 0]), _terminals([2], [22], [7]), _acts([2.1, 2.3]))
    early = [t for t in proc.take()[0] if t.agent_id == "0-2"]
    assert len(early) == 1 and early[0].done
    g = early[0].groupmates
    assert g is not None and not g.all_done and not group_done(early[0])  # bootstraps from the group's value
    np.testing.assert_array_equal(g.obs[0][:, 0, 0], [10, 11])  # what agent 1 acted on, step by step
    np.testing.assert_array_equal(g.continuous[:, 0, 0], np.array([0.1, 1.1], np.float32))
    assert g.present.all()
    np.testing.assert_array_equal(g.next_obs[0][:, 0], [12])  # agent 1's observation when agent 2 left
    # agent 1 ends with the group: it saw agent 2 leave in its step 1, then no groupmate
    proc.add_experiences(_decisions([3], [33], [0]), _terminals([1], [13], [7], group_reward=1.0), _acts([3.3]))
    trajs = {t.agent_id: t for t in proc.take()[0]}
    last = trajs["0-1"]
    g = last.groupmates
    assert g is not None and g.all_done and group_done(last)
    np.testing.assert_array_equal(g.present[:, 0], [True, True, False])
    np.testing.assert_array_equal(g.obs[0][:2, 0, 0], [20, 21])  # in agent 2's last step it acted on 21 and ended
    np.testing.assert_array_equal(g.continuous[:2, 0, 0], np.array([0.2, 1.2], np.float32))
    assert not g.next_present.any()
    np.testing.assert_array_equal(last.group_rewards, [0, 0, 1])
    assert "0-3" not in trajs
    assert proc.group_status == {} and proc.group_obs == {}


def test_agents_without_a_group_carry_no_groupmates() -> None:
    proc = AgentProcessor("B", SPEC, time_horizon=2, worker_id=0)
    empty = TerminalSteps.empty(SPEC)
    for step in range(3):
        proc.add_experiences(_decisions([1], [step], [0]), empty, _acts([0.0]))
    (traj,) = proc.take()[0]
    assert traj.groupmates is None and group_done(Trajectory(**{**traj._asdict(), "done": True}))


class _Recorder:
    def __init__(self) -> None:
        self.tags: dict[str, float] = {}

    def write_stats(self, category: str, values: dict, step: int) -> None:
        self.tags.update({k: v.mean for k, v in values.items()})

    def close(self) -> None:
        pass


def test_trainer_credits_an_agent_that_left_early_with_its_groups_value_and_writes_ml_agents_tags() -> None:
    proc = AgentProcessor("B", SPEC, time_horizon=100, worker_id=0)
    empty = TerminalSteps.empty(SPEC)
    proc.add_experiences(_decisions([1, 2], [0.5, -0.5], [7, 7]), empty, _acts([0.1, 0.2]))
    proc.add_experiences(_decisions([1], [0.7], [7]), _terminals([2], [-0.7], [7]), _acts([1.1]))
    proc.add_experiences(_decisions([], [], []), _terminals([1], [0.9], [7], group_reward=1.0), _acts([]))
    trajs = {t.agent_id: t for t in proc.take()[0]}
    settings = TrainerSettings(trainer_type="poca", hyperparameters={"batch_size": 3, "buffer_size": 3},
                               network_settings={"hidden_units": 8, "num_layers": 1}, reward_signals={"extrinsic": {"gamma": 0.9}})
    recorder = _Recorder()
    trainer = POCATrainer("B", settings, SPEC, StatsReporter("B", [recorder]), None, torch.device("cpu"))
    early, last = trajs["0-2"], trajs["0-1"]
    for traj in (early, last):
        trainer.add_experience(traj)
    data = trainer._batch()
    g = early.groupmates
    assert g is not None
    with torch.no_grad():
        group_value = trainer.critic.values([torch.as_tensor(early.next_obs[0])[None]], [torch.as_tensor(g.next_obs[0])[None]],
                                            torch.as_tensor(g.next_present)[None])[0, 0].item()
    returns = data.returns[:, 0].numpy()
    assert returns[0] == pytest.approx(0.0 + 0.9 * group_value, abs=1e-5)  # agent 2's only step: the group's value follows
    assert returns[2] == pytest.approx(1.0, abs=1e-6)  # agent 1's last step: the group ended, its group reward only
    assert trainer.ready_to_update()
    trainer.update()
    trainer.write_summary(1)
    for tag in ("Losses/Policy Loss", "Losses/Value Loss", "Losses/Baseline Loss", "Policy/Learning Rate", "Policy/Epsilon",
                "Policy/Beta", "Policy/Extrinsic Value Estimate", "Policy/Extrinsic Baseline Estimate",
                "Environment/Group Cumulative Reward"):
        assert tag in recorder.tags, (tag, sorted(recorder.tags))
    assert recorder.tags["Environment/Group Cumulative Reward"] == 1.0  # agent 1's only: agent 2 left before the group ended


def test_group_cumulative_reward_forgets_an_episode_a_reset_cut_off() -> None:
    """Agents 1 and 2 of group 7 get group rewards 1 + 1 in a trajectory cut at the time horizon; an
    environment reset then drops their episode; in the next one the group gets 0.5 and ends. The
    tag (and the extrinsic stream's episode sum) counts the new episode only, as ML-Agents zeroes
    both when the environments reset."""
    proc = AgentProcessor("B", SPEC, time_horizon=2, worker_id=0)
    empty = TerminalSteps.empty(SPEC)
    for step in range(3):
        proc.add_experiences(_decisions([1, 2], [step, -step], [7, 7], group_reward=1.0 if step else 0.0), empty, _acts([0.1, 0.2]))
    cut = proc.take()[0]
    assert len(cut) == 2 and all(t.episode_start and not t.done for t in cut)
    np.testing.assert_array_equal(cut[0].group_rewards, [1, 1])
    proc.end_episodes()  # the environment resets: the half-built episode is dropped
    proc.add_experiences(_decisions([1, 2], [0, 0], [7, 7]), empty, _acts([0.3, 0.4]))
    proc.add_experiences(_decisions([], [], []), _terminals([1, 2], [1, -1], [7, 7], group_reward=0.5), _acts([]))
    new = proc.take()[0]
    assert len(new) == 2 and all(t.episode_start and t.done and group_done(t) for t in new)
    settings = TrainerSettings(trainer_type="poca", hyperparameters={"batch_size": 8, "buffer_size": 8},
                               network_settings={"hidden_units": 8, "num_layers": 1})
    recorder = _Recorder()
    trainer = POCATrainer("B", settings, SPEC, StatsReporter("B", [recorder]), None, torch.device("cpu"))
    for traj in cut + new:
        trainer.add_experience(traj)
    trainer.write_summary(1)
    assert recorder.tags["Environment/Group Cumulative Reward"] == 0.5  # not 2.5: the dropped episode's 2 is gone
    assert recorder.tags["Policy/Extrinsic Reward"] == 0.5
    assert dict(trainer.group_rewards) == {}


# ---------------------------------------------------------------- learning


def _train(tmp_path: Path, variant: str) -> tuple[TrainerController, list[float]]:
    config = {
        "env_settings": {"env_path": "tests.support.simple_envs:group_reach", "env_args": [f"variant={variant}", "n_groups=4"],
                         "manager": "inprocess", "seed": SEED},
        "checkpoint_settings": {"results_dir": str(tmp_path), "run_id": "poca"},
        "default_settings": {
            "trainer_type": "poca",
            # ML-Agents' poca_dummy_config, with more agents per update for speed
            "hyperparameters": {"learning_rate": 5e-3, "learning_rate_schedule": "constant", "batch_size": 64, "buffer_size": 256},
            "network_settings": {"hidden_units": 32, "num_layers": 1},
            "max_steps": MAX_STEPS[variant],
            "time_horizon": 64,
            "summary_freq": 1000,
            "checkpoint_interval": 100000,
        },
        "behaviors": {},
    }
    simple_envs.GROUP_REACH_ENVS.clear()
    # the run ends once the last 20 agents all succeeded (successes are +-1.06), or at MAX_STEPS
    controller = TrainerController(build_run_options(config, {}, "test"), callbacks=stop_when_groups_solved(1.0))
    controller.start_learning()
    (env,) = simple_envs.GROUP_REACH_ENVS
    return controller, env.final_rewards


SEED = 1
MAX_STEPS = {"continuous": 6000, "discrete": 6000}


@pytest.mark.parametrize("variant", ["continuous", "discrete"])
def test_poca_learns_group_reach(tmp_path: Path, variant: str) -> None:
    started = time.perf_counter()
    _, final = _train(tmp_path, variant)
    assert last5(final) > SUCCESS_THRESHOLD, final[-20:]
    print(f"POCA {variant}: {time.perf_counter() - started:.1f} s, {len(final)} agent episodes")


@pytest.mark.parametrize("memory", [False, True], ids=["flat", "memory"])
def test_poca_trains_its_learned_reward_signals_on_the_update_minibatches(memory: bool) -> None:
    """As ML-Agents' POCA (and PPO here): curiosity learns from the same minibatches as the policy,
    with an LSTM too (the padding of the sequences left out), and reports its loss tags."""
    proc = AgentProcessor("B", SPEC, time_horizon=3, worker_id=0)
    empty = TerminalSteps.empty(SPEC)
    def acts(actions: list[float]) -> ActionInfo:
        info = _acts(actions)
        return info._replace(memory=np.zeros((len(actions), 8), np.float32)) if memory else info

    for step in range(7):
        proc.add_experiences(_decisions([1, 2], [0.1 * step, -0.1 * step], [7, 7]), empty, acts([0.3, -0.2]))
    proc.add_experiences(_decisions([], [], []), _terminals([1, 2], [1.0, 0.5], [7, 7], group_reward=1.0), acts([]))
    trajs = proc.take()[0]
    network: dict[str, object] = {"hidden_units": 8, "num_layers": 1}
    if memory:
        network["memory"] = {"sequence_length": 2, "memory_size": 8}
    settings = TrainerSettings(
        trainer_type="poca", hyperparameters={"batch_size": 4, "buffer_size": 8}, network_settings=network,
        reward_signals={"extrinsic": {"gamma": 0.9}, "curiosity": {"gamma": 0.9, "strength": 0.1, "encoding_size": 8}},
    )
    recorder = _Recorder()
    trainer = POCATrainer("B", settings, SPEC, StatsReporter("B", [recorder]), None, torch.device("cpu"))
    curiosity = trainer.streams.learned["curiosity"]
    before = [p.detach().clone() for p in curiosity.parameters()]
    for traj in trajs:
        trainer.add_experience(traj)
    assert trainer.ready_to_update()
    trainer.update()
    trainer.write_summary(1)
    assert any(not torch.equal(a, b) for a, b in zip(before, curiosity.parameters()))
    for tag in ("Losses/Curiosity Forward Loss", "Losses/Curiosity Inverse Loss", "Policy/Curiosity Reward"):
        assert tag in recorder.tags, (tag, sorted(recorder.tags))


def test_poca_takes_ppos_gradient_clipping_key() -> None:
    from ml_arl.settings import TrainerSettings

    settings = TrainerSettings.model_validate({"trainer_type": "poca", "hyperparameters": {"max_grad_norm": 0.5}})
    assert settings.hyperparameters.max_grad_norm == 0.5
