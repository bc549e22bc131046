"""Goal conditioning (network_settings.goal_conditioning_type): GOAL_SIGNAL observations condition
the bodies through a hypernetwork with ``hyper`` (ML-Agents' layout and init), and are plain inputs
with ``none``; the numpy muscle and the ONNX export compute what torch does; PPO and SAC learn a
task whose goal comes only as a goal signal (tests/support/goal_envs.py)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import torch
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType
from torch import nn

from ml_arl.acting.muscle import Muscle
from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.networks.conditioning import ConditionalBody, HyperLayer, column_runs, goal_columns
from ml_arl.networks.encoders import Normalizer
from ml_arl.networks.onnx_export import check_onnx, export_onnx
from ml_arl.settings import NetworkSettings, bounds, build_run_options
from ml_arl.trainers.sac.networks import Critic
from ml_arl.training.controller import TrainerController
from tests.support.simple_envs import SUCCESS_THRESHOLD, last5, stop_when_solved

DEFAULT, GOAL = ObservationType.DEFAULT, ObservationType.GOAL_SIGNAL


def _spec(obs: list[tuple[tuple[int, ...], ObservationType]], actions: ActionSpec) -> BehaviorSpec:
    specs = [ObservationSpec(s, (DimensionProperty.NONE,) * len(s), t, f"obs{i}") for i, (s, t) in enumerate(obs)]
    return BehaviorSpec(specs, actions)


# two goal observations around a plain one: the goal's columns are not one run
VECTOR_GOALS = [((3,), GOAL), ((4,), DEFAULT), ((2,), GOAL)]
# an image goal (its encoding is the goal) next to a vector
IMAGE_GOAL = [((3,), DEFAULT), ((6, 5, 2), GOAL)]


# ---------------------------------------------------------------------------------- maths and layout


def test_hyper_layer_by_hand() -> None:
    """goal g -> swish(W0 g) -> swish(W1 .) -> layer norm -> the layer's weights; by hand for g = +-1."""
    layer = HyperLayer(in_size=2, out_size=1, goal_size=1, hidden=2)
    with torch.no_grad():
        layer.hidden[0].weight.copy_(torch.tensor([[1.0], [-1.0]]))
        layer.hidden[0].bias.zero_()
        layer.hidden[1].weight.copy_(torch.eye(2))
        layer.hidden[1].bias.zero_()
        # layer norm of [a, -b]-like pairs is about [1, -1]: weights [[3], [5]] for g = 1, [[-3], [-5]] for g = -1
        layer.flat.weight.copy_(torch.tensor([[1.5, -1.5], [2.5, -2.5]]))
        layer.flat.bias.zero_()
        layer.bias.fill_(0.5)
    x = torch.tensor([[1.0, 2.0], [1.0, 2.0]])
    goal = torch.tensor([[1.0], [-1.0]])
    swish = lambda v: v / (1 + math.exp(-v))  # noqa: E731
    a, b = swish(swish(1.0)), swish(swish(-1.0))
    norm = (a - b) / 2 / math.sqrt(((a - b) / 2) ** 2 + 1e-5)  # the layer norm of [a, b] is [norm, -norm]
    with torch.no_grad():
        out = layer(x, goal)
    assert out[:, 0].tolist() == pytest.approx([13 * norm + 0.5, -13 * norm + 0.5], rel=1e-6)
    assert abs(norm - 1) < 1e-3


def test_hyper_body_layout_and_init() -> None:
    """ML-Agents' ConditionalEncoder: num_layers - 1 plain layers, then one layer whose [in, out]
    weights a hypernetwork (2 Swish layers of hidden_units, layer norm, a dense layer to in * out)
    makes from the goal; the actor's and the critic's bodies both, the SAC critics' too."""
    spec = _spec(VECTOR_GOALS, ActionSpec(2, ()))
    torch.manual_seed(0)
    net = ActorCritic(spec, NetworkSettings(hidden_units=32, num_layers=3))
    for body in (net.body, net.critic_body):
        assert isinstance(body, ConditionalBody)
        assert [m.out_features for m in body.plain if isinstance(m, nn.Linear)] == [32, 32]
        assert body.columns == (0, 1, 2, 7, 8) and body.runs == [(0, 3), (7, 9)]
        hyper = body.hyper
        assert [(m.in_features, m.out_features) for m in hyper.hidden] == [(5, 32), (32, 32)]
        assert (hyper.flat.in_features, hyper.flat.out_features) == (32, 32 * 32)
        bound = math.sqrt(1 / (32 * 32))
        flat = hyper.flat.weight.detach().abs()
        assert float(flat.max()) <= bound and float(flat.max()) > 0.9 * bound
        assert not hyper.flat.bias.any() and not hyper.bias.any()
        # Kaiming normal of gain 1: std 1 / sqrt(fan_in)
        assert float(hyper.hidden[1].weight.detach().std()) == pytest.approx(1 / math.sqrt(32), rel=0.15)
    assert net.body is not net.critic_body
    one_layer = ActorCritic(spec, NetworkSettings(hidden_units=8, num_layers=1))
    assert isinstance(one_layer.body, ConditionalBody) and len(one_layer.body.plain) == 0
    assert one_layer.body.hyper.in_size == 4 + 3 + 2  # the goal is also part of the layer's input
    for critic in (Critic(spec, NetworkSettings(hidden_units=8), Normalizer(9), 1, action_inputs=2),):
        assert isinstance(critic.body, ConditionalBody) and critic.body.hyper.in_size == 8
        assert critic([torch.zeros(3, 3), torch.zeros(3, 4), torch.ones(3, 2)], torch.zeros(3, 2)).shape == (3, 1, 1)
    # none, or no goal observation: the plain body, the goal is just another input
    plain = [ActorCritic(spec, NetworkSettings(hidden_units=8, goal_conditioning_type="none")),
             ActorCritic(_spec([((3,), DEFAULT)], ActionSpec(1, ())), NetworkSettings(hidden_units=8))]
    for other in plain:
        assert isinstance(other.body, nn.Sequential) and isinstance(other.critic_body, nn.Sequential)
        assert other.muscle_weights().hyper is None
    assert not isinstance(Critic(spec, NetworkSettings(goal_conditioning_type="none"), Normalizer(9), 1).body, ConditionalBody)


