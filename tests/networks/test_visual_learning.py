"""The nature_cnn, resnet and match3 image encoders learn, in the manner of ML-Agents'
test_visual_advanced_ppo: GoalReach with one image observation filled with the goal's sign and no
vector (36x36x3 images, 20x20x3 for resnet, 5x5x5 for match3), one discrete branch, step_size 0.5, ML-Agents' PPO
test hyperparameters (dummy_config.py: batch 16, buffer 64, one layer of 32 units) with
learning_rate 3e-4, at most 900 steps; success = the mean of the last 5 episode returns above 0.5,
as ML-Agents asks of these encoders ("the number of steps is pretty small")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ml_arl.core.exceptions import ConfigError
from ml_arl.networks.onnx_export import check_onnx
from ml_arl.settings import build_run_options
from ml_arl.training.controller import TrainerController
from tests.support.simple_envs import last5, stop_when_solved

PPO = {"trainer_type": "ppo", "hyperparameters": {"learning_rate": 3.0e-4, "learning_rate_schedule": "constant",
                                                  "batch_size": 16, "buffer_size": 64}}
# nature_cnn at its minimum size (ML-Agents trains every encoder but match3 on 36x36); resnet at 20x20,
# above its minimum of 15: its 15 convolutions cost 3 times less than at 36x36
IMAGE_SIZES = {"nature_cnn": [36, 36, 3], "resnet": [20, 20, 3], "match3": [5, 5, 5]}
SUCCESS_THRESHOLD = 0.5
# a run ends early once solved: the last 20 returns above 0.9 (at least 19 goals of 20, which random
# play reaches once in some 50 000 tries; 0.5 would be 15 of 20, once in 50)
SOLVED_AT = 0.9


def _train(tmp_path: Path, encoder: str) -> list[float]:
    env_args = ["continuous=0", "discrete=1", "step_size=0.5", "vectors=0", "images=1", f"image_size={IMAGE_SIZES[encoder]}"]
    network = {"num_layers": 1, "hidden_units": 32, "vis_encode_type": encoder}
    config = {
        "env_settings": {"env_path": "tests.support.simple_envs:goal_reach", "env_args": env_args, "manager": "inprocess", "seed": 1},
        "checkpoint_settings": {"results_dir": str(tmp_path), "run_id": encoder},
        "default_settings": {**PPO, "network_settings": network, "summary_freq": 100, "max_steps": 900},
        "behaviors": {},
    }
    controller = TrainerController(build_run_options(config, {}, "test"), callbacks=stop_when_solved(SOLVED_AT))
    controller.start_learning()
    check_onnx(str(tmp_path / encoder / "GoalReach.onnx"))  # the final export keeps to Unity's contract
    return list(controller.managers["GoalReach"].recent_rewards)


@pytest.mark.parametrize("encoder", ["nature_cnn", "match3"])
def test_visual_encoder_learns_goal_reach(tmp_path: Path, encoder: str) -> None:
    returns = _train(tmp_path, encoder)
    assert last5(returns) > SUCCESS_THRESHOLD, returns[-10:]


@pytest.mark.slow
def test_resnet_learns_goal_reach(tmp_path: Path) -> None:
    """resnet is the heaviest encoder (15 convolutions): 30-50 s on 2 shared cores, two thirds of
    it acting, where in-process numpy's multi-threaded BLAS contends with torch (13 s with
    OPENBLAS_NUM_THREADS=1, as the worker processes run)."""
    returns = _train(tmp_path, "resnet")
    assert last5(returns) > SUCCESS_THRESHOLD, returns[-10:]


@pytest.mark.parametrize("where", ["network_settings", "reward_signals.curiosity.network_settings"])
def test_images_below_the_encoders_minimum_stop_before_training(tmp_path: Path, where: str) -> None:
    """ML-Agents' minimum image size, for the actor's encoder and for a reward signal's: a one-line
    config error naming the setting, the size, the minimum and the encoders that fit."""
    env_args = ["continuous=0", "discrete=1", "vectors=0", "images=1", "image_size=[20, 24, 3]"]
    settings: dict[str, Any] = {**PPO, "max_steps": 100}
    if where == "network_settings":
        settings["network_settings"] = {"vis_encode_type": "nature_cnn"}
    else:
        settings["reward_signals"] = {"extrinsic": {}, "curiosity": {"network_settings": {"vis_encode_type": "nature_cnn"}}}
    config = {
        "env_settings": {"env_path": "tests.support.simple_envs:goal_reach", "env_args": env_args, "manager": "inprocess"},
        "checkpoint_settings": {"results_dir": str(tmp_path), "run_id": "small"},
        "default_settings": settings,
        "behaviors": {},
    }
    with pytest.raises(ConfigError) as err:
        TrainerController(build_run_options(config, {}, "test")).start_learning()
    assert str(err.value) == (
        f"behaviors.GoalReach.{where}.vis_encode_type: observation 0 is 20x24 pixels; 'nature_cnn' needs at least "
        "36x36 (for images this small use 'simple', 'resnet', 'match3' or 'fully_connected')"
    )
    assert not (tmp_path / "small" / "GoalReach").exists()
