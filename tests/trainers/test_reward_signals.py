"""Reward signals (ml_arl.trainers.reward_signals): the maths against hand values and against
re-computations written here from ML-Agents' formulas, that each signal learns, checkpoints
that round-trip through weights_only loads, and every action and observation kind.

numpy's assert_allclose, not torch.testing's assert_close: the latter's first call imports torch's
compiler stack (3 s here)."""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
import pytest
import torch
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType
from torch.nn import functional as F

from ml_arl.core.experience import Trajectory
from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.settings import (
    CuriositySettings,
    GAILSettings,
    NetworkSettings,
    RewardSignals,
    RewardSignalSettings,
    RNDSettings,
)
from ml_arl.trainers.behavioral_cloning import bc_loss
from ml_arl.trainers.reward_signals import (
    CuriosityProvider,
    ExtrinsicProvider,
    GAILProvider,
    RewardProvider,
    RNDProvider,
    SignalBatch,
    flatten_actions,
    make_reward_providers,
)
from ml_arl.trainers.reward_signals.curiosity import forward_error
from ml_arl.trainers.reward_signals.gail import discriminator_loss, gradient_magnitude, vail_kl

SMALL = {"hidden_units": 8, "num_layers": 1}
HYBRID = ActionSpec(2, (3, 2))
ACTION_SPECS = {"continuous": ActionSpec(2, ()), "discrete": ActionSpec(0, (3, 2)), "hybrid": HYBRID}


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Any:
    """One torch thread, as arl-learn uses on this 2-core machine: with two, small networks spend
    most of their time in OpenMP waits whenever other processes share the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def vector_spec(size: int = 3, actions: ActionSpec = HYBRID) -> BehaviorSpec:
    return BehaviorSpec([ObservationSpec((size,), (DimensionProperty.NONE,), ObservationType.DEFAULT, "obs_0")], actions)


def image_spec(actions: ActionSpec = HYBRID) -> BehaviorSpec:
    image = ObservationSpec(
        (20, 20, 3),
        (DimensionProperty.TRANSLATIONAL_EQUIVARIANCE, DimensionProperty.TRANSLATIONAL_EQUIVARIANCE, DimensionProperty.NONE),
        ObservationType.DEFAULT,
        "camera",
    )
    vector = ObservationSpec((4,), (DimensionProperty.NONE,), ObservationType.DEFAULT, "obs_1")
    return BehaviorSpec([image, vector], actions)


def random_batch(spec: BehaviorSpec, n: int, offset: float = 0.0, seed: int = 0) -> SignalBatch:
    g = torch.Generator().manual_seed(seed)
    obs = [torch.randn((n, *o.shape), generator=g) + offset for o in spec.observation_specs]
    next_obs = [torch.randn((n, *o.shape), generator=g) + offset for o in spec.observation_specs]
    branches = spec.action_spec.discrete_branches
    discrete = torch.stack([torch.randint(b, (n,), generator=g) for b in branches], 1) if branches else torch.zeros((n, 0), dtype=torch.int64)
    return SignalBatch(
        obs=obs,
        next_obs=next_obs,
        continuous=torch.randn((n, spec.action_spec.continuous_size), generator=g),
        discrete=discrete,
        dones=(torch.rand(n, generator=g) < 0.2).float(),
        rewards=torch.randn(n, generator=g),
    )


def curiosity(spec: BehaviorSpec, **settings: Any) -> CuriosityProvider:
    return CuriosityProvider(spec, CuriositySettings.model_validate({"network_settings": SMALL, **settings}))


def rnd(spec: BehaviorSpec, **settings: Any) -> RNDProvider:
    return RNDProvider(spec, RNDSettings.model_validate({"network_settings": SMALL, **settings}))


def gail(spec: BehaviorSpec, expert: SignalBatch, **settings: Any) -> GAILProvider:
    return GAILProvider(spec, GAILSettings.model_validate({"demo_path": "demo.demo", "network_settings": SMALL, **settings}), expert)


def lin(layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    assert isinstance(layer, torch.nn.Linear)
    return F.linear(x, layer.weight, layer.bias)


# --------------------------------------------------------------------------- batches


def test_select_and_from_arrays() -> None:
    obs = [np.arange(5, dtype=np.float32)[:, None] * np.ones((5, 2), np.float32)]
    dones = np.array([0, 1, 0, 0, 0], dtype=bool)
    batch = SignalBatch.from_arrays(obs, np.zeros((5, 1)), np.array([[0], [1], [2], [0], [1]]), dones)
    # next observation: the following row inside an episode; the step's own at an episode's end and at the last row
    assert batch.next_obs[0][:, 0].tolist() == [1.0, 1.0, 3.0, 4.0, 4.0]
    assert batch.discrete.dtype == torch.int64 and batch.dones.tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]
    part = batch.select(torch.tensor([4, 0]))
    assert part.obs[0][:, 0].tolist() == [4.0, 0.0] and part.discrete[:, 0].tolist() == [1, 0] and len(part) == 2
    assert len(batch.select(slice(1, 3))) == 2


def test_from_trajectory() -> None:
    traj = Trajectory(
        behavior="b", agent_id="0-0", obs=[np.arange(3, dtype=np.float32)[:, None]], next_obs=[np.array([7.0], np.float32)],
        continuous=np.zeros((3, 0), np.float32), discrete=np.array([[1], [0], [1]], np.int32), allowed=None,
        log_prob=np.zeros(3, np.float32), rewards=np.array([0.0, 0.5, 1.0], np.float32), group_rewards=np.zeros(3, np.float32),
        group_id=0, done=True, interrupted=False, policy_version=0,
    )
    batch = SignalBatch.from_trajectory(traj)
    assert batch.next_obs[0][:, 0].tolist() == [1.0, 2.0, 7.0]
    assert batch.dones.tolist() == [0.0, 0.0, 1.0] and batch.discrete.dtype == torch.int64
    assert ExtrinsicProvider(RewardSignalSettings()).evaluate(batch).tolist() == [0.0, 0.5, 1.0]


def test_flatten_actions_one_hot_per_branch() -> None:
    flat = flatten_actions(torch.tensor([[0.5, -1.0]]), torch.tensor([[2, 0]]), (3, 2))
    assert flat.tolist() == [[0.5, -1.0, 0.0, 0.0, 1.0, 1.0, 0.0]]


# --------------------------------------------------------------------------- curiosity


def test_forward_error_by_hand() -> None:
    assert forward_error(torch.tensor([[1.0, 2.0]]), torch.tensor([[0.0, 0.0]])).tolist() == [2.5]


def test_curiosity_loss_and_reward_match_a_recomputation() -> None:
    torch.manual_seed(0)
    spec = vector_spec()
    signal = curiosity(spec, strength=1e-3)  # no cap at first (1 / strength = 1000)
    batch = random_batch(spec, 16)
    assert signal.evaluate(batch).tolist() == [0.0] * 16  # ML-Agents: nothing before the first update

    # ML-Agents' ICM written out with the provider's weights
    def phi(x: torch.Tensor) -> torch.Tensor:
        return F.silu(lin(signal.state_encoder.body[0], x))

    s, s_next = phi(batch.obs[0]), phi(batch.next_obs[0])
    onehot = torch.cat([F.one_hot(batch.discrete[:, 0], 3), F.one_hot(batch.discrete[:, 1], 2)], 1).float()
    predicted = lin(signal.forward_model[2], F.silu(lin(signal.forward_model[0], torch.cat([s, batch.continuous, onehot], 1))))
    error = 0.5 * ((s_next - predicted) ** 2).sum(1)
    hidden = F.silu(lin(signal.inverse_model[0], torch.cat([s, s_next], 1)))
    assert signal.continuous_prediction is not None and signal.discrete_prediction is not None
    continuous_error = ((lin(signal.continuous_prediction, hidden) - batch.continuous) ** 2).sum(1).mean()
    logits = lin(signal.discrete_prediction, hidden)
    probs = torch.cat([torch.softmax(logits[:, :3], 1), torch.softmax(logits[:, 3:], 1)], 1)
    cross_entropy = (-torch.log(probs + 1e-10) * onehot).sum(1).mean()
    inverse = continuous_error + cross_entropy

    loss, stats = signal.loss(batch)
    assert stats["Losses/Curiosity Forward Loss"] == pytest.approx(error.mean().item(), rel=1e-5)
    assert stats["Losses/Curiosity Inverse Loss"] == pytest.approx(inverse.item(), rel=1e-5)
    assert loss.item() == pytest.approx(10.0 * (0.2 * error.mean().item() + 0.8 * inverse.item()), rel=1e-5)

    signal.update(batch)
    # after an update: the forward error, capped at 1 / strength (here the median, so some are capped)
    s, s_next = phi(batch.obs[0]), phi(batch.next_obs[0])
    predicted = lin(signal.forward_model[2], F.silu(lin(signal.forward_model[0], torch.cat([s, batch.continuous, onehot], 1))))
    after = (0.5 * ((s_next - predicted) ** 2).sum(1)).detach().numpy()
    np.testing.assert_allclose(signal.evaluate(batch), after, rtol=1e-5)
    cap = float(np.median(after))
    signal.strength = 1.0 / cap
    np.testing.assert_allclose(signal.evaluate(batch), np.minimum(after, cap), rtol=1e-5)


def test_curiosity_with_normalize_only_clamps() -> None:
    """ML-Agents never updates curiosity's normalizer: observations are only clamped to +-5."""
    spec = vector_spec()
    signal = curiosity(spec, network_settings={**SMALL, "normalize": True})
    x = torch.tensor([[10.0, -0.5, 2.0]])
    expected = F.silu(lin(signal.state_encoder.body[0], torch.tensor([[5.0, -0.5, 2.0]])))
    np.testing.assert_allclose(signal.state_encoder([x]).detach().numpy(), expected.detach().numpy(), rtol=1e-6, atol=1e-6)
    signal.update(random_batch(spec, 8, offset=3.0))
    assert float(signal.normalizer.count) == pytest.approx(1.0)  # the prior pseudo-sample only


