"""environment_parameters: per parameter a number, a sampler (``ml_arl.settings.samplers``) or a
curriculum of lessons, with ML-Agents' keys and defaults.

A curriculum is ``{curriculum: [lesson, ...]}``. A lesson has a ``name``, a ``value`` (a number
or a sampler) and, on every lesson but the last, ``completion_criteria``: when to move on to the
next lesson (``CompletionCriteria``). Everything is kept as plain data, which is what
configuration.yaml shows and what environment workers receive (pickled)::

    {"size": 0.2,
     "mass": {"sampler_type": "uniform", "sampler_parameters": {"min_value": 1.0, "max_value": 3.0, "seed": -1}},
     "difficulty": {"curriculum": [{"name": "easy", "value": 1.0, "completion_criteria": {...}},
                                   {"name": "hard", "value": 2.0, "completion_criteria": None}]}}

``check_environment_parameters`` validates a raw mapping and describes its problems one line
each; ``resolve_parameter_seeds`` gives every sampler (those of lessons too) its seed for a run;
``lesson_values`` is what the environments get: each parameter's value in its current lesson.
How lessons advance during a run is ``ml_arl.training.curriculum``.
"""

from __future__ import annotations

import copy
import difflib
import logging
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal, Optional

from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError

from ml_arl.settings.errors import validate
from ml_arl.settings.samplers import check_values
from ml_arl.settings.values import Int, Strict, key_text, number, short

logger = logging.getLogger("ml_arl.settings")

MEASURES = ("progress", "reward", "Elo")  # as ML-Agents' documentation spells them; any letter case is accepted
LESSON_KEYS = ("name", "value", "completion_criteria")


def _threshold(value: Any) -> Any:
    if number(value) is None:
        raise ValueError("give a number")
    return number(value)


def _measure(value: Any) -> Any:
    if isinstance(value, str):
        for measure in MEASURES:
            if value.lower() == measure.lower():
                return measure
    return value


class CompletionCriteria(Strict):
    """When a lesson is done (ML-Agents' CompletionCriteriaSettings: its keys and defaults)."""

    behavior: str  # whose progress, episode rewards or ELO are measured
    measure: Annotated[Literal["progress", "reward", "Elo"], BeforeValidator(_measure)] = "reward"
    min_lesson_length: Int = Field(0, ge=0)  # episodes the behavior finishes in the lesson, at least
    signal_smoothing: bool = True  # reward: 0.25 x the previous measure + 0.75 x the new mean
    threshold: Annotated[float, BeforeValidator(_threshold)] = 0.0  # the lesson ends once the measure is above it
    require_reset: bool = False  # reset every environment when the lesson changes


def is_curriculum(value: Any) -> bool:
    return isinstance(value, dict) and "curriculum" in value


def _lesson_label(lesson: Any, index: int) -> str:
    """A lesson in a key path: its name when it has one, else its position."""
    name = lesson.get("name") if isinstance(lesson, dict) else None
    return key_text(name) if isinstance(name, str) and name else str(index)


def _check_criteria(raw: Any, at: str, last: bool) -> tuple[Optional[dict[str, Any]], list[str]]:
    """A lesson's completion_criteria (``at``: the lesson's path) as plain data, or its problems."""
    where = f"{at}.completion_criteria"
    if not isinstance(raw, dict):
        return None, [f"{where}: expected a mapping (behavior, measure, threshold, ...), got {short(raw)}"]
    criteria, errs = validate(CompletionCriteria, raw, ("completion_criteria",))
    if errs:
        return None, [f"{at}.{e}" for e in errs]
    problems = []
    if not criteria.behavior or "?" in criteria.behavior:
        problems.append(f"{where}.behavior: {short(criteria.behavior)} is invalid; give a behavior name (without ?team=N)")
    if criteria.measure == "progress" and not 0.0 <= criteria.threshold <= 1.0:
        problems.append(
            f"{where}.threshold: {criteria.threshold} is out of range; with measure: progress it is a fraction "
            "of the behavior's max_steps, from 0 to 1"
        )
    if last:
        logger.warning("%s: the last lesson never ends; its completion_criteria is ignored (as ML-Agents)", where)
    return (None, problems) if problems else (criteria.model_dump(), [])


