"""GAE, returns and schedules against hand-computed values; the numpy muscle against torch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ml_arl.acting.muscle import Muscle, masks_allowed
from ml_arl.envs.games.builtin import Reach, Trivial
from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.networks.encoders import Normalizer
from ml_arl.settings import NetworkSettings
from ml_arl.trainers.returns import decayed, discounted_returns, gae


def test_gae_matches_hand_computation() -> None:
    rewards = np.array([1.0, 0.0, 2.0], np.float32)
    values = np.array([0.5, 1.0, 1.5], np.float32)
    gamma, lambd, v_next = 0.9, 0.8, 2.0
    # deltas: r_t + gamma * V(t+1) - V(t)
    d2 = 2.0 + 0.9 * 2.0 - 1.5  # 2.3
    d1 = 0.0 + 0.9 * 1.5 - 1.0  # 0.35
    d0 = 1.0 + 0.9 * 1.0 - 0.5  # 1.4
    a2 = d2
    a1 = d1 + 0.9 * 0.8 * a2  # 0.35 + 0.72 * 2.3 = 2.006
    a0 = d0 + 0.9 * 0.8 * a1  # 1.4 + 0.72 * 2.006 = 2.84432
    np.testing.assert_allclose(gae(rewards, values, v_next, gamma, lambd), [a0, a1, a2], rtol=1e-6)


def test_gae_with_lambda_one_is_return_minus_value() -> None:
    rewards = np.array([1.0, 1.0, 1.0, 1.0], np.float32)
    values = np.array([0.2, 0.4, 0.1, 0.3], np.float32)
    adv = gae(rewards, values, 0.0, 0.5, 1.0)
    returns = discounted_returns(rewards, 0.5)
    np.testing.assert_allclose(returns, [1.875, 1.75, 1.5, 1.0], rtol=1e-6)
    np.testing.assert_allclose(adv, returns - values, rtol=1e-6)


def test_terminal_vs_bootstrapped_value() -> None:
    rewards = np.array([0.0], np.float32)
    values = np.array([0.0], np.float32)
    assert gae(rewards, values, 0.0, 0.99, 0.95)[0] == 0.0  # true end: nothing follows
    assert gae(rewards, values, 10.0, 0.99, 0.95)[0] == pytest.approx(9.9)  # interrupted: bootstrap


def test_linear_schedule_reaches_floor() -> None:
    assert decayed(3e-4, 1e-10, 0, 1000, "linear") == pytest.approx(3e-4)
    assert decayed(0.2, 0.1, 500, 1000, "linear") == pytest.approx(0.15)
    assert decayed(0.2, 0.1, 5000, 1000, "linear") == pytest.approx(0.1)
    assert decayed(0.2, 0.1, 500, 1000, "constant") == 0.2


def test_normalizer_running_statistics() -> None:
    norm = Normalizer(2)
    data = torch.tensor([[1.0, 10.0], [3.0, 30.0], [5.0, 50.0], [7.0, 70.0]])
    norm.update(data[:1])
    norm.update(data[1:])
    # ML-Agents' prior, one pseudo-sample of mean 0 and variance 1, beside the four: mean 16 / 5;
    # M2 = 1 + 20 + 4^2 * 1 * 4 / 5 = 33.8 over 5 (and 1 + 2000 + 40^2 * 4 / 5 = 3281 over 5)
    np.testing.assert_allclose(norm.count.numpy(), 5.0)
    np.testing.assert_allclose(norm.mean.numpy(), [3.2, 32.0], rtol=1e-9)
    np.testing.assert_allclose(norm.var.numpy(), [6.76, 656.2], rtol=1e-9)


@pytest.mark.parametrize("activation", ["swish", "tanh"])
@pytest.mark.parametrize("env", [Reach("continuous"), Reach("discrete"), Reach("hybrid"), Trivial()])
def test_muscle_agrees_with_torch(env, activation: str) -> None:  # noqa: ANN001
    env.reset()
    name = list(env.behavior_specs)[0]
    spec = env.behavior_specs[name]
    net = ActorCritic(spec, NetworkSettings(normalize=True, hidden_units=16, activation=activation))
    net.normalizer.update(torch.randn(64, spec.observation_specs[0].shape[0]) * 3 + 1)
    muscle = Muscle(net.muscle_weights(), seed=3)
    decision, _ = env.get_steps(name)
    allowed = masks_allowed(decision.action_mask, len(decision), muscle.branches)
    info = muscle.act(decision.obs, allowed)
    log_prob, entropy, _ = net.evaluate(
        [torch.as_tensor(decision.obs[0])],
        torch.as_tensor(allowed) if allowed is not None else None,
        torch.as_tensor(info.continuous),
        torch.as_tensor(info.discrete).long(),
    )
    np.testing.assert_allclose(info.log_prob, log_prob.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(info.entropy, entropy.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(info.env_action.continuous, np.clip(info.continuous, -3, 3) / 3, atol=1e-7)


@pytest.mark.parametrize("env", [Reach("continuous"), Reach("hybrid"), Trivial()])
def test_sac_muscle_agrees_with_torch(env) -> None:  # noqa: ANN001
    """SAC's actor (state-dependent sigma, tanh-squashed actions): same log-probabilities and
    entropy in numpy as in torch, and the squashed action is what the env receives. Seeded: near
    |action| = 1 the float32 tanh correction differs by a few 1e-4 in some draws (relative 1e-4)."""
    torch.manual_seed(11)
    env.reset()
    name = list(env.behavior_specs)[0]
    spec = env.behavior_specs[name]
    net = ActorCritic(spec, NetworkSettings(hidden_units=16), conditional_sigma=True, tanh_squash=True)
    with torch.no_grad():
        assert net.log_sigma is not None and net.mu is not None
        net.log_sigma.weight.normal_(0, 0.5)  # sigma that differs from row to row
        net.mu.weight.normal_(0, 0.5)
    muscle = Muscle(net.muscle_weights(), seed=5)
    decision, _ = env.get_steps(name)
    allowed = masks_allowed(decision.action_mask, len(decision), muscle.branches)
    info = muscle.act(decision.obs, allowed)
    assert np.all(np.abs(info.continuous) < 1.0)
    np.testing.assert_array_equal(info.env_action.continuous, info.continuous)
    obs = [torch.as_tensor(decision.obs[0])]
    dist = net.distribution(obs, torch.as_tensor(allowed) if allowed is not None else None)
    log_prob = dist.log_probs(torch.as_tensor(info.continuous), torch.as_tensor(info.discrete).long())
    np.testing.assert_allclose(info.log_prob, log_prob.detach().numpy(), rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(info.entropy, dist.entropy().detach().numpy(), atol=1e-5)
    deterministic = Muscle(net.muscle_weights(), deterministic=True).act(decision.obs, allowed)
    assert dist.mu is not None
    np.testing.assert_allclose(deterministic.continuous, torch.tanh(dist.mu).detach().numpy(), atol=1e-6)


def test_tanh_squashed_log_prob_by_hand() -> None:
    """log p(a) of a = tanh(u), u ~ N(mu, sigma): log N(u) - log(1 - a^2 + eps), by hand."""
    from ml_arl.networks.distributions import ActionDistribution

    mu, std = torch.tensor([[0.3]]), torch.tensor([[0.5]])
    dist = ActionDistribution(mu, std, [], tanh_squash=True)
    a = torch.tensor([[0.6]])
    u = math.atanh(0.6)
    expected = -0.5 * ((u - 0.3) / 0.5) ** 2 - math.log(0.5) - 0.5 * math.log(2 * math.pi) - math.log(1 - 0.36 + 1e-6)
    assert float(dist.continuous_log_probs(a)) == pytest.approx(expected, abs=1e-5)


def test_masked_actions_are_never_sampled() -> None:
    env = Reach("discrete", n_agents=64)
    env.reset()
    spec = env.behavior_specs["ReachDiscrete"]
    muscle = Muscle(ActorCritic(spec, NetworkSettings(hidden_units=8)).muscle_weights(), seed=0)
    allowed = np.ones((64, 3), bool)
    allowed[:, 0] = False
    allowed[::2, 2] = False
    for _ in range(20):
        info = muscle.act([np.zeros((64, 2), np.float32)], allowed)
        assert not np.any(info.discrete[:, 0] == 0)
        assert not np.any(info.discrete[::2, 0] == 2)


@pytest.mark.parametrize("fused", [True, False])
def test_adam_matches_torch_optim_adam(fused: bool) -> None:
    import copy

    from ml_arl.trainers.optimizers import Adam

    torch.manual_seed(0)
    ours_net = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2))
    ref_net = copy.deepcopy(ours_net)
    ours = Adam(ours_net.parameters(), lr=3e-3, fused=fused)
    ref = torch.optim.Adam(ref_net.parameters(), lr=3e-3)
    for step in range(30):
        x = torch.randn(16, 5)
        if step == 10:
            ours.lr = ref.param_groups[0]["lr"] = 1e-3  # schedules change lr between steps
        for net, opt in ((ours_net, ours), (ref_net, ref)):
            opt.zero_grad()
            (net(x) ** 2).sum().backward()
            opt.step()
    for a, b in zip(ours_net.parameters(), ref_net.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # The state_dict layout is torch's: each loads the other's.
    fresh = Adam(ref_net.parameters(), lr=1.0)
    fresh.load_state_dict(ref.state_dict())
    assert fresh.step_count == 30 and fresh.lr == 1e-3
    for a, b in zip(fresh.exp_avg_sqs, ours.exp_avg_sqs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-9)
    torch.optim.Adam(ours_net.parameters()).load_state_dict(ours.state_dict())
    with pytest.raises(ValueError, match="parameters"):
        Adam(torch.nn.Linear(5, 7).parameters()).load_state_dict(ours.state_dict())


def test_clip_grad_norm_matches_torch() -> None:
    from ml_arl.trainers.optimizers import clip_grad_norm

    torch.manual_seed(1)
    a = [torch.nn.Parameter(torch.randn(4, 3)), torch.nn.Parameter(torch.randn(3))]
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    for params in (a, b):
        (sum((p * p).sum() for p in params) * 3).backward()
    norm = clip_grad_norm(a, 0.5)
    ref = torch.nn.utils.clip_grad_norm_(b, 0.5)
    torch.testing.assert_close(norm, ref)
    for p, q in zip(a, b):
        torch.testing.assert_close(p.grad, q.grad)
    assert float(torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in a]))) == pytest.approx(0.5, rel=1e-5)


def _visual_spec(kind_shapes: list[tuple[int, ...]], action_spec) -> object:  # noqa: ANN001
    from mlagents_envs.base_env import BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType

    specs = [
        ObservationSpec(shape, (DimensionProperty.UNSPECIFIED,) * len(shape), ObservationType.DEFAULT, f"obs{i}")
        for i, shape in enumerate(kind_shapes)
    ]
    return BehaviorSpec(specs, action_spec)


# an image shape per encoder, neither square nor at the minimum, so that a mix-up of height and
# width or of (C, H, W) and (H, W, C) flattening shows
VISUAL_SHAPES = {
    "simple": (24, 21, 3),
    "nature_cnn": (36, 41, 3),
    "resnet": (17, 22, 3),
    "match3": (5, 7, 5),
    "fully_connected": (6, 4, 2),
}


def _randomised(net: ActorCritic) -> ActorCritic:
    """Each weight times (1 + 0.3 N(0, 1)), each bias plus 0.05 N(0, 1): no zero biases, and the
    activations keep the scale of the initialisation."""
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(1.0 + 0.3 * torch.randn_like(p))
            if p.dim() == 1:
                p.add_(0.05 * torch.randn_like(p))
    return net


@pytest.mark.parametrize("encoder", list(VISUAL_SHAPES))
def test_visual_muscle_agrees_with_torch(encoder: str) -> None:
    from mlagents_envs.base_env import ActionSpec

    from ml_arl.acting.muscle import _VisualEncoder

    shape = VISUAL_SHAPES[encoder]
    torch.manual_seed(0)
    spec = _visual_spec([(3,), shape, (2,)], ActionSpec(2, (3, 2)))
    net = _randomised(ActorCritic(spec, NetworkSettings(normalize=True, hidden_units=16, vis_encode_type=encoder)))
    net.normalizer.update(torch.randn(64, 5) * 2 + 1)
    rng = np.random.default_rng(0)
    obs = [rng.normal(size=(7, 3)).astype(np.float32), rng.random((7, *shape), dtype=np.float32),
           rng.normal(size=(7, 2)).astype(np.float32)]
    weights = net.muscle_weights()
    assert weights.encoders[0].kind == encoder
    # the encoder alone: numpy (channels-last) == torch (channels-first)
    with torch.no_grad():
        want = net.encoder.encoders[0](torch.as_tensor(obs[1]).permute(0, 3, 1, 2)).numpy()
    got = _VisualEncoder(weights.encoders[0])(obs[1])
    assert want.std() > 0.01 and (want != 0).mean() > 0.25  # features that vary, not a dead layer
    np.testing.assert_allclose(got, want, atol=1e-4)
    # the whole actor
    muscle = Muscle(weights, seed=1)
    allowed = np.ones((7, 5), bool)
    allowed[:, 1] = False
    info = muscle.act(obs, allowed)
    assert not info.discrete[:, 0].tolist().count(1)  # the masked action is never taken
    log_prob, _, value = net.evaluate(
        [torch.as_tensor(o) for o in obs], torch.as_tensor(allowed),
        torch.as_tensor(info.continuous), torch.as_tensor(info.discrete).long(),
    )
    np.testing.assert_allclose(info.log_prob, log_prob.detach().numpy(), atol=1e-4)
    assert value.shape == (7, 1)  # one value per reward stream


@pytest.mark.parametrize("encoder", ["simple", "nature_cnn", "resnet", "match3"])
def test_encoders_refuse_images_below_ml_agents_minimum(encoder: str) -> None:
    """ML-Agents' minimum sizes (MIN_RESOLUTION_FOR_ENCODER): one pixel less in either dimension is
    a one-line error that names the minimum and the encoders that fit; the minimum itself encodes."""
    from mlagents_envs.base_env import ActionSpec

    from ml_arl.networks.encoders import MIN_RESOLUTION

    need = MIN_RESOLUTION[encoder]
    assert need == {"simple": 20, "nature_cnn": 36, "resnet": 15, "match3": 5}[encoder]
    for shape in ((need - 1, need + 4, 3), (need + 4, need - 1, 3)):
        with pytest.raises(ValueError, match=f"'{encoder}' needs at least {need}x{need}") as err:
            ActorCritic(_visual_spec([shape], ActionSpec(1, ())), NetworkSettings(vis_encode_type=encoder))
        assert "\n" not in str(err.value) and "'fully_connected')" in str(err.value)
    net = ActorCritic(_visual_spec([(need, need, 3)], ActionSpec(1, ())), NetworkSettings(hidden_units=8, vis_encode_type=encoder))
    image = np.random.default_rng(0).random((2, need, need, 3), dtype=np.float32)
    assert net.encoder([torch.as_tensor(image)]).shape == (2, 8)
    assert Muscle(net.muscle_weights()).act([image], None).continuous.shape == (2, 1)


@pytest.mark.parametrize("encoder", list(VISUAL_SHAPES))
def test_sac_critics_and_actor_take_every_encoder(encoder: str) -> None:
    """SAC builds its V and Q networks from the same ObservationEncoder: each encoder gives them
    [batch, streams, outputs] and gradients reach the encoder's first layer."""
    from mlagents_envs.base_env import ActionSpec

    from ml_arl.trainers.sac.networks import Critic

    spec = _visual_spec([VISUAL_SHAPES[encoder], (2,)], ActionSpec(2, (3,)))
    settings = NetworkSettings(hidden_units=8, vis_encode_type=encoder)
    actor = ActorCritic(spec, settings, conditional_sigma=True, tanh_squash=True, critic=False)
    q = Critic(spec, settings, actor.normalizer, streams=2, action_inputs=2, outputs=3)
    obs = [torch.rand(4, *VISUAL_SHAPES[encoder]), torch.randn(4, 2)]
    out = q(obs, actor.distribution(obs, None).sample_continuous()[0])
    assert out.shape == (4, 2, 3)
    out.sum().backward()
    first = next(q.encoder.encoders[0].parameters())
    assert first.grad is not None and float(first.grad.abs().sum()) > 0