# --------------------------------------------------------------------------- RND


def test_rnd_loss_and_reward_match_a_recomputation() -> None:
    torch.manual_seed(1)
    spec = vector_spec()
    signal = rnd(spec)
    batch = random_batch(spec, 16)

    def features(net: Any, x: torch.Tensor) -> torch.Tensor:
        return F.silu(lin(net.body[0], x))

    expected = ((features(signal.predictor, batch.obs[0]) - features(signal.target, batch.obs[0])) ** 2).sum(1)
    np.testing.assert_allclose(signal.evaluate(batch), expected.detach().numpy(), rtol=1e-5)
    loss, stats = signal.loss(batch)
    assert loss.item() == pytest.approx(expected.mean().item(), rel=1e-5) == stats["Losses/RND Loss"]
    target = [p.clone() for p in signal.target.parameters()]
    signal.update(batch)
    assert all(torch.equal(a, b) for a, b in zip(target, signal.target.parameters()))  # the target never learns
    assert all(not p.requires_grad for p in signal.target.parameters())


def test_rnd_normalizer_uses_the_statistics_from_before_each_batch() -> None:
    spec = vector_spec()
    signal = rnd(spec, network_settings={**SMALL, "normalize": True})
    batch = random_batch(spec, 10, offset=3.0)
    raw = torch.clamp(batch.obs[0], -5.0, 5.0)  # the fresh normalizer: mean 0, variance 1
    expected = ((F.silu(lin(signal.predictor.body[0], raw)) - F.silu(lin(signal.target.body[0], raw))) ** 2).sum(1)
    np.testing.assert_allclose(signal.evaluate(batch), expected.detach().numpy(), rtol=1e-4)
    assert float(signal.normalizer.count) == pytest.approx(10 + 1)  # then it took the batch in, once
    np.testing.assert_allclose(signal.normalizer.mean.numpy(), batch.obs[0].sum(0).numpy() / 11, rtol=1e-5, atol=1e-6)