def test_goal_columns_follow_the_encoder_layout() -> None:
    """The encoder's output is [vectors in order, then an encoding of hidden_units per image]; the
    goal is its goal observations' columns in observation order, as ML-Agents concatenates them."""
    spec = _spec([((6, 5, 2), GOAL), ((3,), DEFAULT), ((2, 2), GOAL), ((4, 4, 1), DEFAULT)], ActionSpec(1, ()))
    # columns: obs 1 at 0-2, obs 2 at 3-6, obs 0's encoding at 7-16, obs 3's at 17-26
    assert goal_columns(spec, [1, 2], [0, 3], 10) == (*range(7, 17), 3, 4, 5, 6)
    assert column_runs([3, 4, 5, 9, 11, 12]) == [(3, 6), (9, 10), (11, 13)]


# ---------------------------------------------------------------------------------- torch, numpy and ONNX agree


def _net(obs: list[tuple[tuple[int, ...], ObservationType]], actions: ActionSpec, sac: bool, seed: int = 0) -> ActorCritic:
    torch.manual_seed(seed)
    settings = NetworkSettings(hidden_units=16, num_layers=2, normalize=True, vis_encode_type="fully_connected")
    net = ActorCritic(_spec(obs, actions), settings, conditional_sigma=sac, tanh_squash=sac, critic=not sac)
    with torch.no_grad():
        for p in net.parameters():  # random weights everywhere (the heads and biases start at 0 or tiny)
            p.add_(torch.randn_like(p) * 0.3)
        if net.mu is not None and net.log_sigma is not None:  # SAC: keep tanh(sample) off +-1 (float32 atanh)
            net.mu.weight.mul_(0.1)
            net.log_sigma.weight.mul_(0.1)
    net.normalizer.update(torch.randn(32, net.normalizer.mean.shape[0]) * 2.0 + 1.0)
    return net


def _obs(net: ActorCritic, batch: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(batch, *o.shape)).astype(np.float32) for o in net.spec.observation_specs]


CASES = {
    "vector-goals-hybrid": (VECTOR_GOALS, ActionSpec(2, (3, 2))),
    "image-goal-discrete": (IMAGE_GOAL, ActionSpec(0, (4,))),
}
# (case, SAC's actor?): SAC's actor differs from PPO's only in its continuous head
PAIRS = [("vector-goals-hybrid", False), ("vector-goals-hybrid", True), ("image-goal-discrete", False)]
PAIR_IDS = ["vector-goals-hybrid-ppo", "vector-goals-hybrid-sac", "image-goal-discrete-ppo"]


