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

from ml_arl.demo import load_demonstrations
from ml_arl.exceptions import ConfigError
from ml_arl.settings import build_run_options
from ml_arl.trainer_controller import TrainerController

from .simple_envs import SUCCESS_THRESHOLD, last5

PPO = {"trainer_type": "ppo", "hyperparameters": {"learning_rate": 5.0e-3, "learning_rate_schedule": "constant",
                                                  "batch_size": 16, "buffer_size": 64},
       "network_settings": {"num_layers": 1, "hidden_units": 32}}
SAC = {"trainer_type": "sac", "hyperparameters": {"learning_rate": 5.0e-3, "learning_rate_schedule": "constant",
                                                  "batch_size": 8, "buffer_init_steps": 100, "buffer_size": 5000,
                                                  "tau": 0.01, "init_entcoef": 0.01},
       "network_settings": {"num_layers": 1, "hidden_units": 16}}
TRAINERS = {"ppo": PPO, "sac": SAC}


def run(tmp_path: Path, trainer: dict[str, Any], env_args: list[str], run_id: str, **settings: Any) -> TrainerController:
    config = {
        # the run ends once solved (the last 20 returns above 0.9) or at max_steps
        "env_settings": {"env_path": "tests.simple_envs:goal_reach", "env_args": [*env_args, "solved_at=0.9"],
                         "manager": "inprocess", "seed": 1},
        "checkpoint_settings": {"results_dir": str(tmp_path), "run_id": run_id},
        "default_settings": {**trainer, "summary_freq": 100, "max_steps": 1000, **settings},
        "behaviors": {},
    }
    options = build_run_options(config, {}, "test")
    controller = TrainerController(options)
    controller.start_learning()
    return controller


def returns(controller: TrainerController) -> list[float]:
    return list(controller.managers["GoalReach"].recent_rewards)


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
    --inference --record-demo (the recorder of ml_arl.run.demo_recording)."""
    folders = {}
    for kind, env_args in {"continuous": ["continuous=1"], "discrete": ["continuous=0", "discrete=1"]}.items():
        tmp = tmp_path_factory.mktemp(f"expert-{kind}")
        config = {
            "env_settings": {"env_path": "tests.simple_envs:goal_reach", "env_args": env_args, "manager": "inprocess", "seed": 7},
            "checkpoint_settings": {"results_dir": str(tmp), "run_id": "expert", "inference": True, "record_demo": str(tmp / "demos")},
            "default_settings": {"trainer_type": "tests.plugins:GoalExpertTrainer", "max_steps": 600, "summary_freq": 100},
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


@pytest.mark.parametrize("trainer", ["ppo", "sac"])
@pytest.mark.parametrize("kind", ["continuous", "discrete"])
def test_gail_and_behavioral_cloning_learn_from_demonstrations(
    tmp_path: Path, expert_demos: dict[str, Path], trainer: str, kind: str
) -> None:
    demo_path = str(expert_demos[kind])
    env_args = ["continuous=1"] if kind == "continuous" else ["continuous=0", "discrete=1"]
    controller = run(
        tmp_path, TRAINERS[trainer], env_args, "gail", max_steps=500,
        reward_signals={"gail": {"encoding_size": 32, "demo_path": demo_path}},
        behavioral_cloning={"demo_path": demo_path, "steps": 1000},
    )
    assert last5(returns(controller)) > SUCCESS_THRESHOLD, returns(controller)[-10:]
    written = tags(tmp_path, "gail")
    assert {"Losses/GAIL Loss", "Policy/GAIL Expert Estimate", "Policy/GAIL Policy Estimate", "Losses/Pretraining Loss",
            "Policy/Gail Reward"} <= written, written


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