def test_rnd_reward_drops_for_seen_states_only() -> None:
    torch.manual_seed(2)
    spec = vector_spec(size=4)
    signal = rnd(spec, learning_rate=3e-3, network_settings={"hidden_units": 16, "num_layers": 2})
    seen, unseen = random_batch(spec, 64, offset=2.0, seed=1), random_batch(spec, 64, offset=-2.0, seed=2)
    seen_before, unseen_before = signal.evaluate(seen).mean(), signal.evaluate(unseen).mean()
    losses = [signal.update(seen)["Losses/RND Loss"] for _ in range(60)]
    assert losses[-1] < 0.3 * losses[0]
    seen_after, unseen_after = signal.evaluate(seen).mean(), signal.evaluate(unseen).mean()
    assert seen_after < 0.3 * seen_before
    assert unseen_after > 0.5 * unseen_before and unseen_after > 3 * seen_after


# --------------------------------------------------------------------------- GAIL


def test_discriminator_loss_by_hand() -> None:
    loss = discriminator_loss(torch.tensor([0.9, 0.5]), torch.tensor([0.2, 0.5]))
    expected = -(math.log(0.9 + 1e-7) + math.log(0.8 + 1e-7) + 2 * math.log(0.5 + 1e-7)) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_vail_kl_by_hand() -> None:
    # per code unit: 1 + log sigma^2 - 0.5 mu_e^2 - 0.5 mu_p^2 - sigma^2
    #   unit 0 (sigma 1, mu_e 1, mu_p 0): 1 + 0 - 0.5 - 0 - 1 = -0.5
    #   unit 1 (sigma 2, mu_e 0, mu_p 2): 1 + log 4 - 0 - 2 - 4 = -5 + log 4
    # KL = -(sum) = 5.5 - log 4 (one step); a second step with all zeros: -(1 + 0 - 1) + -(1 + log 4 - 4) = 3 - log 4
    kl = vail_kl(torch.tensor([1.0, 2.0]), torch.tensor([[1.0, 0.0], [0.0, 0.0]]), torch.tensor([[0.0, 2.0], [0.0, 0.0]]))
    assert kl.item() == pytest.approx(((5.5 - math.log(4)) + (3 - math.log(4))) / 2, rel=1e-6)


