"""Variable-length observations (Unity's BufferSensor: shape (max_entities, entity_size), VARIABLE_SIZE
among the dimension properties, all-zero padding rows): the entity attention by hand, padding that
changes nothing, torch = numpy muscle = ONNX, and PPO and SAC learning a goal shown only as an entity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import torch
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType

from ml_arl.acting.muscle import Muscle
from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.networks.attention import ATTENTION_EMBEDDING_SIZE, EntityAttention, EntityEncoder, is_variable_length
from ml_arl.networks.onnx_export import check_onnx, export_onnx
from ml_arl.settings import NetworkSettings, build_run_options
from ml_arl.training.controller import TrainerController
from tests.support.simple_envs import SUCCESS_THRESHOLD, last5, stop_when_solved

VARIABLE = (DimensionProperty.VARIABLE_SIZE, DimensionProperty.NONE)


def _spec(shapes: list[tuple[int, ...]], variable: set[int], actions: ActionSpec) -> BehaviorSpec:
    obs = []
    for i, shape in enumerate(shapes):
        props = VARIABLE if i in variable else (DimensionProperty.NONE,) * len(shape)
        obs.append(ObservationSpec(shape, props, ObservationType.DEFAULT, f"obs{i}"))
    return BehaviorSpec(obs, actions)


# name: (observation shapes, indices of the variable-length ones, actions, network settings)
CASES: dict[str, tuple[list[tuple[int, ...]], set[int], ActionSpec, dict[str, Any]]] = {
    "vector+entities": ([(3,), (5, 4)], {1}, ActionSpec(2, ()), {"normalize": True}),
    "entities only": ([(6, 3)], {0}, ActionSpec(0, (3, 2)), {}),
    # two buffers (their entities attended together) between a vector and a small image
    "two buffers+image": ([(4, 2), (2,), (3, 5), (6, 6, 2)], {0, 2}, ActionSpec(1, (3,)),
                          {"normalize": True, "vis_encode_type": "fully_connected"}),
}


def _build(case: str, seed: int = 0, **extra: Any) -> ActorCritic:
    shapes, variable, actions, settings = CASES[case]
    torch.manual_seed(seed)
    net = ActorCritic(_spec(shapes, variable, actions), NetworkSettings(hidden_units=16, **settings, **extra))
    with torch.no_grad():  # weights away from init (zero biases, tiny heads) so every path shows
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    if net.normalize:
        net.normalizer.update(torch.randn(32, net.normalizer.mean.shape[0]) * 2.0 + 1.0)
    return net


def _observations(spec: BehaviorSpec, batch: int, seed: int) -> list[np.ndarray]:
    """Random observations; variable-length ones with 0..max entities per row (row 0: none at all,
    row 1: every slot filled), the padding rows zero and placed anywhere (not only at the end)."""
    rng = np.random.default_rng(seed)
    obs = []
    for o in spec.observation_specs:
        x = (rng.random((batch, *o.shape)) if len(o.shape) == 3 else rng.normal(size=(batch, *o.shape))).astype(np.float32)
        if is_variable_length(o):
            for row in range(batch):
                present = 0 if row == 0 else o.shape[0] if row == 1 else int(rng.integers(1, o.shape[0]))
                x[row, rng.permutation(o.shape[0])[present:]] = 0.0
        obs.append(x)
    return obs


def _torch(obs: list[np.ndarray]) -> list[torch.Tensor]:
    return [torch.as_tensor(o) for o in obs]


# ------------------------------------------------------------------ the layers


def test_encoder_routes_variable_length_observations() -> None:
    net = _build("two buffers+image")
    enc = net.encoder
    assert (enc.vector, enc.visual, enc.variable) == ([1], [3], [0, 2])
    assert net.normalizer.mean.shape == (2,)  # only the vector is normalised
    assert enc.out_size == 2 + 16 + ATTENTION_EMBEDDING_SIZE
    assert enc.entities is not None and enc.entities.self_encoder is not None  # vector + image as the entities' context
    only = _build("entities only").encoder
    assert only.entities is not None and only.entities.self_encoder is None and only.out_size == ATTENTION_EMBEDDING_SIZE


def test_attention_over_one_entity_by_hand() -> None:
    """With one entity present, each head attends only to it: out = LN(LN(x) @ Wv @ Wo + LN(x)) (biases
    added), whatever the masked rows hold."""
    torch.manual_seed(0)
    att = EntityAttention(8, 4)
    with torch.no_grad():
        for p in att.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    x = torch.randn(2, 3, 8)
    present = torch.tensor([[False, True, False], [True, False, False]])
    got = att(x, present).detach().numpy()
    w = {k: (getattr(att, k).weight.detach().numpy().T, getattr(att, k).bias.detach().numpy()) for k in ("value", "out")}

    def ln(v: np.ndarray) -> np.ndarray:
        return (v - v.mean()) / np.sqrt(v.var() + 1e-5)

    for row, col in ((0, 1), (1, 0)):
        e = ln(x[row, col].numpy())
        v = e @ w["value"][0] + w["value"][1]
        want = ln(v @ w["out"][0] + w["out"][1] + e)
        np.testing.assert_allclose(got[row], want, atol=1e-5)


def test_padding_changes_nothing_and_no_entity_gives_zeros() -> None:
    torch.manual_seed(1)
    spec = _spec([(3,), (6, 4)], {1}, ActionSpec(1, ()))
    enc = EntityEncoder(spec, [1], 3)
    own = torch.randn(2, 3)
    entities = torch.randn(2, 3, 4)
    with torch.no_grad():
        want = enc(own, [own, entities])
        padded = torch.zeros(2, 6, 4)
        padded[:, [4, 0, 2]] = entities  # the same entities among padding rows, in another order
        np.testing.assert_allclose(enc(own, [own, padded]).numpy(), want.numpy(), atol=1e-5)
        tiny = padded.clone()
        tiny[:, 1] = 0.04  # squares summing to 0.0064, below 0.01: padding, as ML-Agents reads it
        np.testing.assert_allclose(enc(own, [own, tiny]).numpy(), want.numpy(), atol=1e-5)
        assert not torch.allclose(enc(own, [own, padded[:, :4]]), want)  # an entity fewer does change it
        np.testing.assert_array_equal(enc(own, [own, torch.zeros(2, 6, 4)]).numpy(), 0.0)


def test_variable_length_of_other_ranks_is_refused() -> None:
    for shape in [(4,), (3, 4, 2)]:
        props = (DimensionProperty.VARIABLE_SIZE,) + (DimensionProperty.NONE,) * (len(shape) - 1)
        spec = BehaviorSpec([ObservationSpec(shape, props, ObservationType.DEFAULT, "buffer")], ActionSpec(1, ()))
        with pytest.raises(ValueError, match=r"observation 0 \(buffer\) is variable-length with shape .*\(max_entities, entity_size\)") as err:
            ActorCritic(spec, NetworkSettings(hidden_units=8))
        assert "\n" not in str(err.value)


def test_poca_critic_attends_over_groupmates_with_entities() -> None:
    from ml_arl.networks.encoders import Normalizer
    from ml_arl.trainers.poca.networks import POCACritic

    torch.manual_seed(2)
    spec = _spec([(3,), (5, 4)], {1}, ActionSpec(1, (2,)))
    critic = POCACritic(spec, NetworkSettings(hidden_units=16), Normalizer(3), ["extrinsic"])
    assert critic.encoder.entities is not None
    own = _torch(_observations(spec, 4, seed=6))
    mates = [torch.stack([o, o.flip(0)], dim=1) for o in _torch(_observations(spec, 4, seed=7))]  # [B, 2, *shape]
    present = torch.tensor([[True, False], [True, True], [False, False], [True, False]])
    with torch.no_grad():
        values = critic.values(own, mates, present)
        baselines = critic.baselines(own, mates, torch.randn(4, 2, 1), torch.zeros(4, 2, 1, dtype=torch.long), present)
        other = [m.clone() for m in mates]
        other[1][~present] = torch.randn(int((~present).sum()), 5, 4)  # an absent groupmate's entities are ignored
        np.testing.assert_allclose(critic.values(own, other, present).numpy(), values.numpy(), atol=1e-6)
    assert values.shape == baselines.shape == (4, 1) and torch.isfinite(values).all()


def test_a_variable_length_goal_is_refused_with_hyper_conditioning() -> None:
    spec = BehaviorSpec([
        ObservationSpec((2,), (DimensionProperty.NONE,), ObservationType.DEFAULT, "v"),
        ObservationSpec((3, 2), VARIABLE, ObservationType.GOAL_SIGNAL, "goals"),
    ], ActionSpec(1, ()))
    with pytest.raises(ValueError, match=r"observation 1 \(goals\) is a variable-length goal signal.*goal_conditioning_type: none"):
        ActorCritic(spec, NetworkSettings(hidden_units=8))  # hyper is the default
    net = ActorCritic(spec, NetworkSettings(hidden_units=8, goal_conditioning_type="none"))
    assert net.encoder.variable == [1] and net.encoder.out_size == 2 + ATTENTION_EMBEDDING_SIZE


def test_arl_learn_refuses_a_flat_variable_length_observation_in_one_line(tmp_path: Path) -> None:
    from tests.support.runs import arl_learn_here, tiny_config, write_config

    config = tiny_config("tests.support.simple_envs:entity_reach", max_steps=100)
    config["env_settings"].update({"env_args": ["flat=true"], "manager": "inprocess"})
    proc = arl_learn_here([str(write_config(tmp_path / "c.yaml", config)), "--run-id", "flat"], cwd=tmp_path)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out
    lines = [line for line in out.splitlines() if "variable-length" in line]
    assert len(lines) == 1 and "behavior EntityReach: observation 1 (entities) is variable-length with shape (8,)" in lines[0], out
    assert "(max_entities, entity_size)" in lines[0]


# ------------------------------------------------------------------ torch = numpy = ONNX


@pytest.mark.parametrize("case", list(CASES))
def test_muscle_agrees_with_torch(case: str) -> None:
    net = _build(case)
    obs = _observations(net.spec, 6, seed=2)
    allowed = np.ones((6, sum(net.branches)), bool) if net.branches else None
    muscle = Muscle(net.muscle_weights(), seed=3)
    with torch.no_grad():
        np.testing.assert_allclose(muscle._features(obs), net.encoder(_torch(obs)).numpy(), atol=2e-5)
    info = muscle.act(obs, allowed)
    log_prob, entropy, _ = net.evaluate(
        _torch(obs), torch.as_tensor(allowed) if allowed is not None else None,
        torch.as_tensor(info.continuous), torch.as_tensor(info.discrete).long(),
    )
    np.testing.assert_allclose(info.log_prob, log_prob.detach().numpy(), atol=1e-4)
    np.testing.assert_allclose(info.entropy, entropy.detach().numpy(), atol=1e-5)


def test_recurrent_muscle_agrees_with_torch() -> None:
    from ml_arl.settings.trainer_settings import MemorySettings

    net = _build("vector+entities", memory=MemorySettings(memory_size=8, sequence_length=4))
    obs = _observations(net.spec, 5, seed=4)
    info = Muscle(net.muscle_weights(), seed=0).act(obs, None, agent_ids=np.arange(5))
    log_prob, _, _ = net.evaluate(_torch(obs), None, torch.as_tensor(info.continuous), torch.zeros(5, 0),
                                  memories=torch.zeros(5, 8), critic_memories=torch.zeros(5, 8))
    np.testing.assert_allclose(info.log_prob, log_prob.detach().numpy(), atol=1e-4)


@pytest.mark.parametrize("case", list(CASES))
def test_onnx_agrees_with_torch(case: str, tmp_path: Path) -> None:
    net = _build(case)
    path = tmp_path / "policy.onnx"
    export_onnx(net, str(path))
    check_onnx(str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inputs = {i.name: i.shape for i in session.get_inputs()}
    for i in net.encoder.variable:  # [batch, max_entities, entity_size], as Unity feeds a BufferSensor
        assert inputs[f"obs_{i}"] == ["batch", *net.spec.observation_specs[i].shape]
    obs = _observations(net.spec, 7, seed=5)
    feed = {f"obs_{i}": np.ascontiguousarray(o.transpose(0, 3, 1, 2)) if o.ndim == 4 else o for i, o in enumerate(obs)}
    if net.branches:
        feed["action_masks"] = np.ones((7, sum(net.branches)), np.float32)
    out = dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))
    with torch.no_grad():
        hidden = net.body(net.encoder(_torch(obs)))
        if net.mu is not None:
            want = (torch.clamp(net.mu(hidden), -3.0, 3.0) / 3.0).numpy()
            np.testing.assert_allclose(out["deterministic_continuous_actions"], want, atol=1e-5)
        if net.logits is not None:
            logits = net.logits(hidden)
            start = 0
            for b, size in enumerate(net.branches):
                np.testing.assert_array_equal(out["deterministic_discrete_actions"][:, b],
                                              logits[:, start : start + size].argmax(1).numpy())
                start += size


# ------------------------------------------------------------------ learning


def _config(tmp_path: Path, trainer: str, env_args: list[str], max_steps: int, hyperparameters: dict[str, Any],
            network: dict[str, Any]) -> dict[str, Any]:
    return {
        "env_settings": {"env_path": "tests.support.simple_envs:entity_reach", "env_args": env_args, "manager": "inprocess", "seed": 1},
        "checkpoint_settings": {"results_dir": str(tmp_path), "run_id": trainer},
        "default_settings": {"trainer_type": trainer, "hyperparameters": hyperparameters, "network_settings": network,
                             "summary_freq": 500, "max_steps": max_steps},
        "behaviors": {},
    }


def _train(config: dict[str, Any], solved_at: float) -> list[float]:
    """The run ends once the last 20 returns average ``solved_at``, or at max_steps."""
    controller = TrainerController(build_run_options(config, {}, "test"), callbacks=stop_when_solved(solved_at, "EntityReach"))
    controller.start_learning()
    return list(controller.managers["EntityReach"].recent_rewards)


def test_ppo_learns_a_goal_shown_as_an_entity(tmp_path: Path) -> None:
    hyper = {"learning_rate": 3e-3, "learning_rate_schedule": "constant", "batch_size": 64, "buffer_size": 256, "beta": 1e-3}
    # stop once the last 20 returns average 0.95 (at 0.9 a run can stop with its last 5 just below 0.9); 4 agents
    # act in one call: about as many steps to solve as 1 agent, a third less time
    config = _config(tmp_path, "ppo", ["n_agents=4"], 6000, hyper, {"num_layers": 1, "hidden_units": 32})
    returns = _train(config, 0.95)
    assert last5(returns) > SUCCESS_THRESHOLD, returns[-10:]
    check_onnx(str(tmp_path / "ppo" / "EntityReach.onnx"))


@pytest.mark.slow
def test_poca_learns_a_goal_shown_as_an_entity(tmp_path: Path) -> None:
    """Two agents of one group (POCA's critic attends over the group; each agent's own encoder over
    its entities), each reaching its own goal."""
    hyper = {"learning_rate": 3e-3, "learning_rate_schedule": "constant", "batch_size": 64, "buffer_size": 256, "beta": 1e-3}
    config = _config(tmp_path, "poca", ["grouped=true", "n_agents=2"], 6000, hyper, {"num_layers": 1, "hidden_units": 32})
    returns = _train(config, 0.95)
    assert last5(returns) > SUCCESS_THRESHOLD, returns[-10:]


@pytest.mark.slow
def test_sac_learns_a_goal_shown_as_an_entity(tmp_path: Path) -> None:
    # entities only (no "self" context); ML-Agents' test_var_len_obs_sac trains at batch 16 too. Solved in
    # about 900-1500 steps on seeds 1-3; an update every 2 steps keeps it well inside the time of a test
    hyper = {"learning_rate": 1e-3, "learning_rate_schedule": "constant", "batch_size": 16, "buffer_init_steps": 100,
             "buffer_size": 5000, "tau": 0.01, "init_entcoef": 0.01, "steps_per_update": 2}
    config = _config(tmp_path, "sac", ["vectors=0", "continuous=0", "discrete=1"], 3000, hyper, {"num_layers": 1, "hidden_units": 16})
    returns = _train(config, 0.9)
    assert last5(returns) > SUCCESS_THRESHOLD, returns[-10:]





# ------------------------------------------------------------------ reward signals


def test_reward_signals_take_variable_length_observations() -> None:
    from tests.trainers.test_reward_signals import providers, random_batch

    spec = _spec([(3,), (5, 4)], {1}, ActionSpec(1, (2,)))
    expert, batch = random_batch(spec, 64, offset=1.0, seed=1), random_batch(spec, 32, seed=2)
    for b in (expert, batch):  # padding rows in every observation
        b.obs[1][:, 3:] = 0.0
        b.next_obs[1][:, 2:] = 0.0
    torch.manual_seed(0)
    built = providers(spec, expert, hidden_units=16)
    for name, signal in built.items():
        if name != "extrinsic":
            embedding = getattr(signal, "state_encoder", None) or getattr(signal, "embedding", None) or signal.target
            assert embedding.encoder.entities is not None, name
        rewards = signal.evaluate(batch)
        assert rewards.shape == (32,) and np.isfinite(rewards).all(), name
        losses = signal.update(batch)
        assert all(np.isfinite(v) for v in losses.values()), (name, losses)


# ------------------------------------------------------------------ demonstrations


def test_demo_round_trip_keeps_variable_length_observations(tmp_path: Path) -> None:
    from ml_arl.demonstrations.reader import load_demonstrations, spec_difference
    from tests.demonstrations.test_demonstrations import acted, in_write_order, interleaved, write_demo

    spec = _spec([(3,), (5, 4)], {1}, ActionSpec(1, ()))
    first, second = acted(np.random.default_rng(0), spec, quantized=False)
    for ep in first + second:  # some entity rows padding
        ep.obs[1][:, 3:] = 0.0
    trajectories = interleaved(first, "Buffer", horizon=3) + interleaved(second, "Buffer", horizon=3)
    write_demo(tmp_path / "Buffer.demo", spec, trajectories, behavior="Buffer")
    demo = load_demonstrations(str(tmp_path / "Buffer.demo"))
    assert demo.spec.observation_specs[1].dimension_property == VARIABLE
    expected = in_write_order(trajectories, first + second)
    np.testing.assert_array_equal(demo.obs[1], np.concatenate([ep.obs[1] for ep in expected]))
    assert spec_difference(demo.spec, spec, "behavior Buffer") is None
    fixed = _spec([(3,), (5, 4)], set(), ActionSpec(1, ()))
    assert spec_difference(demo.spec, fixed, "behavior Buffer") == (
        "obs 1 is variable-length (a BufferSensor's) in the demo, of fixed size in behavior Buffer"
    )
