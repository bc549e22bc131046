"""Curricula (environment_parameters with lessons): the settings and their one-line errors,
ML-Agents' rule for when a lesson is done, runs that advance through three lessons (by progress,
by reward), what the environment received at each lesson, the lesson in training_status.json and
TensorBoard, --resume continuing in the saved lesson, phases running their own curricula, and
environment parameters in Python environments (samplers drawn by the built-in ones)."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest

from ml_arl.core.exceptions import ConfigError
from ml_arl.core.experience import EpisodeStat
from ml_arl.envs.games.builtin import Reach
from ml_arl.envs.games.grid_defense import GridDefense
from ml_arl.envs.parameter_values import draw
from ml_arl.results.sqlite_store import STORE_FILENAME
from ml_arl.settings import CompletionCriteria, build_run_options, lesson_values, resolve_parameter_seeds
from ml_arl.training.callbacks import Callback, CallbackList
from ml_arl.training.controller import TrainerController
from ml_arl.training.curriculum import lesson_complete
from tests.support.runs import ROOT, arl_learn_here, scalars, tiny_config

TAG = "Environment/Lesson Number/bonus"


def criteria(measure: str = "progress", **keys: Any) -> dict[str, Any]:
    return {"behavior": "Learner", "measure": measure, **keys}


def curriculum(*lessons: tuple[str, Any, Optional[dict[str, Any]]]) -> dict[str, Any]:
    return {"curriculum": [{"name": n, "value": v, "completion_criteria": c} for n, v, c in lessons]}


def lesson_config(tmp_path: Path, run_id: str, parameters: dict[str, Any], max_steps: int = 1500,
                  log: str = "events.jsonl", manager: str = "inprocess", **trainer: Any) -> dict[str, Any]:
    """tests.support.lesson_env (4 agents, 10-step episodes paying the parameter ``bonus``) with a tiny PPO."""
    config = tiny_config("tests.support.lesson_env:make_env", max_steps, summary_freq=250, **trainer)
    config["behaviors"] = {"Learner": {}}
    config["env_settings"].update({"manager": manager, "seed": 1, "env_args": [f"log_path={tmp_path / log}"]})
    config["environment_parameters"] = parameters
    config["checkpoint_settings"] = {"results_dir": str(tmp_path), "run_id": run_id}
    return config


def run(config: dict[str, Any]) -> TrainerController:
    controller = TrainerController(build_run_options(config, {}, "test"))
    controller.start_learning()
    return controller


def events(path: Path) -> list[tuple[str, int, Any]]:
    """What the environment recorded: ("params", env step, parameters) and ("reset", env step, None)."""
    return [tuple(json.loads(line)) for line in path.read_text().splitlines()]  # type: ignore[misc]


def received(path: Path, key: str = "bonus") -> list[float]:
    return [data[key] for kind, _, data in events(path) if kind == "params"]


def status(run_logs: Path) -> dict[str, Any]:
    return json.loads((run_logs / "training_status.json").read_text())  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------- when a lesson is done


def test_lesson_complete_follows_mlagents_rule() -> None:
    """Hand-computed: min_lesson_length first; progress and Elo above the threshold (strictly);
    reward = the mean, smoothed as 0.25 x previous + 0.75 x mean."""
    progress = CompletionCriteria(behavior="B", measure="progress", threshold=0.4, min_lesson_length=3)
    assert lesson_complete(progress, 0.9, [1.0, 1.0], None, 0.7) == (False, 0.7)  # 2 of 3 episodes
    assert lesson_complete(progress, 0.41, [0.0] * 3, None, 0.7) == (True, 0.7)
    assert lesson_complete(progress, 0.4, [0.0] * 3, None, 0.7) == (False, 0.7)

    reward = CompletionCriteria(behavior="B", measure="reward", threshold=1.4)
    assert lesson_complete(reward, 0.0, [], None, 0.0) == (False, 0.0)  # no episode yet
    done, smoothed = lesson_complete(reward, 0.0, [1.0, 2.0, 3.0], None, 0.0)
    assert done and smoothed == pytest.approx(0.75 * 2.0)
    done, smoothed = lesson_complete(reward, 0.0, [2.0], None, 1.5)
    assert done and smoothed == pytest.approx(0.25 * 1.5 + 0.75 * 2.0)
    strict = CompletionCriteria(behavior="B", measure="reward", threshold=1.5)
    assert lesson_complete(strict, 0.0, [2.0], None, 0.0) == (False, 1.5)  # 1.5 is not above 1.5; kept
    raw = CompletionCriteria(behavior="B", measure="reward", threshold=1.4, signal_smoothing=False)
    assert lesson_complete(raw, 0.0, [1.0, 2.0], None, 9.0) == (True, 9.0)  # the mean, 1.5; smoothing untouched

    elo = CompletionCriteria(behavior="B", measure="elo", threshold=1205.0)
    assert elo.measure == "Elo"
    assert lesson_complete(elo, 1.0, [], None, 0.0) == (False, 0.0)  # no self-play
    assert lesson_complete(elo, 0.0, [], 1205.5, 0.0) == (True, 0.0)


class FakeStats:
    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def set_stat(self, key: str, value: float) -> None:
        self.values[key] = value


class FakeTrainer:
    def __init__(self, step: int = 0, origin: int = 0, length: int = 1000) -> None:
        self.step, self.schedule_origin, self.schedule_length = step, origin, length
        self.stats = FakeStats()


class FakeEnvManager:
    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], bool]] = []

    def set_environment_parameters(self, params: dict[str, Any], reset: bool = True) -> None:
        self.calls.append((params, reset))


def test_curriculum_part_moves_each_parameter_on_its_own(tmp_path: Path) -> None:
    """Curriculum.update: ELO of the named behavior, progress within the phase's step window, one
    lesson per check, rewards cleared for every behavior, the values sent (reset if any lesson asks)."""
    from ml_arl.results.checkpoints import TrainingStatus
    from ml_arl.training.curriculum import Curriculum

    params = {
        "speed": curriculum(("slow", 1.0, {"behavior": "A", "measure": "Elo", "threshold": 1210, "min_lesson_length": 2}),
                            ("fast", 2.0, None)),
        "size": curriculum(("small", {"sampler_type": "uniform", "sampler_parameters": {"min_value": 0.0, "max_value": 1.0, "seed": -1}},
                            {"behavior": "B", "measure": "progress", "threshold": 0.5, "require_reset": True}),
                           ("big", 3.0, {"behavior": "B", "measure": "progress", "threshold": 0.1}), ("huge", 4.0, None)),
        "plain": 7.0,
    }
    params = build_run_options({"behaviors": {"A": {"self_play": {}}, "B": {}}, "environment_parameters": params}, {}, "c").environment_parameters
    env = FakeEnvManager()
    part = Curriculum(params, 50, env)  # type: ignore[arg-type]
    status = TrainingStatus(str(tmp_path / "run_logs" / "training_status.json"))
    assert part.start(status, restore=False) == {
        "speed": 1.0, "size": {"sampler_type": "uniform", "sampler_parameters": {"min_value": 0.0, "max_value": 1.0, "seed": 50}},
        "plain": 7.0}
    trainers = {"A": FakeTrainer(), "B": FakeTrainer(step=1400, origin=1000, length=1000)}  # B: 40 % into its phase
    elo = {"A": 1300.0}
    part.record_episode("A", 1.0)
    part.update(trainers, elo.get)  # type: ignore[arg-type]
    assert env.calls == [] and part.lesson == {"speed": 0, "size": 0, "plain": 0}  # A: 1 episode of 2; B: 0.4
    assert trainers["A"].stats.values == {f"Environment/Lesson Number/{p}": 0.0 for p in ("speed", "size", "plain")}
    part.record_episode("A", 1.0)
    part.record_episode("B", 5.0)
    trainers["B"].step = 1600
    part.update(trainers, elo.get)  # type: ignore[arg-type]
    assert part.lesson == {"speed": 1, "size": 1, "plain": 0}  # both move on, one lesson each
    assert env.calls == [({"speed": 2.0, "size": 3.0, "plain": 7.0}, True)]  # size's lesson asked for a reset
    assert all(len(buffer) == 0 for buffer in part.rewards.values())
    assert json.loads(Path(status.path).read_text())["size"] == {"lesson_num": 1}  # written at once
    part.update(trainers, elo.get)  # type: ignore[arg-type]
    assert part.lesson["size"] == 2 and env.calls[-1] == ({"speed": 2.0, "size": 4.0, "plain": 7.0}, False)
    assert trainers["B"].stats.values["Environment/Lesson Number/size"] == 2.0

    again = Curriculum(params, 50, FakeEnvManager())  # type: ignore[arg-type]
    status.load()
    assert again.start(status, restore=True) == {"speed": 2.0, "size": 4.0, "plain": 7.0}  # --resume
    fresh = Curriculum(params, 50, FakeEnvManager())  # type: ignore[arg-type]
    assert fresh.start(status, restore=False)["speed"] == 1.0


# ---------------------------------------------------------------------------------- settings


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as err:
        build_run_options(data, {}, "cfg.yaml")
    return err.value.problems


@pytest.mark.parametrize(
    "value,needle",
    [
        ({"curriculum": []}, "environment_parameters.p.curriculum: [] is invalid; give a list of lessons"),
        ({"curriculum": {"name": "a"}}, "environment_parameters.p.curriculum: {'name': 'a'} is invalid; give a list of lessons"),
        ({"curriculum": [{"name": "a", "value": 1}], "lessons": 1},
         "environment_parameters.p: unknown key 'lessons' next to curriculum"),
        ({"curriculum": ["easy"]}, "environment_parameters.p.curriculum.0: expected a lesson (name, value, completion_criteria), got 'easy'"),
        ({"curriculum": [{"value": 1}]}, "environment_parameters.p.curriculum.0.name: required key is missing"),
        ({"curriculum": [{"name": 3, "value": 1}]}, "environment_parameters.p.curriculum.0.name: 3 is invalid; give the lesson a name"),
        ({"curriculum": [{"name": "a"}]}, "environment_parameters.p.curriculum.a.value: required key is missing; give a number or a sampler"),
        ({"curriculum": [{"name": "a", "value": {"sampler_type": "unifrom"}}]},
         "environment_parameters.p.curriculum.a.value.sampler_type: 'unifrom' is not a sampler; did you mean 'uniform'?"),
        ({"curriculum": [{"name": "a", "value": "x"}]}, "environment_parameters.p.curriculum.a.value: 'x' is invalid; give a number or a sampler"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_critera": {}}]},
         "environment_parameters.p.curriculum.a: unknown key 'completion_critera'; did you mean 'completion_criteria'?"),
        ({"curriculum": [{"name": "a", "value": 1}, {"name": "b", "value": 2}]},
         "environment_parameters.p.curriculum.a: completion_criteria is missing; every lesson but the last needs one"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": 5}, {"name": "b", "value": 2}]},
         "environment_parameters.p.curriculum.a.completion_criteria: expected a mapping (behavior, measure, threshold, ...), got 5"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": {"measure": "reward"}}, {"name": "b", "value": 2}]},
         "environment_parameters.p.curriculum.a.completion_criteria.behavior: required key is missing"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": criteria("rewards")}, {"name": "b", "value": 2}]},
         "environment_parameters.p.curriculum.a.completion_criteria.measure: 'rewards' is not allowed, expected 'progress', "
         "'reward' or 'Elo'; did you mean 'reward'?"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": criteria(threshold="high")}, {"name": "b", "value": 2}]},
         "environment_parameters.p.curriculum.a.completion_criteria.threshold: 'high' is invalid: give a number"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": criteria(threshold=1.5)}, {"name": "b", "value": 2}]},
         "environment_parameters.p.curriculum.a.completion_criteria.threshold: 1.5 is out of range; with measure: progress "
         "it is a fraction of the behavior's max_steps, from 0 to 1"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": criteria(threshold=-0.1)}, {"name": "b", "value": 2}]},
         "threshold: -0.1 is out of range"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": criteria("reward", threshold=True)}, {"name": "b", "value": 2}]},
         "completion_criteria.threshold: True is invalid: give a number"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": criteria(min_lesson_length=-1)}, {"name": "b", "value": 2}]},
         "completion_criteria.min_lesson_length: -1 is invalid: input should be greater than or equal to 0"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": criteria(min_lesson_length=2.5)}, {"name": "b", "value": 2}]},
         "completion_criteria.min_lesson_length: 2.5 is invalid"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": criteria(signal_smoothing="sometimes")}, {"name": "b", "value": 2}]},
         "completion_criteria.signal_smoothing: 'sometimes' is invalid"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": criteria(require_reset=[])}, {"name": "b", "value": 2}]},
         "completion_criteria.require_reset: [] is invalid"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": criteria(treshold=0.5)}, {"name": "b", "value": 2}]},
         "completion_criteria.treshold: unknown key 'treshold'; did you mean 'threshold'?"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": {"behavior": "Learner?team=0"}}, {"name": "b", "value": 2}]},
         "completion_criteria.behavior: 'Learner?team=0' is invalid; give a behavior name (without ?team=N)"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": {"behavior": "Lerner"}}, {"name": "b", "value": 2}]},
         "environment_parameters.p.curriculum.a.completion_criteria.behavior: 'Lerner' is not a configured behavior (configured: Learner)"),
        ({"curriculum": [{"name": "a", "value": 1, "completion_criteria": criteria("Elo", threshold=1250)}, {"name": "b", "value": 2}]},
         "environment_parameters.p.curriculum.a.completion_criteria.measure: Elo is the self-play ELO, and behavior 'Learner' "
         "has no self_play; use measure: reward or progress"),
    ],
)
def test_curriculum_problems_are_one_line_each(value: object, needle: str) -> None:
    (found,) = problems({"behaviors": {"Learner": {}}, "environment_parameters": {"p": value}})
    assert found.startswith("cfg.yaml: ") and needle in found, found


def test_curricula_where_phases_run() -> None:
    """With phases a curriculum belongs to a phase; progress and Elo need the behavior to learn there."""
    lessons = curriculum(("a", 1, criteria()), ("b", 2, None))
    found = problems({
        "behaviors": {"Learner": {}}, "environment_parameters": {"p": lessons},
        "phases": [{"name": "train", "max_steps": 5},
                   {"name": "test", "mode": "test", "episodes": 5, "environment_parameters": {"q": lessons}}],
    })
    assert found == [
        "cfg.yaml: environment_parameters.p.curriculum: with phases, a curriculum belongs to a phase; move it to "
        "phases.<name>.environment_parameters (each phase runs its own curricula)",
        "cfg.yaml: phases.test.environment_parameters.q.curriculum.a.completion_criteria: 'Learner' does not learn in "
        "phase 'test', so its progress never changes; use measure: reward, or a phase where it learns",
    ]
    by_reward = curriculum(("a", 1, criteria("reward")), ("b", 2, None))
    options = build_run_options({
        "behaviors": {"Learner": {}},
        "phases": [{"name": "test", "mode": "test", "episodes": 5, "environment_parameters": {"q": by_reward}}],
    }, {}, "cfg.yaml")
    assert options.phases is not None and options.phases[0].environment_parameters is not None


def test_curricula_are_plain_data_with_defaults_and_seeds(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    data = {
        "behaviors": {"Learner": {}},
        "environment_parameters": {
            "g": {"sampler_type": "gaussian"},
            "p": curriculum(
                ("easy", "2e-1", {"behavior": "Learner"}),
                ("mid", {"sampler_type": "uniform", "sampler_parameters": {"max_value": 2}}, criteria(measure="REWARD", threshold=3)),
                ("hard", {"sampler_type": "constant", "sampler_parameters": {"value": 5, "seed": 7}}, criteria()),
            ),
        },
    }
    options = build_run_options(data, {}, "cfg.yaml")
    params = options.environment_parameters
    assert params is not None
    defaults = {"behavior": "Learner", "measure": "reward", "min_lesson_length": 0, "signal_smoothing": True,
                "threshold": 0.0, "require_reset": False}
    assert params["p"] == {"curriculum": [
        {"name": "easy", "value": 0.2, "completion_criteria": defaults},
        {"name": "mid", "value": {"sampler_type": "uniform", "sampler_parameters": {"min_value": 0.0, "max_value": 2.0, "seed": -1}},
         "completion_criteria": {**defaults, "threshold": 3.0}},
        {"name": "hard", "value": {"sampler_type": "constant", "sampler_parameters": {"value": 5.0, "seed": 7}},
         "completion_criteria": None},  # on the last lesson it is ignored, with a warning
    ]}
    assert "environment_parameters.p.curriculum.hard.completion_criteria: the last lesson never ends" in caplog.text
    assert options.as_dict()["environment_parameters"] == params  # configuration.yaml shows it as written here
    seeded = resolve_parameter_seeds(params, 100)  # every sampler in order, lessons included
    assert seeded["g"]["sampler_parameters"]["seed"] == 100
    assert seeded["p"]["curriculum"][1]["value"]["sampler_parameters"]["seed"] == 101
    assert seeded["p"]["curriculum"][2]["value"]["sampler_parameters"]["seed"] == 7
    assert lesson_values(seeded) == {"g": seeded["g"], "p": 0.2}
    assert lesson_values(seeded, {"p": 2})["p"] == seeded["p"]["curriculum"][2]["value"]


def test_grid_defense_curriculum_config_checks(tmp_path: Path) -> None:
    config = ROOT / "config" / "arl" / "GridDefense-curriculum.yaml"
    result = arl_learn_here([config, "--check"], tmp_path)
    assert result.returncode == 0, result.stderr
    phases = build_run_options(__import__("yaml").safe_load(config.read_text()), {}, str(config)).phases
    assert phases is not None
    lessons = phases[0].environment_parameters["attack_strength"]["curriculum"]  # type: ignore[index]
    assert [(lesson["name"], lesson["value"]) for lesson in lessons] == [("weak", 0.25), ("medium", 0.5), ("full", 1.0)]


# ---------------------------------------------------------------------------------- runs


def test_three_lessons_advance_by_progress(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Through the worker processes: lesson 2 at 20 % of max_steps (no reset: the new value rides
    with the next step), lesson 3 at 50 % (require_reset: every env resets with it)."""
    caplog.set_level(logging.INFO)
    params = {
        "bonus": curriculum(("easy", 0.0, criteria(threshold=0.2)), ("medium", 1.0, criteria(threshold=0.5, require_reset=True)),
                            ("hard", 2.0, None)),
        "other": 3.0,
    }
    run(lesson_config(tmp_path, "progress", params, max_steps=1500, manager="subprocess"))
    seen = events(tmp_path / "events.jsonl")
    params_seen = [(step, data) for kind, step, data in seen if kind == "params"]
    assert [data for _, data in params_seen] == [
        {"bonus": 0.0, "other": 3.0}, {"bonus": 1.0, "other": 3.0}, {"bonus": 2.0, "other": 3.0}]
    kinds = [kind for kind, _, _ in seen]
    assert kinds == ["reset", "params", "reset", "params", "params", "reset"]  # start, phase start, medium (no reset), hard
    (to_medium, _), (to_hard, _) = params_seen[1:]
    assert to_medium * 4 >= 0.2 * 1500 and to_hard * 4 >= 0.5 * 1500  # 4 agents: trainer steps <= 4 x env steps
    assert to_hard * 4 < 1500
    assert "Parameter 'bonus' is in lesson 'easy' (1 of 3) with value 0" in caplog.text
    assert "Parameter 'bonus' has been updated to 1. Now in lesson 'medium' (2 of 3)." in caplog.text
    assert "Parameter 'bonus' has been updated to 2. Now in lesson 'hard' (3 of 3)." in caplog.text
    saved = status(tmp_path / "progress" / "run_logs")
    assert saved["bonus"] == {"lesson_num": 2} and saved["other"] == {"lesson_num": 0}
    assert saved["Learner"]["checkpoints"] and "metadata" in saved
    lessons = scalars(tmp_path / "progress" / "Learner", TAG)
    assert [v for _, v in lessons] == sorted(v for _, v in lessons) and lessons[0][1] == 0.0 and lessons[-1][1] == 2.0
    assert {v for _, v in scalars(tmp_path / "progress" / "Learner", "Environment/Lesson Number/other")} == {0.0}