def test_gradient_penalty_of_a_linear_discriminator() -> None:
    """D(x) = x . w has gradient w everywhere: the penalty is (sqrt(|w|^2 + 1e-7) - 1)^2 whatever
    the interpolation; only the first input's gradient counts (as ML-Agents)."""
    w, v = torch.tensor([3.0, 4.0]), torch.tensor([10.0, 10.0, 10.0])
    policy, expert = [torch.randn(6, 2), torch.randn(6, 3)], [torch.randn(6, 2), torch.randn(6, 3)]
    penalty = gradient_magnitude(lambda xs: xs[0] @ w + xs[1] @ v, policy, expert)
    assert penalty.item() == pytest.approx((math.sqrt(25 + 1e-7) - 1) ** 2, rel=1e-6)
    small = gradient_magnitude(lambda xs: xs[0] @ torch.tensor([0.6, 0.0]), policy[:1], expert[:1])
    assert small.item() == pytest.approx((math.sqrt(0.36 + 1e-7) - 1) ** 2, rel=1e-5)


def test_gradient_penalty_at_the_interpolated_points() -> None:
    """D(x) = 0.5 |x|^2 has gradient x; with policy = expert every interpolate is that point."""
    points = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.6, 0.8]])
    penalty = gradient_magnitude(lambda xs: 0.5 * (xs[0] ** 2).sum(1), [points], [points.clone()])
    norms = torch.sqrt((points**2).sum(1) + 1e-7)
    assert penalty.item() == pytest.approx(((norms - 1) ** 2).mean().item(), rel=1e-5)
    # the penalty has a gradient with respect to the discriminator's parameters
    scale = torch.tensor(2.0, requires_grad=True)
    gradient_magnitude(lambda xs: scale * (xs[0] ** 2).sum(1), [points], [points.clone()]).backward()
    assert scale.grad is not None and scale.grad.item() != 0.0


