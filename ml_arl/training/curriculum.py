"""Curricula: environment parameters whose value moves through lessons as the behaviors learn
(ML-Agents' ``environment_parameters: {name: {curriculum: [lesson, ...]}}``).

A ``Curriculum`` holds the environment parameters of the running phase (a run without phases
is one phase; with phases each phase's curricula start at their first lesson). A plain
parameter counts as a curriculum of one lesson, as in ML-Agents. After every step of the run
loop ``update`` asks each curriculum whether its lesson is done (``lesson_complete``, ML-Agents'
rule) and, when one is:

- logs ``Parameter 'x' has been updated to <value>. Now in lesson '<name>' (2 of 3).``;
- clears every behavior's episode rewards (the next lesson is measured on its own episodes);
- writes the lesson numbers to training_status.json (``{"x": {"lesson_num": 1}}``, next to the
  behaviors' entries, as ML-Agents) at once, which is where --resume reads them back;
- hands the new values to the environments: with ``require_reset`` every environment resets
  with them, otherwise they ride along with the next step request and an environment applies
  them from its next episode on.

Every lesson number is reported to each behavior's TensorBoard as ``Environment/Lesson
Number/<parameter>``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ml_arl.core.behavior_id import brain_name
from ml_arl.core.exceptions import ConfigError
from ml_arl.envs.backends.env_manager import EnvManager
from ml_arl.results.checkpoints import TrainingStatus
from ml_arl.settings import (
    CompletionCriteria,
    RunOptions,
    curricula_criteria,
    is_curriculum,
    lesson_values,
    resolve_parameter_seeds,
)
from ml_arl.trainers.trainer import Trainer

logger = logging.getLogger(__name__)

LESSON_TAG = "Environment/Lesson Number/"  # + the parameter's name
PREVIOUS_WEIGHT = 0.25  # signal_smoothing: smoothed = 0.25 x previous + 0.75 x new (ML-Agents)


@dataclass(frozen=True)
class Lesson:
    name: str
    value: Any  # a number or a sampler (plain data), as the environments receive it
    criteria: Optional[CompletionCriteria]  # None: the last lesson


def lesson_complete(
    criteria: CompletionCriteria, progress: float, rewards: Sequence[float], elo: Optional[float], smoothed: float
) -> tuple[bool, float]:
    """ML-Agents' rule: is the lesson done? Returns (done, the new smoothed reward measure).

    ``progress``: the behavior's steps / max_steps (in the phase); ``rewards``: the returns of its
    episodes in this lesson (the newest ``max(min_lesson_length, 1)``); ``elo``: its self-play ELO.
    Nothing is done before ``min_lesson_length`` episodes. The measure must be above the
    threshold; a reward measure is the mean of ``rewards``, smoothed with the previous one when
    ``signal_smoothing`` (0.25 x previous + 0.75 x mean; the first previous value is 0)."""
    if len(rewards) < criteria.min_lesson_length:
        return False, smoothed
    if criteria.measure == "progress":
        return progress > criteria.threshold, smoothed
    if criteria.measure == "Elo":
        return elo is not None and elo > criteria.threshold, smoothed
    if not rewards:
        return False, smoothed
    measure = float(np.mean(rewards))
    if criteria.signal_smoothing:
        measure = PREVIOUS_WEIGHT * smoothed + (1.0 - PREVIOUS_WEIGHT) * measure
        smoothed = measure
    return measure > criteria.threshold, smoothed


def describe(value: Any) -> str:
    """A parameter's value for a log line: ``0.5`` or ``uniform sampler (min_value=0.0, max_value=1.0, seed=3)``."""
    if not isinstance(value, dict):
        return f"{float(value):g}"
    params = ", ".join(f"{k}={v}" for k, v in value["sampler_parameters"].items())
    return f"{value['sampler_type']} sampler ({params})"


def check_curriculum_behaviors(options: RunOptions, behaviors: Collection[str]) -> None:
    """Every behavior a completion_criteria names is one the environment shows (``behaviors``:
    its behavior ids); else a ConfigError, before anything is written."""
    brains = sorted({brain_name(b) for b in behaviors})
    if options.phases:
        sources = [(f"phases.{p.name}.environment_parameters", p.environment_parameters) for p in options.phases]
    else:
        sources = [("environment_parameters", options.environment_parameters)]
    problems = [
        f"{path}.behavior: the environment has no behavior '{criteria['behavior']}' (it has: {', '.join(brains) or 'none'})"
        for where, params in sources
        for path, criteria in curricula_criteria(params, where)
        if criteria["behavior"] not in brains
    ]
    if problems:
        raise ConfigError(problems)


