"""The quick start (ml_arl.training.quick_start): first weights drawn in numpy as the torch network
draws them, taken by the trainer, steps held while torch imports routed on-policy; runs it cannot
serve exactly start without it; what fails in its thread reaches the caller."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, ObservationSpec, ObservationType
from mlagents_envs.base_env import DimensionProperty as D

import ml_arl
from ml_arl.core.exceptions import WorkerError
from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.settings import NetworkSettings, TrainerSettings, build_run_options
from ml_arl.training.controller import TrainerController
from ml_arl.training.quick_start import QuickStart, behavior_problem, initial_actor, run_problem
from tests.support.runs import ROOT, tiny_config


def _spec(obs: int = 48, n_cont: int = 6, branches: tuple[int, ...] = (3, 4)) -> BehaviorSpec:
    observation = ObservationSpec((obs,), (D.NONE,), ObservationType.DEFAULT, "vector")
    return BehaviorSpec([observation], ActionSpec(n_cont, branches))


@pytest.mark.parametrize("activation", ["swish", "tanh"])
def test_initial_actor_draws_as_the_torch_network(activation: str) -> None:
    spec = _spec()
    net = NetworkSettings(hidden_units=256, num_layers=2, activation=activation, normalize=True, log_std_init=-0.5)
    torch.manual_seed(0)
    ours, theirs = initial_actor(spec, net, seed=5), ActorCritic(spec, net).muscle_weights()
    for a, b in zip([*ours.body, ours.mu, ours.logits], [*theirs.body, theirs.mu, theirs.logits]):
        assert a.w.shape == b.w.shape and a.w.dtype == b.w.dtype == np.float32
        assert not a.b.any() and not b.b.any()
        if net.init_scheme() == "mlagents":  # N(0, gain^2 / fan_in): the same spread, other draws
            assert np.std(a.w) == pytest.approx(np.std(b.w), rel=0.12)
        else:  # orthogonal: the smaller side orthonormal, times the same gain
            small = a.w.T @ a.w if a.w.shape[0] >= a.w.shape[1] else a.w @ a.w.T
            gain2 = (b.w.T @ b.w if b.w.shape[0] >= b.w.shape[1] else b.w @ b.w.T)[0, 0]
            np.testing.assert_allclose(small, gain2 * np.eye(len(small)), atol=1e-5)
    assert np.std(ours.body[0].w) == pytest.approx(1 / math.sqrt(48) if activation == "swish" else (5 / 3) / math.sqrt(256), rel=0.05)
    np.testing.assert_array_equal(ours.log_std, theirs.log_std)
    np.testing.assert_array_equal(ours.norm_mean, theirs.norm_mean)
    np.testing.assert_array_equal(ours.norm_std, theirs.norm_std)
    assert (ours.activation, ours.branches, ours.tanh_squash) == (theirs.activation, theirs.branches, theirs.tanh_squash)
    assert not np.array_equal(ours.body[0].w, initial_actor(spec, net, seed=6).body[0].w)


def test_a_network_takes_the_numpy_actor_exactly() -> None:
    spec, net = _spec(obs=5, n_cont=2, branches=(3,)), NetworkSettings(hidden_units=16, num_layers=3)
    weights = initial_actor(spec, net, seed=1)
    network = ActorCritic(spec, net)
    critic_before = [p.detach().clone() for p in network.critic_body.parameters()]
    network.load_actor(weights)
    back = network.muscle_weights()
    for a, b in zip([*weights.body, weights.mu, weights.logits], [*back.body, back.mu, back.logits]):
        np.testing.assert_array_equal(a.w, b.w)
        np.testing.assert_array_equal(a.b, b.b)
    for before, after in zip(critic_before, network.critic_body.parameters()):
        assert torch.equal(before, after)  # the critic keeps its own


def test_the_quick_start_imports_no_torch() -> None:
    code = "import sys, ml_arl.training.quick_start; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60).returncode == 0


def _options(tmp_path: Path, env: dict[str, Any] | None = None, **top: Any) -> Any:
    config = tiny_config("builtin:Reach")
    config["env_settings"].update(env or {})
    config.update(top)
    return build_run_options(config, {"checkpoint_settings": {"results_dir": str(tmp_path), "run_id": "q"}}, "test")


def test_which_runs_and_behaviors_it_serves(tmp_path: Path) -> None:
    assert run_problem(_options(tmp_path)) is None
    assert run_problem(_options(tmp_path, {"manager": "inprocess"})) == "env_settings.manager is inprocess"
    assert run_problem(_options(tmp_path, {"deterministic": True, "seed": 1})) == "--deterministic"
    assert run_problem(_options(tmp_path, environment_parameters={"goal": 0.5})) == "the run has environment parameters"
    spec = _spec()
    assert behavior_problem(spec, TrainerSettings()) is None
    assert behavior_problem(spec, TrainerSettings(trainer_type="sac")) == "trainer_type sac"
    assert behavior_problem(spec, TrainerSettings(network_settings={"memory": {"memory_size": 8}})) == "memory"
    assert behavior_problem(spec, TrainerSettings(self_play={})) == "self_play"
    image = BehaviorSpec([ObservationSpec((8, 8, 3), (D.TRANSLATIONAL_EQUIVARIANCE, D.TRANSLATIONAL_EQUIVARIANCE, D.NONE), ObservationType.DEFAULT, "i")],
                         ActionSpec(1, ()))
    assert behavior_problem(image, TrainerSettings()) == "observations that are not vectors"
    goal = BehaviorSpec([ObservationSpec((2,), (D.NONE,), ObservationType.GOAL_SIGNAL, "g")], ActionSpec(1, ()))
    assert behavior_problem(goal, TrainerSettings()) == "goal conditioning"


def test_held_steps_are_on_policy_and_routed_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread steps until a buffer's worth is held (waited for here: in this process torch is
    imported already); the trainer starts from the weights it acted with, so every held step's
    log-probability is the trainer's own; the run counts them and goes on from there."""
    take = QuickStart.take
    monkeypatch.setattr(QuickStart, "take", lambda self: (self.join(60), take(self))[1])
    checked: list[int] = []
    route = TrainerController._route_quick_start

    def check_then_route(self: TrainerController) -> None:
        assert self.quick is not None and self.quick.first_step_time is not None
        network = self.trainers["Reach"].network  # type: ignore[attr-defined]
        trajectories = [t for b in self.quick.batches for t in b.trajectories]
        assert sum(len(t) for t in trajectories) >= 512  # the buffer it was asked to fill
        with torch.no_grad():
            for traj in trajectories:
                obs = [torch.as_tensor(o) for o in traj.obs]
                log_prob = network.evaluate(obs, None, torch.as_tensor(traj.continuous), torch.as_tensor(traj.discrete))[0]
                np.testing.assert_allclose(log_prob.numpy(), traj.log_prob, atol=1e-4)
        checked.append(len(trajectories))
        route(self)

    monkeypatch.setattr(TrainerController, "_route_quick_start", check_then_route)
    run = ml_arl.train(tiny_config("builtin:Reach", max_steps=1500), run_id="quick", results_dir=str(tmp_path),
                       num_envs=2, seed=4)
    assert checked and checked[0] > 0
    assert run.steps["Reach"] >= 1500
    assert (tmp_path / "quick" / "Reach.onnx").is_file()