def test_gail_loss_reward_and_inputs() -> None:
    torch.manual_seed(3)
    spec = vector_spec()
    expert = random_batch(spec, 50, offset=1.0, seed=5)
    signal = gail(spec, expert, use_actions=True)
    first = signal.embedding.body[0]
    assert isinstance(first, torch.nn.Linear) and first.in_features == 3 + 2 + 5 + 1  # obs, actions one-hot, done
    batch = random_batch(spec, 16)
    loss, stats = signal.loss(batch)
    assert set(stats) == {"Losses/GAIL Loss", "Policy/GAIL Policy Estimate", "Policy/GAIL Expert Estimate", "Policy/GAIL Grad Mag Loss"}
    assert loss.item() == pytest.approx(stats["Losses/GAIL Loss"] + stats["Policy/GAIL Grad Mag Loss"], rel=1e-5)
    estimate, _ = signal.estimate(signal.inputs(batch), noise=False)
    expected = -torch.log(1.0 - estimate * (1.0 - 1e-7))
    np.testing.assert_allclose(signal.evaluate(batch), expected.detach().numpy(), rtol=1e-6)
    # the done flag is an input: flipping it changes the estimate
    flipped = batch.select(slice(None))
    flipped.dones = 1.0 - batch.dones
    assert not np.allclose(signal.evaluate(flipped), signal.evaluate(batch))


def test_vail_beta_update_and_loss() -> None:
    torch.manual_seed(4)
    spec = vector_spec()
    signal = gail(spec, random_batch(spec, 50, offset=1.0, seed=5), use_vail=True)
    batch = random_batch(spec, 16)
    with torch.no_grad():
        signal.z_sigma.fill_(2.0)  # KL well above the 0.5 bottleneck: beta must grow
    _, stats = signal.loss(batch)
    kl = stats["Losses/GAIL KL Loss"]
    assert kl > 0.5 and stats["Policy/GAIL Beta"] == pytest.approx(0.0005 * (kl - 0.5), rel=1e-5)
    beta = float(signal.beta)
    loss, stats = signal.loss(batch)
    # this loss used beta from before its own beta step
    expected = stats["Losses/GAIL Loss"] + beta * (stats["Losses/GAIL KL Loss"] - 0.5) + stats["Policy/GAIL Grad Mag Loss"]
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert stats["Policy/GAIL Beta"] == pytest.approx(beta + 0.0005 * (stats["Losses/GAIL KL Loss"] - 0.5), rel=1e-5)
    with torch.no_grad():  # sigma 1 and mu 0: KL 0, so beta moves by -0.0005 * 0.5
        signal.z_sigma.fill_(1.0)
        assert signal.z_mu is not None
        signal.z_mu.weight.zero_()
        signal.z_mu.bias.zero_()
        signal.beta.fill_(1e-4)
    assert signal.loss(batch)[1]["Losses/GAIL KL Loss"] == 0.0
    assert float(signal.beta) == 0.0  # a KL below 0.5 lowers beta, never under 0
    np.testing.assert_array_equal(signal.evaluate(batch), signal.evaluate(batch))  # no code noise when evaluating