class Curriculum:
    """The running phase's environment parameters, each in its lesson."""

    def __init__(self, parameters: Optional[Mapping[str, Any]], seed: int, env_manager: EnvManager):
        self.parameters = resolve_parameter_seeds(parameters, seed)  # plain data, curricula included
        self.env_manager = env_manager
        self.lessons: dict[str, list[Lesson]] = {
            name: [
                Lesson(
                    lesson["name"], lesson["value"],
                    None if lesson["completion_criteria"] is None else CompletionCriteria.model_validate(lesson["completion_criteria"]),
                )
                for lesson in value["curriculum"]
            ]
            for name, value in self.parameters.items()
            if is_curriculum(value)
        }
        self.lesson: dict[str, int] = dict.fromkeys(self.parameters, 0)  # a plain parameter: lesson 0 of 1
        self.smoothed: dict[str, float] = dict.fromkeys(self.lessons, 0.0)
        sizes: dict[str, int] = {}  # behavior -> episodes kept: the largest min_lesson_length that measures it
        for lessons in self.lessons.values():
            for lesson in lessons:
                if lesson.criteria is not None:
                    behavior = lesson.criteria.behavior
                    sizes[behavior] = max(sizes.get(behavior, 1), lesson.criteria.min_lesson_length)
        self.rewards: dict[str, deque[float]] = {behavior: deque(maxlen=n) for behavior, n in sizes.items()}
        self.status: Optional[TrainingStatus] = None

    def values(self) -> dict[str, Any]:
        """What the environments receive: each parameter's value in its current lesson."""
        return lesson_values(self.parameters, self.lesson)

    def start(self, status: TrainingStatus, restore: bool) -> dict[str, Any]:
        """The phase begins: with ``restore`` (--resume) each curriculum continues in the lesson
        ``status`` (training_status.json) holds; the lessons are written there. Returns the values."""
        self.status = status
        restored = set()
        for name, lessons in self.lessons.items():
            entry = status.data.get(name) if restore else None
            saved = entry.get("lesson_num") if isinstance(entry, dict) else None
            if isinstance(saved, int) and not isinstance(saved, bool) and saved > 0:
                if saved >= len(lessons):
                    logger.warning("%s: parameter '%s' was in lesson %d, but its curriculum has %d lessons now; "
                                   "it continues in the last", status.path, name, saved + 1, len(lessons))
                self.lesson[name] = min(saved, len(lessons) - 1)
                restored.add(name)
        self._write(save=False)
        for name, lessons in self.lessons.items():
            lesson = lessons[self.lesson[name]]
            logger.info("Parameter '%s' is in lesson '%s' (%d of %d) with value %s%s", name, lesson.name,
                        self.lesson[name] + 1, len(lessons), describe(lesson.value),
                        " (continued from training_status.json)" if name in restored else "")
        return self.values()

    def record_episode(self, behavior: str, reward: float) -> None:
        """An episode the behavior finished (its return in environment reward)."""
        buffer = self.rewards.get(behavior)
        if buffer is not None:
            buffer.append(reward)

    def update(self, trainers: Mapping[str, Trainer], elo: Callable[[str], Optional[float]]) -> None:
        """After a step of the run loop: move on the curricula whose lesson is done (each by one
        lesson at most), report every lesson number."""
        changed, reset = False, False
        for name, lessons in self.lessons.items():
            index = self.lesson[name]
            criteria = lessons[index].criteria
            trainer = trainers.get(criteria.behavior) if criteria is not None else None
            if criteria is None or trainer is None:  # the last lesson, or a behavior not seen yet
                continue
            progress = (trainer.step - trainer.schedule_origin) / max(1, trainer.schedule_length)
            rewards = self.rewards[criteria.behavior]
            done, self.smoothed[name] = lesson_complete(criteria, progress, rewards, elo(criteria.behavior), self.smoothed[name])
            if done:
                self.lesson[name] = index + 1
                changed, reset = True, reset or criteria.require_reset
                new = lessons[index + 1]
                logger.info("Parameter '%s' has been updated to %s. Now in lesson '%s' (%d of %d).",
                            name, describe(new.value), new.name, index + 2, len(lessons))
        for trainer in trainers.values():
            for name, index in self.lesson.items():
                trainer.stats.set_stat(LESSON_TAG + name, float(index))
        if changed:
            for buffer in self.rewards.values():
                buffer.clear()
            self._write(save=True)
            self.env_manager.set_environment_parameters(self.values(), reset=reset)

    def _write(self, save: bool) -> None:
        """The lesson numbers into training_status.json (``save``: write the file now)."""
        status = self.status
        if status is None or not self.parameters:
            return
        with status.lock:
            for name, index in self.lesson.items():
                entry = status.data.get(name)
                if not isinstance(entry, dict):
                    entry = status.data[name] = {}
                entry["lesson_num"] = index
            if save:
                status.save()
