"""PPO learns: the built-in Reach task in its three action variants in this process (the
in-process manager), threaded with subprocess workers (the one learning run through the
subprocess manager here; tests/training/test_arl.py's grid run and tests/envs/test_unity.py learn through it
too), gymnasium CartPole-v1 to a mean return of 475 over 20 episodes, and gymnasium Pendulum-v1
with ML-Agents' default network."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from ml_arl.core.experience import EpisodeStat
from ml_arl.settings import build_run_options
from ml_arl.training.callbacks import Callback, CallbackList, StopOnReward, StopTraining
from ml_arl.training.controller import TrainerController
from tests.support.runs import tiny_config

REACH_THRESHOLD = 0.8  # mean return over the last 20 episodes; random play scores about -0.1


class StopWhenAWorkerSolved(Callback):
    """Stops the run once the last ``window`` returns of ``behavior`` that one worker's environment
    gave (EpisodeStat.agent_id is "<worker>-<agent id>") average ``threshold``."""

    def __init__(self, behavior: str, threshold: float, window: int):
        self.behavior, self.threshold, self.window = behavior, threshold, window
        self.returns: dict[str, deque[float]] = {}

    def on_episode(self, behavior: str, episode: EpisodeStat) -> None:
        if behavior != self.behavior:
            return
        worker = episode.agent_id.split("-", 1)[0]
        last = self.returns.setdefault(worker, deque(maxlen=self.window))
        last.append(episode.reward)
        if len(last) == self.window and float(np.mean(last)) >= self.threshold:
            raise StopTraining(f"worker {worker}: the last {self.window} returns average {np.mean(last):.3f}")


def train(tmp_path: Path, config: dict, behavior: str, stop: Optional[Callback] = None) -> tuple[TrainerController, list[float]]:
    config.setdefault("checkpoint_settings", {}).update({"results_dir": str(tmp_path), "run_id": "learn"})
    config["env_settings"].setdefault("seed", 1)
    options = build_run_options(config, {}, "test")
    controller = TrainerController(options, callbacks=CallbackList([stop]) if stop is not None else None)
    controller.start_learning()
    return controller, list(controller.managers[behavior].recent_rewards)


@pytest.mark.parametrize(
    "env,behavior",
    [("builtin:Reach", "Reach"), ("builtin:ReachDiscrete", "ReachDiscrete"), ("builtin:ReachHybrid", "ReachHybrid")],
)
def test_ppo_learns_reach(tmp_path: Path, env: str, behavior: str) -> None:
    # the run ends once one worker's last 60 returns average 0.9 (a wider window than the assertion's,
    # whose 20 come from both workers), or at 24000 steps
    config = tiny_config(env, max_steps=24000,
                         hyperparameters={"batch_size": 128, "buffer_size": 1024, "learning_rate": 3e-3, "beta": 1e-3, "num_epoch": 4})
    config["env_settings"].update({"manager": "inprocess", "num_envs": 2})
    controller, rewards = train(tmp_path, config, behavior, StopWhenAWorkerSolved(behavior, 0.9, 60))
    assert len(rewards) >= 20
    assert np.mean(rewards[-20:]) >= REACH_THRESHOLD, rewards[-20:]
    print(f"{env}: solved after {controller.trainers[behavior].step} steps")


def test_threaded_trainer_learns(tmp_path: Path) -> None:
    config = tiny_config("builtin:ReachDiscrete", max_steps=12000, threaded=True,
                         hyperparameters={"batch_size": 128, "buffer_size": 1024, "learning_rate": 3e-3, "num_epoch": 4})
    config["env_settings"].update({"manager": "subprocess", "num_envs": 2})
    _, rewards = train(tmp_path, config, "ReachDiscrete")
    assert np.mean(rewards[-20:]) >= REACH_THRESHOLD, rewards[-20:]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["CartPole.yaml", "CartPole-zoo.yaml"])
def test_ppo_solves_cartpole(tmp_path: Path, name: str) -> None:
    """config/ppo/CartPole.yaml (tuned for wall-clock: tanh, threaded) and CartPole-zoo.yaml
    (rl-baselines3-zoo's hyperparameters with ML-Agents' default swish network: issue 22's goal is
    a solve within 100k steps) reach a mean return of 475 over 20 episodes within their max_steps
    (100k for both)."""
    import yaml

    config = yaml.safe_load((Path(__file__).resolve().parents[2] / "config/ppo" / name).read_text())
    config["env_settings"].update({"seed": 1, "manager": "inprocess"})
    # the shipped config (env, hyperparameters and max_steps), in this process; the run stops once
    # the last 20 returns average 475 instead of training on to max_steps
    controller, rewards = train(tmp_path, config, "CartPole", StopOnReward("CartPole", 475, 20))
    assert len(rewards) >= 20
    assert np.mean(rewards[-20:]) >= 475, rewards[-20:]
    print(f"{name}: CartPole solved after {controller.trainers['CartPole'].step} steps")


@pytest.mark.slow
def test_ppo_learns_pendulum_with_mlagents_default_network(tmp_path: Path) -> None:
    """Pendulum-v1 (returns of -1,200 to -150 over 200 steps), ML-Agents' default network (2 x 128
    swish) and PPO settings of a continuous-control config. Values of about -100 per state must be
    learned: with the value loss clipped to +-epsilon around exact stored values (main until issue
    22) the critic crawls and the mean return stays near -1,100 at 80k steps. ML-Agents 1.1.0
    itself, with this config (driven through its TrainerController on the same gymnasium env),
    reached -408 at 60k steps (seed 1). --deterministic: the same curve on every run of a machine."""
    config = {
        "env_settings": {"env_path": "gymnasium:Pendulum-v1", "num_envs": 1, "num_areas": 8, "seed": 1, "deterministic": True},
        "behaviors": {"Pendulum": {
            "trainer_type": "ppo",
            "hyperparameters": {"batch_size": 256, "buffer_size": 2048, "learning_rate": 1.0e-3, "beta": 0.0,
                                "num_epoch": 10, "lambd": 0.95},
            "network_settings": {"normalize": False},
            "reward_signals": {"extrinsic": {"gamma": 0.95}},
            "max_steps": 80000, "time_horizon": 64, "summary_freq": 20000,
        }},
    }
    _, rewards = train(tmp_path, config, "Pendulum")
    assert np.mean(rewards[-20:]) >= -800, rewards[-20:]