@pytest.mark.parametrize("options", [{}, {"use_actions": True, "use_vail": True}])
def test_gail_rewards_expert_like_steps_after_training(options: dict[str, bool]) -> None:
    torch.manual_seed(5)
    spec = vector_spec(size=4)
    signal = gail(spec, random_batch(spec, 256, offset=1.0, seed=6), learning_rate=1e-2, **options)
    policy = random_batch(spec, 64, offset=-1.0, seed=7)
    losses = [signal.update(policy)["Losses/GAIL Loss"] for _ in range(50)]
    assert np.mean(losses[-5:]) < 0.7 * np.mean(losses[:5])
    expert_like, policy_like = random_batch(spec, 64, offset=1.0, seed=8), random_batch(spec, 64, offset=-1.0, seed=9)
    assert signal.evaluate(expert_like).mean() > 2 * signal.evaluate(policy_like).mean()


def test_gail_rejects_demonstrations_of_another_behavior() -> None:
    with pytest.raises(ValueError, match="observation shapes"):
        gail(vector_spec(), random_batch(vector_spec(size=5), 10))
    with pytest.raises(ValueError, match="actions"):
        gail(vector_spec(), random_batch(vector_spec(actions=ActionSpec(1, ())), 10))


# --------------------------------------------------------------------------- all signals


def providers(spec: BehaviorSpec, expert: SignalBatch, **network: Any) -> dict[str, RewardProvider]:
    net = {**SMALL, **network}
    signals = RewardSignals.model_validate(
        {
            "extrinsic": {"gamma": 0.9},
            "curiosity": {"network_settings": net, "strength": 0.02, "learning_rate": 1e-3},
            "gail": {"network_settings": net, "demo_path": "d.demo", "use_actions": True, "use_vail": True, "learning_rate": 1e-3},
            "rnd": {"network_settings": net, "learning_rate": 1e-3},
        }
    )
    return make_reward_providers(signals, spec, expert)


def test_factory_order_names_and_flags() -> None:
    spec = vector_spec()
    built = providers(spec, random_batch(spec, 20))
    assert list(built) == ["extrinsic", "curiosity", "gail", "rnd"]
    assert [p.name for p in built.values()] == list(built)
    assert [p.reward_tag for p in built.values()] == [f"Policy/{n} Reward" for n in ("Extrinsic", "Curiosity", "Gail", "Rnd")]
    assert [p.ignore_done for p in built.values()] == [False, True, False, True]
    assert built["extrinsic"].gamma == pytest.approx(0.9) and built["curiosity"].strength == pytest.approx(0.02)
    assert built["extrinsic"].update(random_batch(spec, 4)) == {}
    with pytest.raises(ValueError, match="demo_path 'd.demo'"):
        make_reward_providers(RewardSignals.model_validate({"gail": {"demo_path": "d.demo"}}), spec, None)
    with pytest.raises(ValueError, match="reward_signals.rnd.network_settings.vis_encode_type: observation 0 is 20x20 pixels; "
                       "'nature_cnn' needs at least 36x36"):
        make_reward_providers(RewardSignals.model_validate({"rnd": {"network_settings": {"vis_encode_type": "nature_cnn"}}}), image_spec(), None)


LOSS_TAG = {"curiosity": "Losses/Curiosity Forward Loss", "gail": "Losses/GAIL Loss", "rnd": "Losses/RND Loss"}


@pytest.mark.parametrize("kind", list(ACTION_SPECS))
def test_every_signal_learns_with_each_action_kind(kind: str) -> None:
    torch.manual_seed(6)
    spec = vector_spec(actions=ACTION_SPECS[kind])
    built = providers(spec, random_batch(spec, 128, offset=1.0, seed=10), hidden_units=16)
    batch = random_batch(spec, 32, offset=-1.0, seed=11)
    for name, signal in built.items():
        rewards = signal.evaluate(batch)
        assert rewards.shape == (32,) and rewards.dtype == np.float32 and np.isfinite(rewards).all()
        if name == "extrinsic":
            continue
        stats = [signal.update(batch) for _ in range(50)]
        first, last = np.mean([s[LOSS_TAG[name]] for s in stats[:5]]), np.mean([s[LOSS_TAG[name]] for s in stats[-5:]])
        assert last < first, (name, first, last)
        if name == "curiosity":
            inverse = [s["Losses/Curiosity Inverse Loss"] for s in stats]
            assert np.mean(inverse[-5:]) < np.mean(inverse[:5])
            assert signal.evaluate(batch).max() <= 1 / 0.02  # the cap: 1 once scaled by strength