def test_three_lessons_advance_by_reward_after_min_lesson_length(tmp_path: Path) -> None:
    """Every episode pays the lesson's bonus (from the episode after the change: no reset). With
    min_lesson_length 8 the buffer keeps the last 8 episodes of the lesson; after moving to 2.0
    it holds 1.0s of the episodes that were running, whose smoothed mean (at most 1.5) stays
    under 1.6 until 8 episodes paid 2.0."""
    params = {"bonus": curriculum(
        ("one", 1.0, criteria("reward", threshold=0.5, min_lesson_length=8)),
        ("two", 2.0, criteria("reward", threshold=1.6, min_lesson_length=8)),
        ("three", 3.0, None),
    )}
    run(lesson_config(tmp_path, "reward", params, max_steps=800))
    assert received(tmp_path / "events.jsonl") == [1.0, 2.0, 3.0]
    with sqlite3.connect(tmp_path / "reward" / STORE_FILENAME) as db:
        rewards = [r for (r,) in db.execute("SELECT env_reward FROM episodes ORDER BY id")]
    assert rewards == sorted(rewards) and set(rewards) == {1.0, 2.0, 3.0}
    assert rewards.count(1.0) >= 8 and rewards.count(2.0) >= 8
    assert status(tmp_path / "reward" / "run_logs")["bonus"] == {"lesson_num": 2}


