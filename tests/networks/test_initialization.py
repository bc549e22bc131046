"""Initialisation schemes (network_settings.initialization): ML-Agents' with swish unless told,
CleanRL's orthogonal with tanh, the statistics of each layer against the hand formulas."""

from __future__ import annotations

import math

import pytest
import torch
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType

from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.settings import NetworkSettings

SPEC = BehaviorSpec([ObservationSpec((400,), (DimensionProperty.NONE,), ObservationType.DEFAULT, "obs")], ActionSpec(2, (3,)))


def net(**settings: object) -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic(SPEC, NetworkSettings(hidden_units=256, num_layers=2, **settings))  # type: ignore[arg-type]


def linears(module: torch.nn.Module) -> list[torch.nn.Linear]:
    return [m for m in module.modules() if isinstance(m, torch.nn.Linear)]


@pytest.mark.parametrize("settings,scheme", [({}, "mlagents"), ({"activation": "tanh"}, "orthogonal"),
                                             ({"initialization": "orthogonal"}, "orthogonal"),
                                             ({"activation": "tanh", "initialization": "mlagents"}, "mlagents")])
def test_the_scheme_follows_the_activation_unless_given(settings: dict[str, str], scheme: str) -> None:
    assert NetworkSettings(**settings).init_scheme() == scheme  # type: ignore[arg-type]


def test_mlagents_scheme_by_hand() -> None:
    ac = net()
    first, second = linears(ac.body)
    assert first.weight.std().item() == pytest.approx(1 / math.sqrt(400), rel=0.05)  # LeCun normal: N(0, 1/fan_in)
    assert second.weight.std().item() == pytest.approx(1 / math.sqrt(256), rel=0.05)
    assert ac.mu is not None and ac.logits is not None and ac.value_head is not None
    assert ac.mu.weight.std().item() == pytest.approx(0.2 / math.sqrt(256), rel=0.25)  # x 0.2 (distributions.py)
    assert ac.logits.weight.std().item() == pytest.approx(0.1 / math.sqrt(256), rel=0.25)  # x 0.1
    bound = math.sqrt(6 / (256 + 1))  # Xavier uniform (decoders.py ValueHeads)
    assert ac.value_head.weight.abs().max().item() <= bound
    assert ac.value_head.weight.abs().max().item() > 0.8 * bound
    assert all(float(lin.bias.abs().max()) == 0.0 for lin in linears(ac))


@pytest.mark.parametrize("activation,gain", [("swish", math.sqrt(2)), ("tanh", 5 / 3)])
def test_orthogonal_scheme_by_hand(activation: str, gain: float) -> None:
    ac = net(activation=activation, initialization="orthogonal")
    first, second = linears(ac.body)
    w = second.weight / gain
    assert torch.allclose(w @ w.T, torch.eye(256), atol=1e-4)  # square: orthogonal times the gain
    cols = first.weight / gain  # [256, 400]: orthonormal rows
    assert torch.allclose(cols @ cols.T, torch.eye(256), atol=1e-4)
    assert ac.mu is not None and ac.value_head is not None
    assert ac.mu.weight.norm(dim=1).tolist() == pytest.approx([0.01, 0.01], rel=1e-4)
    assert ac.value_head.weight.norm(dim=1).tolist() == pytest.approx([1.0], rel=1e-4)


def test_actions_start_with_a_deviation_of_one_as_ml_agents() -> None:
    ac = net()
    obs = [torch.randn(5, 400)]
    assert ac.distribution(obs, None).std.tolist() == [[1.0, 1.0]] * 5  # type: ignore[union-attr]


def test_log_std_init_sets_the_starting_deviation_of_ppo_and_sac_and_reaches_the_muscle() -> None:
    ac = net(log_std_init=-0.5)
    obs = [torch.randn(5, 400)]
    std = ac.distribution(obs, None).std
    assert std is not None and torch.allclose(std, torch.full((5, 2), math.exp(-0.5)))
    assert ac.muscle_weights().log_std.tolist() == [-0.5, -0.5]  # what the workers act with
    torch.manual_seed(0)
    sac = ActorCritic(SPEC, NetworkSettings(hidden_units=64, log_std_init=-1.0), conditional_sigma=True, tanh_squash=True, critic=False)
    assert sac.log_sigma is not None and sac.log_sigma.bias.tolist() == [-1.0, -1.0]
    sac_std = sac.distribution(obs, None).std
    assert sac_std is not None and abs(float(sac_std.detach().log().mean()) + 1.0) < 0.3  # the small head weights add little


def test_log_std_init_out_of_range_is_a_config_error() -> None:
    from ml_arl.core.exceptions import ConfigError
    from ml_arl.settings.build import build_run_options

    data = {"behaviors": {"B": {"trainer_type": "ppo", "network_settings": {"log_std_init": 3}}}}
    with pytest.raises(ConfigError) as err:
        build_run_options(data, {}, "c.yaml")
    assert "c.yaml" in str(err.value) and "log_std_init" in str(err.value)
