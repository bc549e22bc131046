"""Reward signals and imitation end to end: PPO and SAC learn ML-Agents-style goal-reaching tasks
with curiosity, with RND, and from demonstrations (GAIL plus behavioral cloning, no extrinsic
reward, as ML-Agents' test_gail) recorded by ``--record-demo`` from an expert; success = the mean
of the last 5 episode returns above 0.9. ML-Agents' test hyperparameters (dummy_config.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from ml_arl.core.exceptions import ConfigError
from ml_arl.demonstrations import load_demonstrations
from ml_arl.settings import build_run_options
from ml_arl.training.controller import TrainerController
from tests.support.simple_envs import SUCCESS_THRESHOLD, last5, stop_when_solved

PPO = {"trainer_type": "ppo", "hyperparameters": {"learning_rate": 5.0e-3, "learning_rate_schedule": "constant",
                                                  "batch_size": 16, "buffer_size": 64},
       "network_settings": {"num_layers": 1, "hidden_units": 32}}
SAC = {"trainer_type": "sac", "hyperparameters": {"learning_rate": 5.0e-3, "learning_rate_schedule": "constant",
                                                  "batch_size": 8, "buffer_init_steps": 100, "buffer_size": 5000,
                                                  "tau": 0.01, "init_entcoef": 0.01},
       "network_settings": {"num_layers": 1, "hidden_units": 16}}
TRAINERS = {"ppo": PPO, "sac": SAC}


def run(tmp_path: Path, trainer: dict[str, Any], env_args: list[str], run_id: str, stop_once_solved: bool = True,
        learners: int = 1, env_path: str = "tests.support.simple_envs:goal_reach", **settings: Any) -> TrainerController:
    config = {
        "torch_settings": {"num_learners": learners},
        "env_settings": {"env_path": env_path, "env_args": env_args, "manager": "inprocess", "seed": 1},
        "checkpoint_settings": {"results_dir": str(tmp_path), "run_id": run_id},
        "default_settings": {**trainer, "summary_freq": 100, "max_steps": 1000, **settings},
        "behaviors": {},
    }
    options = build_run_options(config, {}, "test")
    # the run ends once solved (the last 20 returns average 0.9) or at max_steps
    controller = TrainerController(options, callbacks=stop_when_solved(0.9) if stop_once_solved else None)
    controller.start_learning()
    return controller


def returns(controller: TrainerController) -> list[float]:
    return list(next(iter(controller.managers.values())).recent_rewards)


def tags(tmp_path: Path, run_id: str) -> set[str]:
    events = EventAccumulator(str(tmp_path / run_id / "GoalReach"))
    events.Reload()
    return set(events.Tags()["scalars"])


@pytest.mark.parametrize("trainer", ["ppo", "sac"])
@pytest.mark.parametrize("signal", ["curiosity", "rnd"])
def test_intrinsic_signals_learn_with_the_task(tmp_path: Path, trainer: str, signal: str) -> None:
    signals = {"extrinsic": {"gamma": 0.99}, signal: {"gamma": 0.99, "strength": 0.01, "encoding_size": 32}}
    controller = run(tmp_path, TRAINERS[trainer], ["continuous=1"], "intrinsic", reward_signals=signals)
    assert last5(returns(controller)) > SUCCESS_THRESHOLD, returns(controller)[-10:]
    name = signal.capitalize()
    value_tag = "Value Estimate" if trainer == "ppo" else "Value"
    loss_tags = {"curiosity": {"Losses/Curiosity Forward Loss", "Losses/Curiosity Inverse Loss"}, "rnd": {"Losses/RND Loss"}}
    written = tags(tmp_path, "intrinsic")
    assert {f"Policy/{name} Reward", f"Policy/{name} {value_tag}", "Policy/Extrinsic Reward"} | loss_tags[signal] <= written, written


@pytest.fixture(scope="module")
def expert_demos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """.demo files of the goal-reaching expert (continuous and discrete), written by arl-learn
    --inference --record-demo (the recorder of ml_arl.training.demo_recording)."""
    folders = {}
    for kind, env_args in {"continuous": ["continuous=1"], "discrete": ["continuous=0", "discrete=1"]}.items():
        tmp = tmp_path_factory.mktemp(f"expert-{kind}")
        config = {
            "env_settings": {"env_path": "tests.support.simple_envs:goal_reach", "env_args": env_args, "manager": "inprocess", "seed": 7},
            "checkpoint_settings": {"results_dir": str(tmp), "run_id": "expert", "inference": True, "record_demo": str(tmp / "demos")},
            "default_settings": {"trainer_type": "tests.support.plugins:GoalExpertTrainer", "max_steps": 600, "summary_freq": 100},
            "behaviors": {},
        }
        TrainerController(build_run_options(config, {}, "test")).start_learning()
        folders[kind] = tmp / "demos"
    return folders


def test_recorded_expert_demonstrations_are_ml_agents_demos(expert_demos: dict[str, Path]) -> None:
    demo = load_demonstrations(str(expert_demos["continuous"]))
    assert demo.episodes >= 50 and demo.mean_reward > 0.95
    np.testing.assert_array_equal(np.abs(demo.continuous), 1.0)  # what the env received, not the muscle's 3 x
    assert np.array_equal(np.sign(demo.continuous[:, 0]), np.sign(demo.obs[0][:, 0]))
    discrete = load_demonstrations(str(expert_demos["discrete"]))
    assert discrete.spec.action_spec.discrete_branches == (2,)
    assert np.array_equal(discrete.discrete[:, 0], (discrete.obs[0][:, 0] > 0).astype(int))


# (SAC on continuous actions: the ML-Agents-made demonstrations' test below; its cloning passes over these 500
# steps, once per gradient step as ML-Agents', cost the suite 15 s more)
@pytest.mark.parametrize("trainer, kind", [("ppo", "continuous"), ("ppo", "discrete"), ("sac", "discrete")])
def test_gail_and_behavioral_cloning_learn_from_demonstrations(
    tmp_path: Path, expert_demos: dict[str, Path], trainer: str, kind: str
) -> None:
    """The continuous demonstrations hold actions of exactly -1 and +1 only (the expert's, as a key
    held down): behavioral cloning and GAIL meet them at the bounds, for PPO and SAC alike. As
    ML-Agents' test_gail: its hyperparameters, 500 steps, judged at the end (no early stop once
    solved). Beyond 500 steps SAC's returns fall as behavioral cloning's weight runs out (GAIL's
    survival bias: docs/imitation.md)."""
    demo_path = str(expert_demos[kind])
    env_args = ["continuous=1"] if kind == "continuous" else ["continuous=0", "discrete=1"]
    controller = run(
        tmp_path, TRAINERS[trainer], env_args, "gail", stop_once_solved=False, max_steps=500,
        reward_signals={"gail": {"encoding_size": 32, "demo_path": demo_path}},
        behavioral_cloning={"demo_path": demo_path, "steps": 1000},
    )
    assert last5(returns(controller)) > SUCCESS_THRESHOLD, returns(controller)[-10:]
    written = tags(tmp_path, "gail")
    assert {"Losses/GAIL Loss", "Policy/GAIL Expert Estimate", "Policy/GAIL Policy Estimate", "Losses/Pretraining Loss",
            "Policy/Gail Reward"} <= written, written


DATA = Path(__file__).resolve().parents[1] / "data"
FIXTURE_TASKS = {"GoalReach": ("tests.support.simple_envs:goal_reach", ["continuous=1"]), "Momentum": ("tests.support.momentum_env:momentum", [])}


@pytest.mark.parametrize("trainer", ["ppo", "sac"])
@pytest.mark.parametrize("task", ["GoalReach", "Momentum"])
def test_gail_and_behavioral_cloning_learn_from_demonstrations_made_as_ml_agents_tests_make_them(
    tmp_path: Path, trainer: str, task: str
) -> None:
    """ML-Agents' test_gail protocol on demonstrations ML-Agents' own writer wrote the way its
    simple_record fixture records them (tests/data/record_mlagents_fixture_demos.py): no terminal
    records, an episode's first record carrying the previous episode's last action, the last 100
    records only (79 and 83 steps). GoalReach is ML-Agents' task; Momentum (the action a force) is
    a second one with other dynamics. SAC passed 1 and 1 of 5 seeds of each before its behavioral
    cloning ran once per gradient step, as ML-Agents' does (docs/imitation.md)."""
    demo_path = str(DATA / f"{'goal_reach' if task == 'GoalReach' else 'momentum'}_mlagents.demo")
    demo = load_demonstrations(demo_path)
    assert demo.episodes == 0 and demo.steps < 90  # what makes these files unlike our recorder's
    env_path, env_args = FIXTURE_TASKS[task]
    controller = run(
        tmp_path, TRAINERS[trainer], env_args, "fixture", stop_once_solved=False, env_path=env_path, max_steps=500,
        reward_signals={"gail": {"encoding_size": 32, "demo_path": demo_path}},
        behavioral_cloning={"demo_path": demo_path, "steps": 1000},
    )
    assert last5(returns(controller)) > SUCCESS_THRESHOLD, returns(controller)[-10:]


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["ppo"])
def test_gail_and_behavioral_cloning_learn_with_two_learners(tmp_path: Path, trainer: str) -> None:
    """The GoalReach test above with --num-learners 2: each learner steps GAIL on its half of every
    minibatch (its own expert rows), behavioral cloning runs on rank 0; the same 500 steps, the same bar.
    (SAC passes it too, in 10-18 s: tests/trainers/test_learner_signals.py checks SAC's signals in a group.)"""
    demo_path = str(DATA / "goal_reach_mlagents.demo")
    controller = run(
        tmp_path, TRAINERS[trainer], ["continuous=1"], "gail-2", stop_once_solved=False, learners=2, max_steps=500,
        reward_signals={"gail": {"encoding_size": 32, "demo_path": demo_path}},
        behavioral_cloning={"demo_path": demo_path, "steps": 1000},
    )
    assert last5(returns(controller)) > SUCCESS_THRESHOLD, returns(controller)[-10:]
    assert (tmp_path / "gail-2" / "run_logs" / "learner-1.log").is_file()
    assert {"Losses/GAIL Loss", "Losses/Pretraining Loss"} <= tags(tmp_path, "gail-2")


