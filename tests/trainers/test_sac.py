"""SAC: the losses and the soft update against hand values, the replay buffer, and learning on
ML-Agents-style goal-reaching tasks with ML-Agents' own SAC test hyperparameters (batch 8,
buffer_init_steps 100, tau 0.01, init_entcoef 0.01, learning rate 5e-3, one layer of 16 units;
success = the mean of the last 5 episode returns above 0.9, 0.8 in 2-D)."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest
import torch
from mlagents_envs.base_env import ActionSpec, BehaviorSpec
from torch import nn

from ml_arl.core.behavior_specs import vector_obs_spec
from ml_arl.core.experience import Trajectory
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import build_run_options
from ml_arl.trainers.optimizers import Adam
from ml_arl.trainers.sac.networks import soft_update
from ml_arl.trainers.sac.replay_buffer import ReplayBatch, ReplayBuffer
from ml_arl.trainers.sac.trainer import REPLAY_BUFFER_FILE, SACTrainer, condense_q, sac_losses
from ml_arl.training.controller import TrainerController
from tests.support.runs import arl_learn_here, tiny_config, write_config
from tests.support.simple_envs import SUCCESS_THRESHOLD, last5, stop_when_solved

# ------------------------------------------------------------------ maths


def test_soft_update_by_hand() -> None:
    source, target = nn.Linear(2, 1), nn.Linear(2, 1)
    with torch.no_grad():
        source.weight.fill_(1.0)
        source.bias.fill_(2.0)
        target.weight.fill_(0.0)
        target.bias.fill_(-2.0)
    soft_update(source, target, 0.25)
    assert torch.allclose(target.weight, torch.full((1, 2), 0.25))
    assert torch.allclose(target.bias, torch.tensor([-1.0]))  # 0.25 * 2 + 0.75 * -2


def _continuous_case() -> dict[str, Any]:
    # two experiences, one stream, one continuous action
    return dict(
        q1=torch.tensor([[1.0], [2.0]]), q2=torch.tensor([[1.5], [1.0]]),
        target_values=torch.tensor([[3.0], [4.0]]), rewards=torch.tensor([[1.0], [0.0]]),
        dones=torch.tensor([0.0, 1.0]), gammas=torch.tensor([0.5]), use_dones=torch.tensor([1.0]),
        values=torch.tensor([[2.0], [0.0]], requires_grad=True),
        q1_policy=torch.tensor([[[2.0]], [[1.0]]], requires_grad=True), q2_policy=torch.tensor([[[3.0]], [[0.5]]]),
        cont_log_probs=torch.tensor([[-1.0], [-2.0]], requires_grad=True), disc_log_probs=None, branches=(),
        log_alpha_cont=torch.tensor([math.log(0.5)], requires_grad=True), log_alpha_disc=None,
        target_entropy_cont=-1.0, target_entropy_disc=None,
    )


def test_sac_losses_continuous_by_hand() -> None:
    loss = sac_losses(**_continuous_case())
    loss = type(loss)(*(t.detach() for t in loss))
    # backups: 1 + 0.5 * 3 = 2.5; 0 + 0 (done) = 0
    assert float(loss.q1) == pytest.approx(0.5 * ((2.5 - 1.0) ** 2 + (0 - 2.0) ** 2) / 2)
    assert float(loss.q2) == pytest.approx(0.5 * ((2.5 - 1.5) ** 2 + (0 - 1.0) ** 2) / 2)
    # V targets: min(Q1, Q2) of the policy's action - alpha * log pi = 2 + 0.5 = 2.5; 0.5 + 1 = 1.5
    assert float(loss.value) == pytest.approx(0.5 * ((2.0 - 2.5) ** 2 + (0.0 - 1.5) ** 2) / 2)
    # policy: mean(alpha * log pi - Q1) = mean(-0.5 - 2, -1 - 1)
    assert float(loss.policy) == pytest.approx(((-0.5 - 2.0) + (-1.0 - 1.0)) / 2)
    # entropy: -mean(log alpha * (log pi + target)) = -log 0.5 * mean(-2, -3)
    assert float(loss.entropy) == pytest.approx(-math.log(0.5) * (-2.5))


def test_sac_policy_loss_weighs_the_joint_log_density_of_several_dimensions() -> None:
    # three action dimensions: alpha multiplies the sum of their log-densities (ML-Agents'
    # sac_policy_loss), the same entropy the value target and alpha's loss use
    case = _continuous_case()
    case.update(cont_log_probs=torch.tensor([[-1.0, -0.5, 0.5], [-2.0, 1.0, 0.0]], requires_grad=True), target_entropy_cont=-3.0)
    loss = sac_losses(**case)
    loss = type(loss)(*(t.detach() for t in loss))
    assert float(loss.policy) == pytest.approx(((0.5 * -1.0 - 2.0) + (0.5 * -1.0 - 1.0)) / 2)
    assert float(loss.value) == pytest.approx(0.5 * ((2.0 - (2.0 + 0.5)) ** 2 + (0.0 - (0.5 + 0.5)) ** 2) / 2)


def test_squashed_log_density_keeps_its_gradient_where_tanh_saturates() -> None:
    from ml_arl.networks.distributions import ActionDistribution

    mu = torch.tensor([[0.0, 12.0]], requires_grad=True)
    dist = ActionDistribution(mu, torch.ones(1, 2), [], tanh_squash=True)
    torch.manual_seed(0)
    raw = dist.normal.sample()
    torch.manual_seed(0)
    action, log_probs = dist.sample_continuous()
    exact = torch.distributions.Normal(mu, 1.0).log_prob(raw) - torch.log1p(-torch.tanh(raw).double() ** 2).float()
    assert torch.allclose(log_probs[:, 0], exact[:, 0], atol=1e-5)
    log_probs.sum().backward()
    # d/du of -log(1 - tanh(u)^2) is 2 tanh(u): about 2 at u = 12, where tanh(u) is 1 in float32
    assert mu.grad is not None and float(mu.grad[0, 1]) == pytest.approx(2.0, abs=1e-3)


def test_sac_losses_ignore_done_streams_bootstrap() -> None:
    case = _continuous_case()
    case.update(use_dones=torch.tensor([0.0]))  # curiosity and RND: the episode end does not cut the backup
    loss = sac_losses(**case)
    assert float(loss.q1) == pytest.approx(0.5 * ((2.5 - 1.0) ** 2 + (2.0 - 2.0) ** 2) / 2)


def test_sac_losses_discrete_by_hand() -> None:
    # one experience, one stream, one branch of two actions with probabilities 0.25 / 0.75
    log_p = torch.log(torch.tensor([[0.25, 0.75]]))
    q1_policy = torch.tensor([[[1.0, 3.0]]])
    q2_policy = torch.tensor([[[2.0, 2.0]]])
    alpha = 0.5
    loss = sac_losses(
        q1=torch.tensor([[1.0]]), q2=torch.tensor([[1.0]]), target_values=torch.tensor([[0.0]]),
        rewards=torch.tensor([[1.0]]), dones=torch.tensor([0.0]), gammas=torch.tensor([0.9]),
        use_dones=torch.tensor([1.0]), values=torch.tensor([[0.0]]), q1_policy=q1_policy, q2_policy=q2_policy,
        cont_log_probs=None, disc_log_probs=log_p, branches=(2,), log_alpha_cont=None,
        log_alpha_disc=torch.tensor([math.log(alpha)]), target_entropy_cont=0.0,
        target_entropy_disc=torch.tensor([0.2 * math.log(2)]),
    )
    p = np.array([0.25, 0.75])
    neg_entropy = float(np.sum(p * np.log(p)))
    expected_q1, expected_q2 = float(p @ [1.0, 3.0]), float(p @ [2.0, 2.0])
    v_backup = min(expected_q1, expected_q2) - alpha * neg_entropy
    assert float(loss.value) == pytest.approx(0.5 * v_backup**2)
    assert float(loss.q1) == pytest.approx(0.0)  # backup 1 + 0.9 * 0 = 1 = Q
    assert float(loss.policy) == pytest.approx(alpha * neg_entropy - expected_q1)
    assert float(loss.entropy) == pytest.approx(-math.log(alpha) * (neg_entropy + 0.2 * math.log(2)))


def test_condense_q_picks_the_taken_action_and_averages_branches() -> None:
    q = torch.tensor([[[1.0, 2.0, 10.0, 20.0, 30.0]]])  # one stream, branches of 2 and 3 actions
    picked = condense_q(q, torch.tensor([[1, 2]]), (2, 3))
    assert picked.tolist() == [[(2.0 + 30.0) / 2]]


def test_replay_buffer_next_obs_dones_and_ring(tmp_path: Path) -> None:
    buf = ReplayBuffer(5, [(1,)], 1, (), torch.device("cpu"))

    def traj(start: float, n: int, done: bool, interrupted: bool = False) -> Trajectory:
        obs = np.arange(start, start + n, dtype=np.float32).reshape(n, 1)
        return Trajectory("B", "0-0", [obs], [np.array([start + n], np.float32)], np.zeros((n, 1), np.float32),
                          np.zeros((n, 0), np.int32), None, np.zeros(n, np.float32), np.ones(n, np.float32),
                          np.zeros(n, np.float32), 0, done, interrupted, 0)

    buf.add(traj(0, 3, done=True))
    assert buf.next_obs[0][:3, 0].tolist() == [1.0, 2.0, 3.0]
    assert buf.dones[:3].tolist() == [0.0, 0.0, 1.0]
    buf.add(traj(10, 3, done=True, interrupted=True))  # a max-step cut bootstraps: no done
    assert len(buf) == 5 and buf.dones.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]
    assert buf.obs[0][:, 0].tolist() == [12.0, 1.0, 2.0, 10.0, 11.0]  # the oldest was overwritten
    path = tmp_path / "buffer.npz"
    buf.save(str(path))
    copy = ReplayBuffer(5, [(1,)], 1, (), torch.device("cpu"))
    copy.load(str(path))
    assert len(copy) == 5 and sorted(copy.obs[0][:, 0].tolist()) == sorted(buf.obs[0][:, 0].tolist())
    wrong = ReplayBuffer(5, [(2,)], 1, (), torch.device("cpu"))
    wrong.load(str(path))  # another behavior's shapes: a warning, and it starts empty
    assert len(wrong) == 0



def _damaged_buffer_files(good: bytes) -> dict[str, bytes]:
    def npz(**arrays: np.ndarray) -> bytes:
        out = io.BytesIO()
        np.savez(out, **arrays)
        return out.getvalue()

    with np.load(io.BytesIO(good)) as data:
        arrays = {k: data[k] for k in data.files}
    header = bytearray(good)
    start = good.index(b"{'descr'")
    header[start : start + 12] = b"\xff" * 12  # a damaged .npy header inside the zip
    return {
        "empty": b"",
        "truncated": good[: len(good) // 2],
        "garbage": b"not a replay buffer" * 10,
        "npy-header": bytes(header),
        "lengths-differ": npz(**{**arrays, "rewards": arrays["rewards"][:2]}),
        "scalar": npz(**{**arrays, "rewards": np.zeros((), np.float32)}),
        "strings": npz(**{**arrays, "obs_0": arrays["obs_0"].astype(str)}),
    }


def test_replay_buffer_damaged_files_leave_it_empty(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    buf = ReplayBuffer(8, [(1,)], 1, (), torch.device("cpu"))
    n = 3
    buf.add(Trajectory("B", "0-0", [np.ones((n, 1), np.float32)], [np.ones(1, np.float32)], np.zeros((n, 1), np.float32),
                       np.zeros((n, 0), np.int32), None, np.zeros(n, np.float32), np.ones(n, np.float32),
                       np.zeros(n, np.float32), 0, True, False, 0))
    buf.save(str(tmp_path / "good.npz"))
    for name, data in _damaged_buffer_files((tmp_path / "good.npz").read_bytes()).items():
        path = tmp_path / f"{name}.npz"
        path.write_bytes(data)
        copy = ReplayBuffer(8, [(1,)], 1, (), torch.device("cpu"))
        caplog.clear()
        copy.load(str(path))  # never raises
        assert len(copy) == 0, name
        assert f"{path}: replay buffer not restored" in caplog.text, (name, caplog.text)
# ------------------------------------------------------------------ the gradient step


def _trainer(n_cont: int, branches: tuple[int, ...], normalize: bool = True) -> SACTrainer:
    """A small SAC trainer with 300 random experiences; the same weights for the same torch seed."""
    options = build_run_options({"behaviors": {"B": {
        "trainer_type": "sac", "hyperparameters": {"batch_size": 32, "learning_rate": 3e-3, "tau": 0.05},
        "network_settings": {"hidden_units": 16, "num_layers": 2, "normalize": normalize},
    }}}, {}, "test")
    spec = BehaviorSpec([vector_obs_spec(3)], ActionSpec(n_cont, branches))
    torch.manual_seed(0)
    trainer = SACTrainer("B", options.behaviors["B"], spec, StatsReporter("B", []), None, torch.device("cpu"), seed=3)
    rng = np.random.default_rng(0)
    n = 300
    discrete = np.stack([rng.integers(0, b, n) for b in branches], 1).astype(np.int32) if branches else np.zeros((n, 0), np.int32)
    trainer.add_experience(Trajectory(
        "B", "0-0", [rng.standard_normal((n, 3)).astype(np.float32)], [np.zeros(3, np.float32)],
        np.tanh(rng.standard_normal((n, n_cont))).astype(np.float32), discrete, None, np.zeros(n, np.float32),
        rng.standard_normal(n).astype(np.float32), np.zeros(n, np.float32), 0, True, False, 0,
    ))
    return trainer


def _three_pass_step(t: SACTrainer, batch: ReplayBatch) -> None:
    """The gradient step as ML-Agents takes it: each Q network scores the actor's sample and the
    stored action in one pass, then the policy, value and entropy losses each get their own
    backward pass and optimizer step (the reference for SACTrainer's single backward pass)."""
    rewards = batch.rewards[:, None] * torch.as_tensor(t.streams.strengths)
    dist = t.network.distribution(batch.obs, batch.allowed)
    cont_sample = cont_log_probs = None
    if t.n_cont:
        cont_sample, cont_log_probs = dist.sample_continuous()
    disc_log_probs = torch.cat(dist.branch_log_probs(), dim=1) if t.branches else None
    n = len(batch)
    both_obs = [torch.cat([o, o]) for o in batch.obs]
    both_actions = torch.cat([cont_sample if cont_sample is not None else batch.continuous, batch.continuous])
    q1_policy, q1 = t.q1(both_obs, both_actions).split(n)
    q2_policy, q2 = t.q2(both_obs, both_actions).split(n)
    if t.branches:
        q1, q2 = condense_q(q1, batch.discrete, t.branches), condense_q(q2, batch.discrete, t.branches)
    else:
        q1, q2 = q1[..., 0], q2[..., 0]
    values = t.value_net(batch.obs)[..., 0]
    with torch.no_grad():
        target_values = t.target_net(batch.next_obs)[..., 0]
    loss = sac_losses(
        q1, q2, target_values, rewards, batch.dones, t.gammas, t.use_dones, values, q1_policy, q2_policy,
        cont_log_probs, disc_log_probs, t.branches, t.alphas.cont, t.alphas.disc, t.alphas.target_cont,
        t.alphas.target_disc,
    )
    t.policy_optimizer.zero_grad()
    loss.policy.backward(retain_graph=True)
    t.policy_optimizer.step()
    t.value_optimizer.zero_grad()
    (loss.q1 + loss.q2 + loss.value).backward()
    t.value_optimizer.step()
    t.entropy_optimizer.zero_grad()
    loss.entropy.backward()
    t.entropy_optimizer.step()
    for src, tgt in zip(t.value_net.parameters(), t.target_net.parameters()):
        with torch.no_grad():
            tgt.mul_(1.0 - t.hp.tau).add_(src, alpha=t.hp.tau)


def _weights(t: SACTrainer) -> dict[str, torch.Tensor]:
    nets = {"pi": t.network, "v": t.value_net, "target": t.target_net, "q1": t.q1, "q2": t.q2}
    weights = {f"{k}.{name}": v.clone() for k, net in nets.items() for name, v in net.state_dict().items()}
    for name, alpha in t.alphas.state().items():
        weights[f"log_alpha.{name}"] = alpha
    return weights


@pytest.mark.parametrize("actions", [(1, ()), (0, (3,)), (2, (2, 3))], ids=["continuous", "discrete", "hybrid"])
def test_gradient_step_equals_three_backward_passes(actions: tuple[int, tuple[int, ...]]) -> None:
    """One backward pass for all losses gives every parameter the gradient of its own loss only:
    after 20 steps the weights match ML-Agents' three passes exactly."""
    fast, reference = _trainer(*actions), _trainer(*actions)
    for k in range(20):
        batch = fast.replay.sample(32, np.random.default_rng(k))
        torch.manual_seed(k)  # the same reparameterised sample
        fast._gradient_step(batch)
        torch.manual_seed(k)
        _three_pass_step(reference, batch)
    got, want = _weights(fast), _weights(reference)
    assert got.keys() == want.keys()
    for name, value in want.items():
        assert torch.allclose(got[name], value, rtol=0, atol=1e-6), name
    assert all(p.requires_grad for p in fast.q1.parameters())  # unfrozen after the actor's term


def test_adam_step_all_equals_stepping_each() -> None:
    torch.manual_seed(0)
    params = [torch.randn(4, 3, requires_grad=True) for _ in range(3)]
    copies = [p.detach().clone().requires_grad_(True) for p in params]
    grouped = [Adam(params[:2], lr=0.1), Adam(params[2:], lr=0.1)]
    separate = [Adam(copies[:2], lr=0.1), Adam(copies[2:], lr=0.1)]
    for _ in range(3):
        for ps in (params, copies):
            for p in ps:
                p.grad = None
            sum((p**2).sum() for p in ps).backward()  # type: ignore[union-attr]
        Adam.step_all(grouped)
        for opt in separate:
            opt.step()
    for p, q in zip(params, copies):
        assert torch.equal(p, q)
    assert grouped[0].state_dict()["state"][0]["step"] == 3


# ------------------------------------------------------------------ learning

SAC_TEST_HYPERPARAMETERS = {"learning_rate": 5.0e-3, "learning_rate_schedule": "constant", "batch_size": 8,
                            "buffer_init_steps": 100, "buffer_size": 5000, "tau": 0.01, "init_entcoef": 0.01}


def sac_config(tmp_path: Path, env_args: list[str], max_steps: int = 1000, **hyperparameters: Any) -> dict[str, Any]:
    return {
        "env_settings": {"env_path": "tests.support.simple_envs:goal_reach", "env_args": env_args, "manager": "inprocess", "seed": 1},
        "checkpoint_settings": {"results_dir": str(tmp_path), "run_id": "sac"},
        "default_settings": {
            "trainer_type": "sac",
            "hyperparameters": {**SAC_TEST_HYPERPARAMETERS, **hyperparameters},
            "network_settings": {"num_layers": 1, "hidden_units": 16},
            "summary_freq": 100,
            "max_steps": max_steps,
        },
        "behaviors": {},
    }


def train(config: dict[str, Any], solved_at: Optional[float] = None) -> tuple[TrainerController, list[float]]:
    """The run ends at max_steps, or with ``solved_at`` once the last 20 returns average it."""
    callbacks = stop_when_solved(solved_at) if solved_at is not None else None
    controller = TrainerController(build_run_options(config, {}, "test"), callbacks=callbacks)
    controller.start_learning()
    return controller, list(controller.managers["GoalReach"].recent_rewards)


@pytest.mark.parametrize("actions", [["continuous=1", "discrete=0"], ["continuous=0", "discrete=1"]], ids=["continuous", "discrete"])
def test_sac_learns_goal_reach(tmp_path: Path, actions: list[str]) -> None:
    _, returns = train(sac_config(tmp_path, actions), 0.9)  # ends once solved, or at 1000 steps
    assert last5(returns) > SUCCESS_THRESHOLD, returns[-10:]


@pytest.mark.slow
@pytest.mark.parametrize("actions", [["continuous=2", "discrete=0"], ["continuous=0", "discrete=2"]], ids=["continuous", "discrete"])
def test_sac_learns_goal_reach_in_2d(tmp_path: Path, actions: list[str]) -> None:
    # the run ends once solved (the last 20 returns average 0.8), or at ML-Agents' 6000 steps; 4 agents act in
    # one call (the 2000 random steps before the first update take a quarter of the calls). Solved means
    # before 6000 steps (the last 5 may hold agents cut off: 0.63 in one seed of six whose 20 averaged
    # 0.84); the last 20 recorded, with the episodes that ended in the call that solved it, stay above 0.7.
    config = sac_config(tmp_path, [*actions, "step_size=0.8", "n_agents=4"], max_steps=6000, buffer_init_steps=2000)
    controller, returns = train(config, 0.8)
    assert controller.trainers["GoalReach"].step < 6000, returns[-20:]
    assert np.mean(returns[-20:]) > 0.7, returns[-20:]


@pytest.mark.slow
@pytest.mark.parametrize("actions", [["continuous=1", "discrete=0"], ["continuous=0", "discrete=1"]], ids=["continuous", "discrete"])
def test_sac_learns_from_images(tmp_path: Path, actions: list[str]) -> None:
    config = sac_config(tmp_path, [*actions, "vectors=0", "images=1"], batch_size=16, learning_rate=3e-4)
    _, returns = train(config, 0.9)
    assert last5(returns) > SUCCESS_THRESHOLD, returns[-10:]


# ------------------------------------------------------------------ save_replay_buffer and --resume

SAVED = re.compile(r"Saved replay buffer \((\d+) experiences, ([\d.e+-]+) MB\) to (\S+)")
RESTORED = re.compile(r"Restored replay buffer \((\d+) experiences")
RESUMED = re.compile(r"Resuming Reach from \S+ at step (\d+)")


def reach_sac_config(max_steps: int, save_replay_buffer: bool) -> dict[str, Any]:
    config = tiny_config(
        "builtin:Reach", max_steps=max_steps, trainer_type="sac", summary_freq=200, checkpoint_interval=300,
        hyperparameters={"batch_size": 32, "buffer_size": 5000, "buffer_init_steps": 100, "steps_per_update": 4,
                         "save_replay_buffer": save_replay_buffer},
        network_settings={"hidden_units": 16, "num_layers": 1},
    )
    config["env_settings"]["manager"] = "inprocess"
    config["behaviors"] = {"Reach": {}}
    return config


class LoadSpy:
    """What each SACTrainer.load left in the trainer's replay buffer (its stored rewards, oldest first)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.buffers: list[np.ndarray] = []
        original = SACTrainer.load

        def load(trainer: SACTrainer, path: str, resume: bool) -> None:
            original(trainer, path, resume)
            self.buffers.append(trainer.replay.rewards[: len(trainer.replay)].cpu().numpy().copy())

        monkeypatch.setattr(SACTrainer, "load", load)


def run_reach(tmp_path: Path, run_id: str, max_steps: int, save: bool, resume: bool = False) -> str:
    cfg = write_config(tmp_path / f"{run_id}.yaml", reach_sac_config(max_steps, save))
    proc = arl_learn_here([cfg, "--run-id", run_id, "--seed", "3", *(["--resume"] if resume else [])], cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in out, out
    return out


def saved_step(folder: Path) -> int:
    return int(torch.load(folder / "checkpoint.pt", weights_only=True)["global_step"])


def test_resume_continues_with_the_saved_replay_buffer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = LoadSpy(monkeypatch)
    folder = tmp_path / "results" / "s" / "Reach"
    buffer_file = folder / REPLAY_BUFFER_FILE
    out = run_reach(tmp_path, "s", 300, save=True)
    first_step = saved_step(folder)
    with np.load(buffer_file) as data:
        saved = {k: data[k] for k in data.files}
    assert first_step >= 300 and len(saved["rewards"]) == first_step  # buffer_size 5000: every experience
    assert {len(v) for v in saved.values()} == {first_step}
    experiences, megabytes, where = SAVED.findall(out)[-1]
    assert int(experiences) == first_step and where.endswith(f"s/Reach/{REPLAY_BUFFER_FILE}"), out
    nbytes = sum(v.nbytes for v in saved.values())
    assert float(megabytes) == pytest.approx(nbytes / 1e6, rel=0.01), (megabytes, nbytes)

    # --resume with more steps: the trainer holds the saved experiences right after loading, and goes on from its step
    out = run_reach(tmp_path, "s", 500, save=True, resume=True)
    assert [int(s) for s in RESUMED.findall(out)] == [first_step], out
    assert [int(n) for n in RESTORED.findall(out)] == [first_step], out
    (restored,) = spy.buffers
    np.testing.assert_array_equal(restored, saved["rewards"])
    assert "Reach. Step: 400." in out and "Reach. Step: 200." not in out, out
    final_step = saved_step(folder)
    assert final_step >= 500
    with np.load(buffer_file) as data:
        assert len(data["rewards"]) == final_step  # the restored experiences and the new ones
        np.testing.assert_array_equal(data["rewards"][:first_step], saved["rewards"])

    # a damaged buffer file: a warning, and training goes on with an empty buffer
    buffer_file.write_bytes(buffer_file.read_bytes()[: buffer_file.stat().st_size // 2])
    out = run_reach(tmp_path, "s", 700, save=True, resume=True)
    assert re.search(rf"WARNING\] \S*{REPLAY_BUFFER_FILE}: replay buffer not restored \(.+\); it refills from new experience", out), out
    assert not RESTORED.search(out) and len(spy.buffers[-1]) == 0
    assert [int(s) for s in RESUMED.findall(out)] == [final_step], out
    with np.load(buffer_file) as data:  # only what was collected after the resume
        assert len(data["rewards"]) == saved_step(folder) - final_step > 0


def test_without_save_replay_buffer_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = LoadSpy(monkeypatch)
    folder = tmp_path / "results" / "plain" / "Reach"
    out = run_reach(tmp_path, "plain", 200, save=False)
    assert (folder / "checkpoint.pt").is_file() and not (folder / REPLAY_BUFFER_FILE).exists()
    assert "replay buffer" not in out, out
    out = run_reach(tmp_path, "plain", 300, save=False, resume=True)
    assert RESUMED.search(out) and "replay buffer" not in out and not (folder / REPLAY_BUFFER_FILE).exists(), out
    # switched on for the next session: nothing to restore yet (a warning), saved from now on
    out = run_reach(tmp_path, "plain", 400, save=True, resume=True)
    assert re.search(rf"WARNING\] \S*{REPLAY_BUFFER_FILE}: no saved replay buffer; it refills from new experience", out), out
    assert [len(b) for b in spy.buffers] == [0, 0]
    assert (folder / REPLAY_BUFFER_FILE).is_file()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("actions", [["continuous=1", "discrete=0"], ["continuous=0", "discrete=1"]], ids=["continuous", "discrete"])
def test_sac_trains_on_cuda_and_resumes_with_its_replay_buffer(tmp_path: Path, actions: list[str]) -> None:
    """Every tensor of a gradient step on the trainer's device (the stream strengths were a CPU tensor)."""
    config = sac_config(tmp_path, actions, max_steps=300, save_replay_buffer=True)
    config["torch_settings"] = {"device": "cuda"}
    controller, _ = train(config)
    trainer = controller.trainers["GoalReach"]
    assert isinstance(trainer, SACTrainer) and trainer.update_steps > 100 and trainer.replay.rewards.is_cuda
    config["default_settings"]["max_steps"] = 400
    config["checkpoint_settings"]["resume"] = True
    resumed, _ = train(config)
    assert resumed.trainers["GoalReach"].step >= 400
