"""Unit tests of the run loop's parts (ml_arl/training/): trainer classes, the phase schedule's step
windows, Trainer.assign, the PolicyMessage each behavior acts with, and the self-play router."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from ml_arl.core.actor_weights import PolicySnapshot
from ml_arl.core.exceptions import ConfigError
from ml_arl.envs.games.builtin import Reach
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import PhaseSettings, TrainerSettings, build_run_options
from ml_arl.trainers.ppo.trainer import PPOTrainer
from ml_arl.trainers.trainer import Trainer, trainer_class
from ml_arl.training.phases import UNLIMITED_STEPS, PhaseSchedule
from ml_arl.training.policy_message import policy_message
from ml_arl.training.selfplay import SelfPlay
from tests.support.plugins import RandomTrainer


class OldStyleTrainer(RandomTrainer):
    def clear_experience(self) -> None:  # the 0.1 name of on_new_phase
        pass


class Unfinished(Trainer):  # implements nothing
    pass


def test_trainer_class_checks_user_trainers() -> None:
    assert trainer_class(TrainerSettings(), "B") is PPOTrainer
    assert trainer_class(TrainerSettings(trainer_type="tests.support.plugins:RandomTrainer"), "B") is RandomTrainer
    with pytest.raises(ConfigError, match="defines clear_experience.*on_new_phase"):
        trainer_class(TrainerSettings(trainer_type="tests.training.test_run_parts:OldStyleTrainer"), "B")
    with pytest.raises(ConfigError, match="does not implement add_experience.*policy_snapshot"):
        trainer_class(TrainerSettings(trainer_type="tests.training.test_run_parts:Unfinished"), "B")
    with pytest.raises(ConfigError, match="behaviors.B.trainer_type: .* is not a subclass"):
        trainer_class(TrainerSettings(trainer_type="tests.training.test_run_parts:test_trainer_class_checks_user_trainers"), "B")


def _options(tmp_path: Path, phases: Any = None) -> Any:
    config: dict[str, Any] = {
        "behaviors": {"Reach": {"max_steps": 1000, "time_horizon": 16}},
        "env_settings": {"env_path": "builtin:Reach"},
        "checkpoint_settings": {"results_dir": str(tmp_path), "run_id": "parts"},
    }
    if phases is not None:
        config["phases"] = phases
    return build_run_options(config, {}, "test")


def _trainer(settings: TrainerSettings) -> RandomTrainer:
    spec = Reach().behavior_specs["Reach"]
    return RandomTrainer("Reach", settings, spec, StatsReporter("Reach", []), None, torch.device("cpu"))


class Counting(RandomTrainer):
    new_phases = 0

    def on_new_phase(self) -> None:
        self.new_phases += 1


def test_step_windows_of_the_phase_schedule(tmp_path: Path) -> None:
    plain = PhaseSchedule(_options(tmp_path))
    plain.begin(0, None)
    trainer = _trainer(plain.settings_for("Reach"))
    a = plain.assignment("Reach", trainer, None)
    assert (a.learning, a.step_limit, a.schedule_origin, a.schedule_length, a.new_phase) == (True, 1000, 0, 1000, False)
    assert plain.name == "train" and plain.write_path == str(tmp_path / "parts")

    schedule = PhaseSchedule(_options(tmp_path, [
        {"name": "one", "max_steps": 300},
        {"name": "two", "episodes": 5, "learn": []},
    ]))
    schedule.begin(0, schedule.phases[0])
    trainer = Counting("Reach", schedule.settings_for("Reach"), Reach().behavior_specs["Reach"],
                       StatsReporter("Reach", []), None, torch.device("cpu"))
    trainer.step = 50
    first = schedule.assignment("Reach", trainer, None)
    assert (first.step_limit, first.schedule_origin, first.schedule_length, first.new_phase) == (350, 50, 300, True)
    trainer.step = 120  # the origin is kept in phases.json: asking again (a resumed phase) keeps the window
    assert schedule.assignment("Reach", trainer, None).schedule_origin == 50
    schedule.resumed = True  # --resume into this phase: a brain past its origin continues it with what it loaded
    assert not schedule.assignment("Reach", trainer, None).new_phase
    trainer.step = 50  # its checkpoint is from before the phase: the phase is new to it
    assert schedule.assignment("Reach", trainer, None).new_phase
    schedule.resumed = False
    trainer.assign(first)
    assert trainer.new_phases == 1 and trainer.step_limit == 350 and trainer.saved_step == -1
    schedule.begin(1, schedule.phases[1])
    second = schedule.assignment("Reach", trainer, None)
    assert not second.learning and second.step_limit == UNLIMITED_STEPS and second.schedule_length == 1000
    assert schedule.write_path == str(tmp_path / "parts" / "two")


def test_policy_message_fields() -> None:
    snapshot = PolicySnapshot(7, {"w": 1}, muscle="pkg.mod:Muscle")
    settings = TrainerSettings(time_horizon=16, role="attacker")
    msg = policy_message(snapshot, settings, None, collect=True)
    assert (msg.version, msg.weights, msg.muscle, msg.time_horizon, msg.collect) == (7, {"w": 1}, "pkg.mod:Muscle", 16, True)
    assert msg.objective == ("negated_reward", {}) and not msg.deterministic
    test_phase = PhaseSettings(name="test", mode="test", episodes=3, deterministic=True)
    msg = policy_message(snapshot, TrainerSettings(), test_phase, collect=False)
    assert msg.objective is None and msg.deterministic and not msg.collect


def test_selfplay_routes_live_policy_and_opponent_snapshot() -> None:
    settings = TrainerSettings(self_play={"play_against_latest_model_ratio": 0.0})
    trainer = _trainer(settings)
    selfplay = SelfPlay(seed=0)
    selfplay.setup("Reach", trainer, lambda brain: 1300.0)
    assert selfplay.elo("Reach") == 1300.0  # continued from the saved ELO
    selfplay.add_behavior("Reach", "Reach?team=0")
    selfplay.add_behavior("Reach", "Reach?team=1")
    live = PolicySnapshot(3, {"w": 3})
    selfplay.start("Reach", live, step=0)
    assert selfplay.is_learning("Reach", "Reach?team=0") and not selfplay.is_learning("Reach", "Reach?team=1")
    assert selfplay.snapshot_for("Reach", "Reach?team=0", live) is live
    opponent = selfplay.snapshot_for("Reach", "Reach?team=1", live)
    assert opponent is not None and opponent.version < 0 and opponent.weights == {"w": 3}  # the first snapshot
    assert selfplay.snapshot_for("Other", "Other", live) is live  # a brain without self-play acts with its own


def test_a_resumed_phased_run_logs_only_its_own_phases(tmp_path: Path) -> None:
    """--resume of a phased run whose phases are all done begins none and writes no entry for the
    unnamed phase ("train"); an entry of a phase the config does not name is dropped."""
    phases = [{"name": "one", "max_steps": 300}, {"name": "two", "episodes": 5, "learn": []}]
    first = PhaseSchedule(_options(tmp_path, phases))
    for index, phase in first.pending():
        first.begin(index, phase)
        first.end()
    log = Path(first.log.path)
    assert set(json.loads(log.read_text())["phases"]) == {"one", "two"}
    before = log.read_bytes()

    options = _options(tmp_path, phases)
    options.checkpoint_settings.resume = True
    again = PhaseSchedule(options)
    assert list(again.pending()) == [] and not again.begun
    again.save_progress()  # the run stops: nothing began, so nothing is written
    assert log.read_bytes() == before

    stale = json.loads(before)
    stale["phases"]["train"] = {"state": "pending"}  # as an earlier arl-learn wrote it
    stale["phases"]["two"]["state"] = "running"
    log.write_text(json.dumps(stale))
    resumed = PhaseSchedule(options)
    assert [phase.name for _, phase in resumed.pending() if phase is not None] == ["two"]
    resumed.begin(1, resumed.phases[1])
    resumed.save_progress()
    assert set(json.loads(log.read_text())["phases"]) == {"one", "two"}