@pytest.mark.parametrize(("case", "sac"), PAIRS, ids=PAIR_IDS)
def test_muscle_matches_torch(case: str, sac: bool) -> None:
    net = _net(*CASES[case], sac=sac)
    weights = net.muscle_weights()
    assert weights.hyper is not None
    obs = _obs(net, 6, seed=1)
    tensors = [torch.as_tensor(o) for o in obs]
    muscle = Muscle(weights, seed=3)
    info = muscle.act(obs, None)
    with torch.no_grad():
        dist = net.distribution(tensors, None)
        log_prob = dist.log_probs(torch.as_tensor(info.continuous), torch.as_tensor(info.discrete).long())
    np.testing.assert_allclose(info.log_prob, log_prob.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(info.entropy, dist.entropy().numpy(), rtol=1e-5, atol=1e-5)
    greedy = Muscle(weights, deterministic=True).act(obs, None)
    if net.n_cont:
        assert dist.mu is not None
        want = torch.tanh(dist.mu) if sac else dist.mu
        np.testing.assert_allclose(greedy.continuous, want.numpy(), rtol=1e-4, atol=1e-5)
    for i, logits in enumerate(dist.branch_logits):
        assert greedy.discrete[:, i].tolist() == logits.argmax(1).tolist()
    # the goal matters: another goal, other actions
    moved = [o if t == DEFAULT else o + 1.0 for o, (_, t) in zip(obs, CASES[case][0])]
    assert not np.allclose(Muscle(weights, deterministic=True).act(moved, None).log_prob, greedy.log_prob)


@pytest.mark.parametrize(("case", "sac"), PAIRS, ids=PAIR_IDS)
def test_onnx_matches_torch(tmp_path: Path, case: str, sac: bool) -> None:
    net = _net(*CASES[case], sac=sac)
    path = tmp_path / "goal.onnx"
    export_onnx(net, str(path))
    check_onnx(str(path))
    obs = _obs(net, 5, seed=2)
    feed = {f"obs_{i}": np.ascontiguousarray(o.transpose(0, 3, 1, 2)) if o.ndim == 4 else o for i, o in enumerate(obs)}
    if net.branches:
        feed["action_masks"] = np.ones((5, sum(net.branches)), np.float32)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))
    with torch.no_grad():
        dist = net.distribution([torch.as_tensor(o) for o in obs], None)
    if net.n_cont:
        assert dist.mu is not None
        want = torch.tanh(dist.mu) if sac else torch.clamp(dist.mu, -3, 3) / 3
        np.testing.assert_allclose(out["deterministic_continuous_actions"], want.numpy(), rtol=1e-4, atol=1e-5)
    if net.branches:
        greedy = torch.stack([logits.argmax(1) for logits in dist.branch_logits], dim=1)
        assert out["deterministic_discrete_actions"].tolist() == greedy.tolist()


# ---------------------------------------------------------------------------------- learning


PPO = {"learning_rate": 3e-3, "learning_rate_schedule": "constant", "batch_size": 64, "buffer_size": 256, "beta": 1e-3}
SAC = {"learning_rate": 5.0e-3, "learning_rate_schedule": "constant", "batch_size": 8, "buffer_init_steps": 100,
       "buffer_size": 5000, "tau": 0.01, "init_entcoef": 0.01}  # tests/trainers/test_sac.py's (ML-Agents' test values)


def _learn(
    tmp_path: Path, trainer: str, conditioning: str, actions: list[str], seed: int = 1, max_steps: int = 0
) -> tuple[TrainerController, list[float]]:
    config: dict[str, Any] = {
        "env_settings": {"env_path": "tests.support.goal_envs:goal_signal_reach", "manager": "inprocess", "seed": seed,
                         "env_args": actions},
        "checkpoint_settings": {"results_dir": str(tmp_path), "run_id": "goal"},
        "default_settings": {
            "trainer_type": trainer, "summary_freq": 500, "max_steps": max_steps or (6000 if trainer == "ppo" else 2000),
            "hyperparameters": PPO if trainer == "ppo" else SAC,
            "network_settings": {"num_layers": 2, "hidden_units": 16, "goal_conditioning_type": conditioning},
        },
        "behaviors": {},
    }
    # stop once the last 20 returns average 0.95 (0.9 can stop a discrete run one slow episode early)
    controller = TrainerController(build_run_options(config, {}, "test"), callbacks=stop_when_solved(0.95))
    controller.start_learning()
    return controller, list(controller.managers["GoalReach"].recent_rewards)


@pytest.mark.parametrize(
    ("trainer", "conditioning", "actions"),
    [("ppo", "hyper", ["continuous=1"]), ("ppo", "hyper", ["continuous=0", "discrete=1"]),
     ("ppo", "none", ["continuous=0", "discrete=1"]), ("sac", "hyper", ["continuous=1"])],
    ids=["ppo-hyper-continuous", "ppo-hyper-discrete", "ppo-none-discrete", "sac-hyper-continuous"],
)
def test_learns_the_goal_from_its_signal(tmp_path: Path, trainer: str, conditioning: str, actions: list[str]) -> None:
    controller, returns = _learn(tmp_path, trainer, conditioning, actions)
    body = controller.trainers["GoalReach"].network.body
    assert isinstance(body, ConditionalBody) == (conditioning == "hyper")
    assert last5(returns) > SUCCESS_THRESHOLD, returns[-10:]
    check_onnx(str(tmp_path / "goal" / "GoalReach.onnx"))


def test_memory_check_counts_the_hypernetworks() -> None:
    """The hypernetwork's output layer grows as hidden_units cubed: the memory check before training counts it."""
    spec = _spec([((4,), DEFAULT), ((2,), GOAL)], ActionSpec(1, ()))
    assert bounds.behavior_memory_problem(spec, 2048, 2, 1, "none") is None
    problem = bounds.behavior_memory_problem(spec, 2048, 2, 1, "hyper")
    assert problem is not None and "use fewer hidden_units" in problem
    # the estimate is the networks' own count
    torch.manual_seed(0)
    net = ActorCritic(spec, NetworkSettings(hidden_units=8, num_layers=2))
    plain = ActorCritic(spec, NetworkSettings(hidden_units=8, num_layers=2, goal_conditioning_type="none"))
    extra = sum(p.numel() for p in net.parameters()) - sum(p.numel() for p in plain.parameters())
    assert extra == 2 * bounds.hyper_layer_parameters(8, 8, 2)