def _check_curriculum(raw: dict[Any, Any], path: str) -> tuple[Optional[dict[str, Any]], list[str]]:
    """One parameter's ``{curriculum: [...]}`` as plain data, or its problems (``path``: the parameter's)."""
    problems = [
        f"{path}: unknown key '{key}' next to curriculum; a curriculum parameter has only curriculum (its lessons)"
        for key in raw if key != "curriculum"
    ]
    lessons = raw["curriculum"]
    if not isinstance(lessons, list) or not lessons:
        return None, problems + [
            f"{path}.curriculum: {short(lessons)} is invalid; give a list of lessons, each with name, value "
            "and (but the last) completion_criteria"
        ]
    out: list[dict[str, Any]] = []
    for index, lesson in enumerate(lessons):
        at = f"{path}.curriculum.{_lesson_label(lesson, index)}"
        last = index == len(lessons) - 1
        if not isinstance(lesson, dict):
            problems.append(f"{at}: expected a lesson (name, value, completion_criteria), got {short(lesson)}")
            continue
        for key in lesson:
            if key not in LESSON_KEYS:
                close = difflib.get_close_matches(str(key), LESSON_KEYS, n=1, cutoff=0.5)
                hint = f"; did you mean '{close[0]}'?" if close else f"; a lesson has {', '.join(LESSON_KEYS)}"
                problems.append(f"{at}: unknown key {short(key)}{hint}")
        name = lesson.get("name")
        if "name" not in lesson:
            problems.append(f"{at}.name: required key is missing")
        elif not isinstance(name, str) or not name:
            problems.append(f"{at}.name: {short(name)} is invalid; give the lesson a name (a string)")
        value = None
        if "value" not in lesson:
            problems.append(f"{at}.value: required key is missing; give a number or a sampler")
        else:
            values, errs = check_values({"value": lesson["value"]}, at)
            problems += errs
            value = values["value"] if values is not None else None
        criteria = None
        if lesson.get("completion_criteria") is None:
            if not last:
                problems.append(
                    f"{at}: completion_criteria is missing; every lesson but the last needs one (when to move on)"
                )
        else:
            criteria, errs = _check_criteria(lesson["completion_criteria"], at, last)
            problems += errs
        out.append({"name": name, "value": value, "completion_criteria": None if last else criteria})
    return (None, problems) if problems else ({"curriculum": out}, [])


def check_environment_parameters(raw: dict[str, Any], where: str) -> tuple[Optional[dict[str, Any]], list[str]]:
    """(the parameters as plain data, []) or (None, one line per problem, each starting with ``where``)."""
    curricula = {key: value for key, value in raw.items() if isinstance(key, str) and is_curriculum(value)}
    values, problems = check_values({k: v for k, v in raw.items() if k not in curricula}, where)
    checked: dict[str, Any] = {}
    for key, value in curricula.items():
        checked[key], errs = _check_curriculum(value, f"{where}.{key_text(key)}")
        problems += errs
    if problems:
        return None, problems
    assert values is not None
    return {key: checked[key] if key in checked else values[key] for key in raw}, []


def _validated(raw: Any) -> Any:
    """The field type's check (build_run_options checks these mappings on their own, with paths)."""
    if not isinstance(raw, dict):
        raise PydanticCustomError("arl_parameters", "expected a mapping of parameter name to a number, a sampler or a curriculum")
    params, problems = check_environment_parameters(raw, "environment_parameters")
    if problems:
        raise PydanticCustomError("arl_parameters", "; ".join(problems))
    return params


# Kept (and written to configuration.yaml) as plain data.
EnvironmentParameters = Annotated[dict[str, Any], BeforeValidator(_validated)]


def curricula_criteria(params: Optional[Mapping[str, Any]], where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key path, completion_criteria) of every lesson of every curriculum in ``params`` (plain data)."""
    for key, value in (params or {}).items():
        if not is_curriculum(value):
            continue
        for index, lesson in enumerate(value["curriculum"]):
            if lesson["completion_criteria"] is not None:
                label = _lesson_label(lesson, index)
                yield f"{where}.{key_text(key)}.curriculum.{label}.completion_criteria", lesson["completion_criteria"]


def resolve_parameter_seeds(params: Optional[Mapping[str, Any]], run_seed: int) -> dict[str, Any]:
    """Plain data for a run: samplers whose seed is -1 get run_seed + their position among the
    samplers, counted in order over the parameters and, within a curriculum, over its lessons."""
    out: dict[str, Any] = {}
    offset = 0

    def seeded(value: Any) -> Any:
        nonlocal offset
        if not isinstance(value, dict):
            return value
        value = copy.deepcopy(value)
        if value["sampler_parameters"]["seed"] == -1:
            value["sampler_parameters"]["seed"] = run_seed + offset
        offset += 1
        return value

    for key, value in (params or {}).items():
        if is_curriculum(value):
            out[key] = {"curriculum": [{**lesson, "value": seeded(lesson["value"])} for lesson in value["curriculum"]]}
        else:
            out[key] = seeded(value)
    return out


def lesson_values(params: Optional[Mapping[str, Any]], lessons: Optional[Mapping[str, int]] = None) -> dict[str, Any]:
    """Each parameter's value in its lesson (``lessons``: parameter -> lesson index; default the
    first): what the environments receive, numbers and samplers only."""
    out: dict[str, Any] = {}
    for key, value in (params or {}).items():
        if is_curriculum(value):
            index = (lessons or {}).get(key, 0)
            out[key] = value["curriculum"][index]["value"]
        else:
            out[key] = value
    return out