def test_mismatched_or_missing_demonstrations_stop_before_training(tmp_path: Path, expert_demos: dict[str, Path]) -> None:
    # the expert acted with 1 continuous action; this behavior has 2
    with pytest.raises(ConfigError) as err:
        run(tmp_path, PPO, ["continuous=2"], "mismatch", reward_signals={"gail": {"demo_path": str(expert_demos["continuous"])}})
    assert len(str(err.value).splitlines()) == 1
    assert "behaviors.GoalReach.reward_signals.gail.demo_path" in str(err.value)
    assert not (tmp_path / "mismatch" / "GoalReach").exists()
    with pytest.raises(ConfigError) as err:
        run(tmp_path, PPO, ["continuous=1"], "missing", behavioral_cloning={"demo_path": str(tmp_path / "nope.demo")})
    assert "behaviors.GoalReach.behavioral_cloning.demo_path" in str(err.value) and "nope.demo" in str(err.value)


@pytest.mark.parametrize("trainer", ["ppo", "sac", "poca"])
def test_behavioral_cloning_alone_sends_the_expert_action_at_the_bound(trainer: str, expert_demos: dict[str, Path]) -> None:
    """The GoalReach expert's demonstrations hold exactly -1 and +1 (a key held down). Behavioral
    cloning alone (its passes of 30 updates, no RL loss) must teach every trainer, POCA's included,
    to send the bound itself: PPO's and POCA's raw mean beyond 3 - a little (what the environment
    receives is clamp(x, -3, 3) / 3), SAC's squashed mean beyond 0.98 with its pre-image finite.
    ML-Agents' loss, the raw sample against the sent action, would leave PPO's and POCA's sent
    action near 1/3, and drive SAC's pre-image on without end."""
    import torch

    from ml_arl.results.summary_writers import StatsReporter
    from ml_arl.settings import TrainerSettings
    from ml_arl.trainers.poca.trainer import POCATrainer
    from ml_arl.trainers.ppo.trainer import PPOTrainer
    from ml_arl.trainers.sac.trainer import SACTrainer

    torch.manual_seed(0)
    demo = str(expert_demos["continuous"])
    spec = load_demonstrations(demo).spec
    base = {**(SAC if trainer == "sac" else PPO), "trainer_type": trainer}
    settings = TrainerSettings.model_validate({**base, "behavioral_cloning": {"demo_path": demo, "strength": 1.0}})
    cls = {"ppo": PPOTrainer, "sac": SACTrainer, "poca": POCATrainer}[trainer]
    learner = cls("GoalReach", settings, spec, StatsReporter("GoalReach", []), None, torch.device("cpu"))
    assert learner.bc is not None
    losses = [learner.bc.update(0)["Losses/Pretraining Loss"] for _ in range(30)]
    assert losses[-1] < losses[0] / 4, losses
    with torch.no_grad():
        dist = learner.network.distribution([torch.tensor([[1.0], [-1.0]])], None, None)
        assert dist.mu is not None
        mean = dist.mu[:, 0]
    if trainer == "sac":
        assert float(torch.tanh(mean[0])) > 0.98 and float(torch.tanh(mean[1])) < -0.98, mean
        assert float(mean.abs().max()) < 6.0, mean  # met at the bound: the pre-image does not run off to infinity
    else:
        assert float(mean[0]) > 2.7 and float(mean[1]) < -2.7, mean


