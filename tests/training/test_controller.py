"""TrainerController failure paths: a trainer thread that raises stops the run with its
traceback; the models are still saved."""

from __future__ import annotations

from pathlib import Path

import pytest

from ml_arl.core.exceptions import TrainerThreadError
from ml_arl.settings import build_run_options
from ml_arl.trainers.ppo.trainer import PPOTrainer
from ml_arl.training.controller import TrainerController
from tests.support.runs import tiny_config


def test_exception_in_trainer_thread_stops_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_update(self: PPOTrainer) -> None:
        raise RuntimeError("update exploded")

    monkeypatch.setattr(PPOTrainer, "update", broken_update)
    config = tiny_config("builtin:Reach", max_steps=5000, threaded=True)
    config["env_settings"].update({"manager": "inprocess", "seed": 0})
    config["checkpoint_settings"] = {"results_dir": str(tmp_path), "run_id": "boom"}
    controller = TrainerController(build_run_options(config, {}, "test"))
    with pytest.raises(TrainerThreadError) as err:
        controller.start_learning()
    assert "update exploded" in str(err.value) and "Reach" in str(err.value)
    assert "broken_update" in err.value.thread_traceback
    assert not controller.threads.threads["Reach"].is_alive()
    # the crashed trainer's state is not saved over the last good checkpoint; the run logs are written
    assert not (tmp_path / "boom" / "Reach" / "checkpoint.pt").exists()
    assert (tmp_path / "boom" / "run_logs" / "timers.json").is_file()
    assert (tmp_path / "boom" / "run_logs" / "training_status.json").is_file()

