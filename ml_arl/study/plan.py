"""A study file and its base config, checked before anything runs: every problem in one go, one
line each (``ConfigError``, exit code 2).

Besides the study file's own keys: the base config must be a valid arl-learn config; every
searched key must be a key of it (else the closest valid one is named), and the config must stay
valid at the ends of every searched range and with every choice; the metric's behavior must be
one of the config's; the grid sampler takes finite samplers only.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from pydantic import ValidationError

from ml_arl.core.exceptions import ConfigError
from ml_arl.settings import RunOptions
from ml_arl.settings.build import build_run_options
from ml_arl.settings.config_file import load_config_file
from ml_arl.settings.errors import validate
from ml_arl.study import space
from ml_arl.study.settings import GRID_SAMPLERS, SEARCH_SAMPLERS, StudySettings


@dataclass
class StudyPlan:
    path: str  # the study file
    settings: StudySettings
    base_path: str  # the base arl-learn config
    base: dict[str, Any]  # its contents, with the study's max_steps applied
    options: RunOptions  # the base config validated
    behavior: Optional[str]  # whose metric counts (None: the runs' only behavior)
    phase: Optional[str]  # with phases: the phase whose summaries count
    span: int  # a run's max_steps: one seed's share of a trial's report steps
    warnings: list[str] = field(default_factory=list)

    def trial_config(self, values: dict[str, Any]) -> dict[str, Any]:
        """The base config with a trial's values: a complete arl-learn config."""
        return space.with_values(self.base, values)


def _with_max_steps(data: dict[str, Any], max_steps: int) -> dict[str, Any]:
    behaviors = data.get("behaviors")
    if isinstance(behaviors, dict) and behaviors:
        for name in behaviors:
            data = space.set_key(data, f"behaviors.{name}.max_steps", max_steps)
    else:
        data = space.set_key(data, "default_settings.max_steps", max_steps)
    return data


def _build(data: dict[str, Any], source: str) -> tuple[Optional[RunOptions], list[str]]:
    try:
        return build_run_options(data, {}, source), []
    except ConfigError as err:
        return None, err.problems


def _search_problems(plan_settings: StudySettings, base: dict[str, Any], options: RunOptions, source: str) -> list[str]:
    problems = []
    valid = space.dotted_keys(options.as_dict())
    for key, sampler in plan_settings.search.items():
        where = f"search.{key}"
        if (plan_settings.sampler == "grid" or plan_settings.mode == "grid") and sampler.sampler_type not in GRID_SAMPLERS:
            problems.append(f"{where}: a grid needs a finite set of values (int_uniform or choice), not {sampler.sampler_type}")
        for value in space.ends(sampler):
            _, errs = _build(space.set_key(base, key, value), source)
            if not errs:
                continue
            inside = [k for k in valid if k.startswith(f"{key}.")]
            if key not in valid and inside:
                problems.append(f"{where}: a section of {source}, not one setting; search the keys inside it, e.g. {inside[0]}")
            elif key not in valid:
                problems.append(f"{where}: not a key of {source}{space.closest_key(key, valid)}")
            else:
                first = errs[0].removeprefix(f"{source}: ")
                problems.append(f"{where}: {value!r} makes the config invalid: {first}")
            break
    return problems


def _metric_behavior(settings: StudySettings, options: RunOptions, problems: list[str]) -> Optional[str]:
    names = list(options.behaviors)
    wanted = settings.metric.behavior
    if wanted is None:
        if len(names) > 1:
            problems.append(f"metric.behavior: the config has behaviors {', '.join(names)}; name the one whose metric counts")
        return names[0] if len(names) == 1 else None
    if names and wanted not in names:
        problems.append(f"metric.behavior: {wanted!r} is not a behavior of the config{space.closest_key(wanted, names)}")
    return wanted


def _sampler_type_problems(data: dict[str, Any]) -> list[str]:
    """Search entries whose sampler_type is not one (named with the closest); they are dropped
    from ``data`` so that the rest is still checked."""
    search = data.get("search")
    if not isinstance(search, dict):
        return []
    problems = []
    for key, sampler in list(search.items()):
        kind = sampler.get("sampler_type") if isinstance(sampler, dict) else None
        if isinstance(sampler, dict) and kind not in SEARCH_SAMPLERS:
            hint = space.closest_key(str(kind), list(SEARCH_SAMPLERS)) or f"; expected one of {', '.join(SEARCH_SAMPLERS)}"
            problems.append(f"search.{key}.sampler_type: {kind!r} is not a search sampler{hint}")
            del search[key]
    return problems