@pytest.mark.parametrize("encoder", ["simple", "resnet", "match3", "fully_connected"])  # those that take 20x20 images
def test_image_observations(encoder: str) -> None:
    torch.manual_seed(7)
    spec = image_spec()
    built = providers(spec, random_batch(spec, 32, offset=0.5, seed=12), vis_encode_type=encoder)
    batch = random_batch(spec, 16, seed=13)
    for name, signal in built.items():
        if name != "extrinsic":
            stats = signal.update(batch)
            assert all(np.isfinite(v) for v in stats.values()), (name, stats)
        assert signal.evaluate(batch).shape == (16,)


def roundtrip(state: dict[str, Any]) -> dict[str, Any]:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def test_state_dict_roundtrip_with_the_optimizer() -> None:
    spec = vector_spec()
    expert = random_batch(spec, 40, offset=1.0, seed=14)
    batch = random_batch(spec, 16, seed=15)
    torch.manual_seed(8)
    trained = providers(spec, expert)
    for signal in trained.values():
        for _ in range(3):
            signal.update(batch)
    torch.manual_seed(9)
    fresh = providers(spec, expert)
    for name, signal in fresh.items():
        signal.load_state_dict(roundtrip(trained[name].state_dict()))
        np.testing.assert_array_equal(signal.evaluate(batch), trained[name].evaluate(batch))
        # the same next step: Adam's moments and step counts came along
        torch.manual_seed(10)
        expected = trained[name].update(batch)
        torch.manual_seed(10)
        assert signal.update(batch) == expected, name
        np.testing.assert_array_equal(signal.evaluate(batch), trained[name].evaluate(batch))
    gail_state = trained["gail"].state_dict()
    assert "beta" in gail_state and "_extra_state" in gail_state
    assert isinstance(fresh["gail"], GAILProvider) and isinstance(trained["gail"], GAILProvider)
    assert float(fresh["gail"].beta) == float(trained["gail"].beta)
    with pytest.raises(ValueError, match="optimizer"):
        fresh["rnd"].load_state_dict({**trained["rnd"].state_dict(), "_extra_state": {}})


# --------------------------------------------------------------------------- behavioral cloning


def _fixed_actor(actions: ActionSpec, mu: list[float], log_std: float, logits: list[float], sac: bool = False) -> ActorCritic:
    """An actor whose action distribution is the same for every observation: heads of zero weights
    and the given biases (the mean, the log sigma, the branches' logits)."""
    net = ActorCritic(vector_spec(3, actions), NetworkSettings(**SMALL), conditional_sigma=sac, tanh_squash=sac, critic=not sac)
    with torch.no_grad():
        for head, bias in ((net.mu, mu), (net.log_sigma, [log_std] * len(mu)), (net.logits, logits)):
            if head is not None:
                head.weight.zero_()
                head.bias.copy_(torch.tensor(bias))
        net.log_std.fill_(log_std)
    return net


def test_bc_loss_discrete_is_the_cross_entropy_per_branch_averaged() -> None:
    # branch 0: probabilities 0.25 / 0.75; branch 1: 1/3 each
    net = _fixed_actor(ActionSpec(0, (2, 3)), [], 0.0, [0.0, math.log(3.0), 0.0, 0.0, 0.0])
    obs = [torch.randn(2, 3)]
    discrete = torch.tensor([[1, 2], [0, 0]], dtype=torch.int32)  # as demonstrations hold them
    loss = bc_loss(net, obs, torch.zeros(2, 0), discrete)
    branch0 = (-math.log(0.75) - math.log(0.25)) / 2
    branch1 = math.log(3.0)
    assert loss.item() == pytest.approx((branch0 + branch1) / 2, rel=1e-5)


