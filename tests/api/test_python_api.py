"""The Python API (ml_arl.train, callbacks, load_policy, evaluate) on the built-in Reach task:
a callback stops a run cleanly and it saves as Ctrl-C does, the hooks come in order, the policy
loads from the run folder, a checkpoint and the ONNX model and acts the same way, errors are the
CLI's one-line errors raised, and resume=True continues the run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ml_arl
from ml_arl.api.eval_callback import EvalCallback
from ml_arl.core.exceptions import ConfigError, RunDirectoryError
from ml_arl.core.experience import EpisodeStat
from ml_arl.training.callbacks import Callback, CheckpointEvery, StopOnReward, StopTraining, Summary
from tests.support.runs import scalars, tiny_config


def reach(max_steps: int = 3000, **trainer: Any) -> dict[str, Any]:
    config = tiny_config("builtin:Reach", max_steps=max_steps, **trainer)
    config["env_settings"].update({"manager": "inprocess", "num_envs": 1, "seed": 1})
    return config


class Recorder(Callback):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_start(self, run: Any) -> None:
        self.events.append(("start", run.run_id))

    def on_phase(self, name: str) -> None:
        self.events.append(("phase", name))

    def on_episode(self, behavior: str, episode: EpisodeStat) -> None:
        self.events.append(("episode", behavior))

    def on_summary(self, summary: Summary) -> None:
        self.events.append(("summary", summary.step))

    def on_checkpoint(self, path: str) -> None:
        self.events.append(("checkpoint", path))


def test_stop_on_reward_stops_saves_and_the_policy_loads_from_folder_checkpoint_and_onnx(tmp_path: Path) -> None:
    stop = StopOnReward("Reach", threshold=0.5, window=10)
    run = ml_arl.train(reach(max_steps=30000), run_id="api", results_dir=str(tmp_path), callbacks=[stop])
    assert run.finished and not run.interrupted
    assert run.stopped is not None and "StopOnReward" in run.stopped
    assert stop.mean is not None and stop.mean >= 0.5
    assert run.steps["Reach"] < 30000
    assert "Environment/Cumulative Reward" in run.stats["Reach"]  # the last partial period's summary
    checkpoint = Path(run.path) / "Reach" / "checkpoint.pt"
    assert checkpoint.is_file() and run.onnx("Reach") is not None
    assert run.phases[0]["name"] == "train"

    live = run.policy()
    from_folder = ml_arl.load_policy(run.path)
    from_pt = ml_arl.load_policy(str(checkpoint))
    from_onnx = ml_arl.load_policy(run.onnx("Reach"))
    obs = np.random.default_rng(0).normal(size=(16, *live.spec.observation_specs[0].shape)).astype(np.float32)
    expected = live.act(obs)
    for policy in (from_folder, from_pt, from_onnx):
        np.testing.assert_allclose(policy.act(obs), expected, atol=1e-4)
    assert np.shape(live.act(obs[0])) == np.shape(expected[0])  # one observation: no batch axis
    returns = ml_arl.evaluate(from_folder, "builtin:Reach", episodes=10)
    assert len(returns) == 10 and np.mean(returns) >= 0.3, returns
    assert ml_arl.evaluate(from_onnx, "builtin:Reach", episodes=10) == pytest.approx(returns, abs=1e-3)


def test_hooks_come_in_order_and_a_callback_stops_the_first_of_two_phases(tmp_path: Path) -> None:
    config = reach(max_steps=4000, summary_freq=500, checkpoint_interval=500)
    config["phases"] = [{"name": "first", "max_steps": 4000}, {"name": "second", "max_steps": 1000}]
    recorder = Recorder()

    class StopAtSecondSummary(Callback):
        summaries = 0

        def on_summary(self, summary: Summary) -> bool:
            self.summaries += 1
            return self.summaries < 2

    run = ml_arl.train(config, run_id="hooks", results_dir=str(tmp_path), callbacks=[recorder, StopAtSecondSummary()])
    kinds = [kind for kind, _ in recorder.events]
    assert kinds[0] == "start" and kinds[1] == "phase" and recorder.events[1] == ("phase", "first")
    assert ("phase", "second") not in recorder.events  # stopped in the first phase
    assert "episode" in kinds and kinds.count("summary") >= 2
    saved = [p for kind, p in recorder.events if kind == "checkpoint"]
    assert saved and all(os.path.isfile(p) for p in saved)
    assert run.stopped == "StopAtSecondSummary.on_summary returned False"
    assert [p["state"] for p in run.phases] == ["running", "pending"]
    # resume=True continues where the stop left it, through the second phase
    again = ml_arl.train(config, run_id="hooks", results_dir=str(tmp_path), resume=True, callbacks=[recorder])
    assert again.stopped is None and ("phase", "second") in recorder.events
    assert [p["state"] for p in again.phases] == ["done", "done"]


def test_eval_and_checkpoint_every_write_their_outputs(tmp_path: Path) -> None:
    evaluation = EvalCallback("Reach", every=1000, episodes=3)
    every = CheckpointEvery(1000)
    run = ml_arl.train(reach(max_steps=3000, summary_freq=1000, checkpoint_interval=100000), run_id="eval",
                       results_dir=str(tmp_path), callbacks=[evaluation, every])
    assert [step for step, _ in evaluation.results][:2] >= [1000, 2000] and len(evaluation.results) >= 2
    assert len(every.saved) >= 2 and os.path.isfile(every.saved[-1])  # keep_checkpoints: 2 removes the oldest
    assert scalars(Path(run.path) / "Reach", "Eval/Mean Return")


def test_bad_input_raises_the_clis_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        ml_arl.train(reach(), run_id="bad", results_dir=str(tmp_path), num_env=2)
    assert err.value.problems == ["train(): unknown option num_env; did you mean num_envs?"]
    config = reach()
    config["default_settings"]["hyperparameters"]["batch_sise"] = 3
    with pytest.raises(ConfigError) as err:
        ml_arl.train(config, run_id="bad", results_dir=str(tmp_path))
    assert any("batch_sise" in p and "\n" not in p for p in err.value.problems)
    with pytest.raises(RunDirectoryError):
        ml_arl.load_policy(str(tmp_path / "nothing-here"))
    assert not (tmp_path / "bad").exists()


def test_a_flag_keyword_sets_its_setting(tmp_path: Path) -> None:
    from ml_arl.api.train import options_from, overrides_from

    options = options_from(reach(), overrides_from({"env": "builtin:ReachDiscrete", "num_envs": 3, "torch_device": "cpu",
                                                    "results_dir": str(tmp_path), "force": True, "debug": True}))
    assert options.env_settings.env_path == "builtin:ReachDiscrete" and options.env_settings.num_envs == 3
    assert options.torch_settings.device == "cpu" and options.checkpoint_settings.force and options.debug
    assert options_from(options) is options


def test_stop_on_reward_counts_its_own_behavior_and_window() -> None:
    stop = StopOnReward("A", threshold=1.0, window=3)

    def ep(reward: float) -> EpisodeStat:
        return EpisodeStat(behavior="A", reward=reward, length=1, interrupted=False)

    stop.on_episode("B", ep(5.0))
    stop.on_episode("A", ep(2.0))
    stop.on_episode("A", ep(0.0))
    assert stop.mean == pytest.approx(1.0)
    with pytest.raises(StopTraining, match="mean return 1.33"):
        stop.on_episode("A", ep(2.0))
    with pytest.raises(ValueError):
        StopOnReward("A", 1.0, window=0)