class StopInLesson2(Callback):
    """Stops the run (it saves, as Ctrl-C does) in lesson 2 of "bonus" once the trainer reaches step 600
    (40 % of max_steps): at the end of the call whose episodes take it there (each of lesson_env's
    10-step episodes is one trajectory, of 10 trainer steps)."""

    def __init__(self) -> None:
        self.controller: Optional[TrainerController] = None
        self.steps = 0

    def on_episode(self, behavior: str, episode: EpisodeStat) -> Optional[bool]:
        assert self.controller is not None
        self.steps += episode.length
        return False if self.controller.curriculum.lesson["bonus"] == 1 and self.steps >= 600 else None


def test_resume_continues_in_the_saved_lesson(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Stopped (a callback) in lesson 2 of 3 at 40 % of max_steps; --resume starts in lesson 2 (a new
    curriculum would start in lesson 1 and move on only then), and moves on to lesson 3."""
    caplog.set_level(logging.INFO)
    params = {"bonus": curriculum(("easy", 0.0, criteria(threshold=0.2)), ("medium", 1.0, criteria(threshold=0.7)),
                                  ("hard", 2.0, None))}
    stop = StopInLesson2()
    controller = TrainerController(build_run_options(lesson_config(tmp_path, "resume", params, log="first.jsonl"), {}, "test"),
                                   callbacks=CallbackList([stop]))
    stop.controller = controller
    controller.start_learning()
    stopped_at = controller.trainers["Learner"].step
    assert received(tmp_path / "first.jsonl") == [0.0, 1.0] and stopped_at < 0.7 * 1500
    assert status(tmp_path / "resume" / "run_logs")["bonus"] == {"lesson_num": 1}

    config = lesson_config(tmp_path, "resume", params, log="second.jsonl")
    config["checkpoint_settings"]["resume"] = True
    caplog.clear()
    resumed = run(config)
    assert "Parameter 'bonus' is in lesson 'medium' (2 of 3) with value 1 (continued from training_status.json)" in caplog.text
    second = events(tmp_path / "second.jsonl")
    assert [data["bonus"] for kind, _, data in second if kind == "params"] == [1.0, 2.0]  # never lesson 1's 0.0
    assert [kind for kind, _, _ in second][:3] == ["reset", "params", "reset"]  # it starts with lesson 2's value
    assert resumed.trainers["Learner"].step >= 1500
    assert status(tmp_path / "resume" / "run_logs")["bonus"] == {"lesson_num": 2}
    after = [(step, v) for step, v in scalars(tmp_path / "resume" / "Learner", TAG) if step > stopped_at]
    assert after and all(v >= 1.0 for _, v in after) and after[-1][1] == 2.0


def test_phases_run_their_own_curricula(tmp_path: Path) -> None:
    """A phase's curriculum starts at its first lesson and keeps its lessons in the phase's
    training_status.json; the next phase sends its own values (the run's underneath)."""
    config = lesson_config(tmp_path, "phased", {"other": 1.0})
    config["phases"] = [
        {"name": "learn", "max_steps": 600,
         "environment_parameters": {"bonus": curriculum(("easy", 0.0, criteria(threshold=0.5)), ("hard", 1.0, None))}},
        {"name": "exam", "mode": "test", "episodes": 8, "environment_parameters": {"bonus": 5.0}},
    ]
    run(config)
    seen = events(tmp_path / "events.jsonl")
    assert [data for kind, _, data in seen if kind == "params"] == [
        {"other": 1.0, "bonus": 0.0}, {"other": 1.0, "bonus": 1.0}, {"other": 1.0, "bonus": 5.0}]
    assert [kind for kind, _, _ in seen] == ["reset", "params", "reset", "params", "params", "reset"]
    assert status(tmp_path / "phased" / "learn" / "run_logs")["bonus"] == {"lesson_num": 1}
    assert status(tmp_path / "phased" / "exam" / "run_logs")["bonus"] == {"lesson_num": 0}  # a plain value: its one lesson


def test_a_behavior_the_environment_lacks_stops_the_run_before_any_write(tmp_path: Path) -> None:
    """With default_settings any behavior name is a valid config; the environment shows which exist."""
    params = {"bonus": curriculum(("easy", 0.0, {"behavior": "Nobody"}), ("hard", 1.0, None))}
    config = lesson_config(tmp_path, "nobody", params)
    config["behaviors"] = {}
    with pytest.raises(ConfigError) as err:
        run(config)
    assert err.value.problems == [
        "environment_parameters.bonus.curriculum.easy.completion_criteria.behavior: the environment has no "
        "behavior 'Nobody' (it has: Learner)"
    ]
    assert not (tmp_path / "nobody").exists()


# ---------------------------------------------------------------------------------- Python environments


def test_draw_from_each_sampler() -> None:
    rng = np.random.default_rng(0)
    assert draw(2, rng) == 2.0
    assert draw({"sampler_type": "constant", "sampler_parameters": {"value": 3.0, "seed": 1}}, rng) == 3.0
    uniform = [draw({"sampler_type": "uniform", "sampler_parameters": {"min_value": 1.0, "max_value": 2.0}}, rng) for _ in range(200)]
    assert 1.0 <= min(uniform) and max(uniform) <= 2.0 and np.std(uniform) > 0.2
    normal = [draw({"sampler_type": "gaussian", "sampler_parameters": {"mean": 5.0, "st_dev": 0.1}}, rng) for _ in range(200)]
    assert abs(np.mean(normal) - 5.0) < 0.05
    multi = {"sampler_type": "multirangeuniform", "sampler_parameters": {"intervals": [[0.0, 1.0], [10.0, 13.0]]}}
    drawn = np.array([draw(multi, rng) for _ in range(400)])
    assert np.all(((drawn >= 0) & (drawn <= 1)) | ((drawn >= 10) & (drawn <= 13)))
    assert 0.6 < np.mean(drawn >= 10) < 0.9  # picked in proportion to the intervals' lengths (3/4)


def test_built_in_environments_take_samplers() -> None:
    grid = GridDefense(seed=1, num_areas=2)
    grid.set_environment_parameters({"attack_strength": {"sampler_type": "uniform", "sampler_parameters": {"min_value": 0.2, "max_value": 0.3}}})
    strengths = set()
    for _ in range(5):
        grid.reset()
        strengths.add(grid.params["attack_strength"])
    assert len(strengths) == 5 and all(0.2 <= s <= 0.3 for s in strengths)  # one draw per day
    with pytest.raises(ValueError, match="neither a number nor a sampler"):
        grid.set_environment_parameters({"penalty": "high"})

    reach = Reach(seed=1, n_agents=8)
    reach.set_environment_parameters({"goal_radius": 0.3})
    reach.reset()
    assert np.all(reach.radius == 0.3)
    reach.set_environment_parameters({"goal_radius": {"sampler_type": "uniform", "sampler_parameters": {"min_value": 0.05, "max_value": 0.1}}})
    reach.reset()
    assert np.all((reach.radius >= 0.05) & (reach.radius <= 0.1)) and len(set(reach.radius)) == 8
    with pytest.raises(ValueError, match="unknown environment parameter 'size'"):
        reach.set_environment_parameters({"size": 1.0})


def test_parameters_without_a_reset_reach_each_worker_with_its_next_step(tmp_path: Path) -> None:
    from ml_arl.core.env_factory import EnvFactory
    from ml_arl.envs.backends.subprocess_env_manager import SubprocessEnvManager
    from ml_arl.settings import EnvSettings
    from tests.support.lesson_env import make_env

    logs = [tmp_path / f"worker{i}.jsonl" for i in range(2)]

    def build(seed: int, worker_id: int) -> Any:
        return make_env(seed, log_path=str(logs[worker_id]))

    manager = SubprocessEnvManager(EnvFactory("lessons", build, pass_worker_id=True), EnvSettings(num_envs=2), 0)
    try:
        manager.start()
        manager.set_environment_parameters({"bonus": 1.0})  # with a reset
        for _ in range(3):
            manager.step()
        manager.set_environment_parameters({"bonus": 2.0}, reset=False)
        # A worker slowed by a busy machine may answer none of a few steps: step until every
        # worker has taken the parameters and stepped past them (within a deadline).
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            manager.step()
            if all(log.exists() and events(log)[-1][0] == "params" and events(log)[-1][2] == {"bonus": 2.0}
                   for log in logs):
                manager.step()
                break
    finally:
        manager.close()
    for log in logs:
        seen = events(log)
        assert [(kind, data) for kind, _, data in seen] == [
            ("reset", None), ("params", {"bonus": 1.0}), ("reset", None), ("params", {"bonus": 2.0})]
        assert seen[-1][1] > 0  # between steps, after some were taken