@pytest.mark.parametrize("sac", [False, True], ids=["ppo", "sac"])
def test_bc_loss_continuous_is_the_mse_of_the_sent_action(sac: bool) -> None:
    """Within the bounds: the MSE between the action the environment would receive for the sample
    (PPO: clamp(x, -3, 3) / 3; SAC: tanh(x)) and the demonstrated one, and its gradient."""
    mu = [1.2, -0.6]
    demo = torch.tensor([[0.5, 0.0], [0.0, -0.25]])
    net = _fixed_actor(ActionSpec(2, ()), mu, -20.0, [], sac=sac)  # sigma e^-20: the sample is the mean
    sent = torch.tanh(torch.tensor(mu)) if sac else torch.tensor(mu) / 3
    loss = bc_loss(net, [torch.randn(2, 3)], demo, torch.zeros(2, 0, dtype=torch.int64))
    assert loss.item() == pytest.approx(float(((sent - demo) ** 2).mean()), rel=1e-5)
    loss.backward()  # reparameterised: the loss moves the mean towards the demonstrated actions
    assert net.mu is not None and net.mu.bias.grad is not None
    expected_grad = (2 * (sent - demo) / demo.numel()).sum(0) * (1 - sent**2 if sac else 1 / 3)
    np.testing.assert_allclose(net.mu.bias.grad.numpy(), expected_grad.numpy(), rtol=1e-4)


@pytest.mark.parametrize("sac", [False, True], ids=["ppo", "sac"])
def test_bc_loss_at_the_bounds_is_met_by_every_sample_beyond_them(sac: bool) -> None:
    """A demonstrated -1 or +1 (a key held down): a sample the environment receives as that bound
    (PPO: beyond 3; SAC: beyond tanh(3)) has no error and no gradient, a sample short of it the
    distance to it, and a sample beyond the opposite bound is still pulled back (no dead clamp)."""
    demo = torch.tensor([[1.0, -1.0]])
    no_actions = torch.zeros(1, 0, dtype=torch.int64)
    for mu, expected in (([3.5, -8.0], [0.0, 0.0]), ([1.5, -2.0], None), ([-4.5, 5.0], None)):
        net = _fixed_actor(ActionSpec(2, ()), mu, -20.0, [], sac=sac)
        loss = bc_loss(net, [torch.randn(1, 3)], demo, no_actions)
        loss.backward()
        assert net.mu is not None and net.mu.bias.grad is not None
        grad = net.mu.bias.grad.numpy()
        m = torch.tensor(mu)
        if expected is not None:
            assert loss.item() == 0.0 and np.all(grad == 0.0)
            continue
        if sac:
            short = (torch.tanh(m) - torch.tensor([math.tanh(3.0), -math.tanh(3.0)])) ** 2
        else:
            short = ((m - torch.tensor([3.0, -3.0])) / 3) ** 2
        assert loss.item() == pytest.approx(float(short.mean()), rel=1e-5)
        assert grad[0] < 0 and grad[1] > 0, grad  # descending the loss moves each mean towards its bound
    assert math.isfinite(loss.item())


def test_bc_loss_continuous_in_expectation_and_hybrid() -> None:
    # sigma 0.5 (raw), within the clamp: E[((mu + sigma eps) / 3 - a)^2] = (mu / 3 - a)^2 + (sigma / 3)^2
    torch.manual_seed(0)
    n = 40000
    net = _fixed_actor(ActionSpec(1, (2,)), [0.3], math.log(0.5), [0.0, math.log(3.0)])
    demo = torch.full((n, 1), -0.2)
    discrete = torch.ones((n, 1), dtype=torch.int64)  # probability 0.75
    loss = bc_loss(net, [torch.randn(n, 3)], demo, discrete)
    expected = (0.1 + 0.2) ** 2 + 0.25 / 9 + -math.log(0.75)  # the MSE plus the cross-entropy
    assert loss.item() == pytest.approx(expected, abs=0.01)