def _validate(data: dict[str, Any]) -> tuple[Optional[StudySettings], list[str]]:
    """The settings and every problem of the study file's own keys. With problems, the settings
    are those of the keys without any (defaults for the others), so that the config and the search
    are checked too; None when even that fails."""
    data = copy.deepcopy(data)
    problems = _sampler_type_problems(data)
    settings, errs = validate(StudySettings, data, ())
    if settings is not None:
        return settings, problems
    problems += errs
    broken: set[Any] = set()
    rest = dict(data)
    try:
        StudySettings.model_validate(data)
    except ValidationError as err:
        for e in err.errors():
            loc = e["loc"]
            if len(loc) > 1 and loc[0] in ("search", "metric") and isinstance(rest.get(loc[0]), dict):
                rest[loc[0]] = {k: v for k, v in rest[loc[0]].items() if k != loc[1]}  # the other keys are still checked
            elif loc:
                broken.add(loc[0])
    rest = {k: v for k, v in rest.items() if k not in broken}
    settings, _ = validate(StudySettings, rest, ())
    if settings is None and isinstance(data.get("metric"), dict):  # the metric without its broken keys is no metric
        settings, _ = validate(StudySettings, {k: v for k, v in rest.items() if k != "metric"}, ())
    return settings, problems


def _metric_phase(settings: StudySettings, options: RunOptions, problems: list[str]) -> Optional[str]:
    names = [p.name for p in options.phases or []]
    wanted = settings.metric.phase
    if wanted is None:
        return names[-1] if names else None
    if wanted not in names:
        valid = f"; the config's phases: {', '.join(names)}" if names else "; the config has no phases"
        problems.append(f"metric.phase: {wanted!r} is not a phase of the config{space.closest_key(wanted, names) or valid}")
    return wanted


def load_plan(path: str) -> StudyPlan:
    """The checked study; ``ConfigError`` with every problem, each line starting with its file."""
    data, warnings = load_config_file(path)
    settings, problems = _validate(data)
    if settings is None:
        raise ConfigError([f"{path}: {p}" for p in problems])
    searched = bool(data.get("search"))  # the entries with problems are left out of settings.search
    if not searched and settings.trials not in (None, 1):
        problems.append(f"trials: {settings.trials} trials with no search would run one config {settings.trials} times; give seeds instead")
    if (settings.sampler == "grid" or settings.mode == "grid") and not searched:
        problems.append("sampler: a grid needs a search" if settings.mode != "grid" else "mode: grid needs a search")
    if settings.mode == "grid":
        given = settings.model_fields_set
        if "trials" in given:
            problems.append("trials: mode grid runs every combination of the search; leave trials out")
        if "sampler" in given and settings.sampler != "grid":
            problems.append(f"sampler: mode grid walks every combination in order; leave sampler ({settings.sampler}) out")
    base_path = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), settings.config))
    if not os.path.isfile(base_path):
        raise ConfigError([f"{path}: config: {settings.config} is not a file (the path is relative to the study file)", *[f"{path}: {p}" for p in problems]])
    try:
        base, base_warnings = load_config_file(base_path)
    except ConfigError as err:
        raise ConfigError([*err.problems, *[f"{path}: {p}" for p in problems]]) from None
    if settings.max_steps is not None:
        base = _with_max_steps(base, settings.max_steps)
    options, errs = _build(base, base_path)
    if options is None:
        raise ConfigError([*errs, *[f"{path}: {p}" for p in problems]])
    problems += _search_problems(settings, base, options, base_path)
    behavior = _metric_behavior(settings, options, problems)
    phase = _metric_phase(settings, options, problems)
    if problems:
        raise ConfigError([f"{path}: {p}" for p in problems])
    trainer = options.behaviors.get(behavior) if behavior else None
    if trainer is None:
        trainer = options.default_settings or next(iter(options.behaviors.values()), None)
    span = trainer.max_steps if trainer is not None else (settings.max_steps or 500_000)
    return StudyPlan(os.path.abspath(path), settings, base_path, base, options, behavior, phase, span, warnings + base_warnings)