def test_what_fails_in_the_thread_reaches_the_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-restartable environment error at the quick start's 5th step (before the trainer takes
    over) stops the run with the error the run would raise without the quick start."""
    take = QuickStart.take
    monkeypatch.setattr(QuickStart, "take", lambda self: (self.join(60), take(self))[1])
    env_args = ["fault=value_error", "at_step=5", "message=quick start fault"]
    with pytest.raises(WorkerError, match="quick start fault at step 5"):
        ml_arl.train(tiny_config("tests.support.fault_envs:make_env"), run_id="fault", results_dir=str(tmp_path),
                     num_envs=1, seed=4, env_args=env_args)


def test_a_phased_run_starts_as_its_first_phase_asks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first phase plays the Attacker with the greedy rule and trains the Defender: the quick
    start sends the rule to the Attacker and holds only the Defender's trajectories."""
    from ml_arl.settings.run import policy_path

    take = QuickStart.take
    monkeypatch.setattr(QuickStart, "take", lambda self: (self.join(60), take(self))[1])
    seen: dict[str, Any] = {}
    route = TrainerController._route_quick_start

    def look_then_route(self: TrainerController) -> None:
        assert self.quick is not None
        seen["behaviors"] = {t.behavior for b in self.quick.batches for t in b.trajectories}
        seen["muscles"] = {b: m.muscle for b, m in self.env_manager.policies.items()}
        route(self)

    monkeypatch.setattr(TrainerController, "_route_quick_start", look_then_route)
    config = tiny_config("builtin:GridDefense", max_steps=100000, time_horizon=24)
    config["env_settings"].update({"num_areas": 2})
    config["behaviors"] = {"Defender": {"role": "defender"}, "Attacker": {"role": "attacker"}}
    config["phases"] = [{"name": "first", "learn": ["Defender"], "play": {"Attacker": {"name": "greedy"}}, "max_steps": 600}]
    run = ml_arl.train(config, run_id="phased", results_dir=str(tmp_path), num_envs=2, seed=4)
    assert seen["behaviors"] == {"Defender"}
    assert seen["muscles"] == {"Attacker": policy_path("greedy"), "Defender": None}
    assert run.steps["Defender"] >= 600 and run.phases[0]["state"] == "done"