@pytest.fixture(scope="module")
def keyboard_demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """.demo files of a keyboard heuristic on the builtin Reach (tests.support.plugins.KeyboardMuscle: every
    continuous action exactly -1 or +1), written by arl-learn --inference --record-demo."""
    tmp = tmp_path_factory.mktemp("keyboard")
    config = {
        "env_settings": {"env_path": "builtin:Reach", "manager": "inprocess", "seed": 7},
        "checkpoint_settings": {"results_dir": str(tmp), "run_id": "keys", "inference": True, "record_demo": str(tmp / "demos")},
        "default_settings": {"trainer_type": "tests.support.plugins:KeyboardTrainer", "max_steps": 2000, "summary_freq": 1000},
        "behaviors": {},
    }
    TrainerController(build_run_options(config, {}, "test")).start_learning()
    return tmp / "demos"


def test_ppo_imitates_a_keyboard_demonstration_at_full_speed(tmp_path: Path, keyboard_demos: Path) -> None:
    """GAIL plus behavioral cloning (no extrinsic reward) from a keyboard heuristic on the builtin
    Reach, where the speed is the action (a move of 0.2 x action per step, 25 steps at most): the
    imitator must move as fast as the keys did. The mean of its last 20 returns reaches 0.93 (the
    expert's is 0.967; with ML-Agents' BC loss, which taught a third of the action, 0.80 to 0.90)."""
    demo = load_demonstrations(str(keyboard_demos))
    np.testing.assert_array_equal(np.abs(demo.continuous), 1.0)
    assert demo.mean_reward > 0.95
    config = {
        "env_settings": {"env_path": "builtin:Reach", "manager": "inprocess", "seed": 1},
        "checkpoint_settings": {"results_dir": str(tmp_path), "run_id": "keys"},
        "default_settings": {**PPO, "summary_freq": 500, "max_steps": 1500,
                             "reward_signals": {"gail": {"encoding_size": 32, "demo_path": str(keyboard_demos)}},
                             "behavioral_cloning": {"demo_path": str(keyboard_demos), "steps": 1500}},
        "behaviors": {},
    }
    controller = TrainerController(build_run_options(config, {}, "test"))
    controller.start_learning()
    recent = list(controller.managers["Reach"].recent_rewards)[-20:]
    assert len(recent) == 20 and float(np.mean(recent)) > 0.93, recent
