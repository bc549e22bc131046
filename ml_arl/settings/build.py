"""From a config file and typed flags to ``RunOptions``: YAML loading, the CLI merge, and the
checks that span sections (default_settings merged under each behavior, batch vs buffer size,
network memory, objectives and trainer classes, phases, environment_parameters). Every problem
is reported at once, one line each, naming the file, the key path, the bad value and what to
write instead.

The options are validated first; the final RunOptions is a copy with the merged behaviors and
the normalised environment_parameters put in (``model_copy``): nothing validated is changed.
"""

from __future__ import annotations

import copy
import importlib.util
import logging
from typing import Any, Optional

from pydantic import BaseModel

import ml_arl.settings.bounds as bounds
from ml_arl.core.exceptions import ConfigError
from ml_arl.core.import_path import ImportPathError, resolve, split
from ml_arl.core.objectives import ObjectiveError, build_objective
from ml_arl.settings.errors import validate
from ml_arl.settings.matrix import expand_matrices
from ml_arl.settings.parameters import check_environment_parameters, curricula_criteria, is_curriculum
from ml_arl.settings.run import EnvSettings, PhaseSettings, RunOptions, phase_settings, policy_path
from ml_arl.settings.trainer_settings import HYPERPARAMETER_MODELS, TrainerSettings
from ml_arl.settings.values import deep_merge, short

logger = logging.getLogger("ml_arl.settings")


# Trainer classes of ml_arl's own that a translated config names (a palaestrAI run file's brains):
# importing them imports torch, which would hold back the workers' launch, so they are checked when
# the trainer is made, after the launch (tests/settings/test_settings.py checks that each is a Trainer)
OWN_TRAINERS = frozenset({"ml_arl.palaestrai.agents:BrainTrainer"})


def _trainer_problems(settings: TrainerSettings, where: str) -> list[str]:
    problems = []
    if settings.role is not None and settings.objective is not None:
        problems.append(f"{where}: give either role ({settings.role}) or objective, not both; role is shorthand for an objective")
    name, params = settings.objective_spec()
    try:
        build_objective(name, params)
    except ObjectiveError as err:
        problems.append(f"{where}.objective: {err}")
    if settings.trainer_type not in HYPERPARAMETER_MODELS:
        if settings.trainer_type in OWN_TRAINERS:
            return problems
        try:
            trainer_class = resolve(settings.trainer_type)
        except ImportPathError as err:
            problems.append(f"{where}.trainer_type: {err}")
        else:
            if not isinstance(trainer_class, type):
                module_name, name = split(settings.trainer_type)
                problems.append(f"{where}.trainer_type: module {module_name!r} has no class {name!r}")
    return problems


def _check_phases(
    base: RunOptions, behaviors: dict[str, TrainerSettings], has_defaults: bool, parameters: list[Any]
) -> tuple[list[str], list[Optional[dict[str, Any]]]]:
    """Phase names, lengths, learners, overrides, environment_parameters and brain sources (what
    can be checked before the environment shows its behaviors; loads from other runs are checked
    with the results folder). ``parameters``: each phase's raw environment_parameters mapping (or
    None). Returns the problems and each phase's normalised environment_parameters (or None)."""
    phases = base.phases or []
    problems: list[str] = []
    normalized: list[Optional[dict[str, Any]]] = [None] * len(phases)
    if not phases:
        return ["phases: the list is empty; give at least one phase or remove 'phases'"], normalized
    if base.checkpoint_settings.inference:
        problems.append("checkpoint_settings.inference: --inference does not run phases; use a phase with mode: test")

    def unknown(name: str) -> bool:
        return not has_defaults and name not in behaviors

    configured = ", ".join(sorted(behaviors)) or "none"
    seen: list[str] = []
    for i, phase in enumerate(phases):
        where = f"phases.{phase.name}"
        if phase.name in seen:
            problems.append(f"{where}: two phases are named '{phase.name}'; phase names must be unique")
        if (phase.max_steps is None) == (phase.episodes is None):
            problems.append(f"{where}: give exactly one of max_steps or episodes (the phase's length)")
        if phase.mode == "test" and phase.learn:
            problems.append(f"{where}.learn: a test phase never changes weights; remove 'learn' or use mode: train")
        for name in phase.learn or []:
            if unknown(name):
                problems.append(f"{where}.learn: '{name}' is not a configured behavior (configured: {configured})")
        for name in phase.act or []:
            if unknown(name):
                problems.append(f"{where}.act: '{name}' is not a configured behavior (configured: {configured})")
        if phase.act is not None:
            for name in [n for n in (phase.learn or []) if n not in phase.act]:
                problems.append(f"{where}.learn: '{name}' does not act in this phase (act: {', '.join(phase.act)}); "
                                "add it to act or remove it from learn")
        for name, policy in phase.play.items():
            if unknown(name):
                problems.append(f"{where}.play: '{name}' is not a configured behavior (configured: {configured})")
            if phase.learn and name in phase.learn:
                problems.append(f"{where}.play: '{name}' is in learn too; a behavior a fixed policy plays does not learn")
            try:
                policy_path(policy.name)
            except ValueError as err:
                problems.append(f"{where}.play.{name}.name: {err}")
        for stop in phase.stop_when:
            if unknown(stop.behavior):
                problems.append(f"{where}.stop_when: '{stop.behavior}' is not a configured behavior (configured: {configured})")
        for name in phase.behaviors:
            if unknown(name):
                problems.append(f"{where}.behaviors: '{name}' is not a configured behavior (configured: {configured})")
                continue
            if name in behaviors:
                try:
                    phase_settings(behaviors[name], phase, name)
                except ConfigError as err:
                    problems += err.problems
        raw = parameters[i] if i < len(parameters) else None
        if raw is not None:
            normalized[i], errs = check_environment_parameters(raw, f"{where}.environment_parameters")
            problems += errs
        for name, load in phase.load.items():
            if unknown(name):
                problems.append(f"{where}.load: '{name}' is not a configured behavior (configured: {configured})")
            same_run = load.run is None or load.run == base.checkpoint_settings.run_id
            if same_run and load.phase is not None and load.phase not in seen:
                earlier = ", ".join(seen) or "none"
                problems.append(
                    f"{where}.load.{name}.phase: '{load.phase}' is not an earlier phase of this run (earlier: {earlier})"
                )
            elif same_run and load.phase is not None:
                source = next(p for p in phases if p.name == load.phase)
                if not source.learns(load.behavior or name):
                    problems.append(
                        f"{where}.load.{name}: phase '{load.phase}' does not train '{load.behavior or name}', so it "
                        "saves no brain of it; name a phase where it learns"
                    )
            elif same_run and load.phase is None and i == 0:
                problems.append(f"{where}.load.{name}: the first phase has no earlier phase to load from; name a run")
        seen.append(phase.name)
    return problems, normalized


def _check_curricula(
    base: RunOptions, behaviors: dict[str, TrainerSettings], defaults: Optional[TrainerSettings],
    parameters: Optional[dict[str, Any]], phase_parameters: list[Optional[dict[str, Any]]],
) -> list[str]:
    """Where curricula may be written (at the top level without phases, in a phase's
    environment_parameters with phases: each phase runs its own) and what they ask of the
    behaviors they measure (configured; self-play for Elo; learning in the phase for progress
    and Elo). Behaviors the environment does not show are caught when it starts."""
    problems: list[str] = []
    phases = base.phases or []
    for key, value in (parameters or {}).items():
        if phases and is_curriculum(value):
            problems.append(
                f"environment_parameters.{key}.curriculum: with phases, a curriculum belongs to a phase; move it "
                "to phases.<name>.environment_parameters (each phase runs its own curricula)"
            )
    configured = ", ".join(sorted(behaviors)) or "none"
    sources: list[tuple[str, Optional[dict[str, Any]], Optional[PhaseSettings]]] = (
        [(f"phases.{p.name}.environment_parameters", params, p) for p, params in zip(phases, phase_parameters)]
        if phases else [("environment_parameters", parameters, None)]
    )
    for where, params, phase in sources:
        for path, criteria in curricula_criteria(params, where):
            name, measure = criteria["behavior"], criteria["measure"]
            settings = behaviors.get(name, defaults)
            if settings is None:
                problems.append(f"{path}.behavior: '{name}' is not a configured behavior (configured: {configured})")
                continue
            if measure == "Elo" and (settings.self_play is None or base.checkpoint_settings.inference):
                why = "--inference plays no self-play" if settings.self_play is not None else f"behavior '{name}' has no self_play"
                problems.append(f"{path}.measure: Elo is the self-play ELO, and {why}; use measure: reward or progress")
            elif phase is not None and measure in ("progress", "Elo") and not phase.learns(name):
                problems.append(
                    f"{path}: '{name}' does not learn in phase '{phase.name}', so its {measure} never changes; "
                    "use measure: reward, or a phase where it learns"
                )
    return problems


def _take_phase_parameters(data: dict[str, Any]) -> list[Any]:
    """Each phase's environment_parameters mapping (None where there is none), taken out of
    ``data`` (a copy): they are checked with the phases, with the phase's name in each message."""
    phases = data.get("phases")
    if not isinstance(phases, list):
        return []
    taken: list[Any] = []
    for i, phase in enumerate(phases):
        if isinstance(phase, dict) and isinstance(phase.get("environment_parameters"), dict):
            phases[i] = {k: v for k, v in phase.items() if k != "environment_parameters"}
            taken.append(phase["environment_parameters"])
        else:
            taken.append(None)
    return taken


def _overridden_problems(data: dict[str, Any], cli_overrides: dict[str, dict[str, Any]]) -> list[str]:
    """The file's own values that a flag replaces, checked as the file gives them: a wrong type
    in the file is the file's mistake even where a flag overrides it this time."""
    problems: list[str] = []
    for section, values in cli_overrides.items():
        model: type[BaseModel] = RunOptions
        given: Any = data
        prefix: tuple[str, ...] = ()
        if section != "":
            field = RunOptions.model_fields.get(section)
            model_type = field.annotation if field is not None else None
            if not isinstance(model_type, type) or not issubclass(model_type, BaseModel):
                continue
            given, model, prefix = data.get(section), model_type, (section,)
        if not isinstance(given, dict):
            continue  # a section of the wrong type is reported by the full validation
        for key in values:
            if key not in given or given[key] is None:
                continue
            _, errs = validate(model, {key: given[key]}, prefix)
            where = ".".join((*prefix, key))
            problems += [e for e in errs if e == where or e.startswith(where + ":") or e.startswith(where + ".")]
    return problems


def _apply_flags(data: dict[str, Any], cli_overrides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A copy of the config with the typed flags merged into their sections."""
    data = copy.deepcopy(data)
    for section, values in cli_overrides.items():
        if section == "":
            data.update(values)
            continue
        current = data.get(section)
        if current is None:
            data[section] = dict(values)
        elif isinstance(current, dict):
            current.update(values)
        # a section of the wrong type (a list, a string...) stays as it is: validation reports it
    return data


def _take_trainer_sections(data: dict[str, Any], problems: list[str]) -> tuple[dict[Any, Any], Optional[dict[str, Any]]]:
    """Pop ``behaviors`` and ``default_settings`` out of the config (checked on their own)."""
    behaviors_raw = data.pop("behaviors", None)
    defaults_raw = data.pop("default_settings", None)
    if behaviors_raw is None:
        behaviors_raw = {}
    elif not isinstance(behaviors_raw, dict):
        problems.append(f"behaviors: expected a mapping of behavior name to settings, got {short(behaviors_raw)}")
        behaviors_raw = {}
    if defaults_raw is not None and not isinstance(defaults_raw, dict):
        problems.append(f"default_settings: expected a mapping of trainer settings, got {short(defaults_raw)}")
        defaults_raw = None
    return behaviors_raw, defaults_raw


def _merge_behaviors(
    behaviors_raw: dict[Any, Any], defaults_raw: Optional[dict[str, Any]], has_defaults: bool, source: str,
    problems: list[str],
) -> dict[str, TrainerSettings]:
    """Each behavior's settings merged over default_settings (as ML-Agents), validated."""
    for where, section in [("default_settings", defaults_raw)] + [(f"behaviors.{n}", r) for n, r in behaviors_raw.items()]:
        if isinstance(section, dict) and "framework" in section:
            section.pop("framework")  # legacy ML-Agents key; ML-Agents drops it the same way
            logger.warning("%s: %s.framework is obsolete and was ignored", source, where)
    behaviors: dict[str, TrainerSettings] = {}
    for name, raw in behaviors_raw.items():
        if not isinstance(name, str) or "?" in name or bounds.behavior_name_problem(name) is not None:
            problems.append(
                f"behaviors: {short(name)} is not a behavior name; use the name the environment gives "
                "(no '/', '\\', '?', not '.' or '..')"
            )
            continue
        raw = {} if raw is None else raw
        if not isinstance(raw, dict):
            problems.append(f"behaviors.{name}: expected a mapping of trainer settings, got {short(raw)}")
            continue
        own, errs = validate(TrainerSettings, raw, ("behaviors", name))
        problems += errs
        if own is None:
            continue
        merged, errs = validate(TrainerSettings, deep_merge(defaults_raw or {}, raw), ("behaviors", name))
        if merged is not None:
            behaviors[str(name)] = merged
        elif has_defaults:
            problems += errs
    return behaviors


def _trainer_section_problems(settings: TrainerSettings, where: str, num_envs: int) -> list[str]:
    """Checks across a trainer section's keys: batch vs buffer, network size, objective, trainer class."""
    problems = []
    hp = settings.hyperparameters
    if type(hp) in HYPERPARAMETER_MODELS.values() and hp.batch_size > hp.buffer_size:
        problems.append(
            f"{where}.hyperparameters.batch_size: {hp.batch_size} is larger than buffer_size "
            f"({hp.buffer_size}); make batch_size <= buffer_size"
        )
    net = settings.network_settings
    if net.memory is not None and type(hp) in HYPERPARAMETER_MODELS.values() and net.memory.sequence_length > hp.batch_size:
        problems.append(
            f"{where}.network_settings.memory.sequence_length: {net.memory.sequence_length} is larger than "
            f"hyperparameters.batch_size ({hp.batch_size}); make sequence_length <= batch_size"
        )
    too_big = bounds.network_memory_problem(net.hidden_units, net.num_layers, num_envs)
    if too_big is not None:
        problems.append(f"{where}.network_settings: {too_big}")
    return problems


def _manager_problems(env: EnvSettings) -> list[str]:
    """manager: ray with what it needs (Ray installed, no lockstep)."""
    problems = []
    if env.manager == "ray" and importlib.util.find_spec("ray") is None:
        problems.append("env_settings.manager: ray needs Ray, which is not installed; pip install 'ml_arl[ray]'")
    if env.deterministic:
        if env.seed == -1:
            problems.append("env_settings.deterministic: a deterministic run needs a fixed seed; add --seed N")
        if env.manager == "ray":
            problems.append("env_settings.deterministic: Ray actors answer in no fixed order; "
                            "use manager: subprocess or drop --deterministic")
    return problems


def build_run_options(data: dict[str, Any], cli_overrides: dict[str, dict[str, Any]], source: str) -> RunOptions:
    """Validate a config dict plus typed CLI flags into RunOptions, reporting every problem at once."""
    problems: list[str] = _overridden_problems(data, cli_overrides)
    data = _apply_flags(data, cli_overrides)
    behaviors_raw, defaults_raw = _take_trainer_sections(data, problems)
    # environment_parameters mappings are checked on their own (even when other sections fail)
    parameters_raw = data.pop("environment_parameters") if isinstance(data.get("environment_parameters"), dict) else None
    expand_matrices(data, problems)  # a matrix phase becomes its pairings' test phases
    phase_parameters_raw = _take_phase_parameters(data)

    base, errs = validate(RunOptions, data, ())
    problems += errs
    defaults = None
    if defaults_raw is not None:
        defaults, errs = validate(TrainerSettings, defaults_raw, ("default_settings",))
        problems += errs
    behaviors = _merge_behaviors(behaviors_raw, defaults_raw, defaults is not None, source, problems)

    sections = [(f"behaviors.{name}", settings) for name, settings in behaviors.items()]
    sections += [("default_settings", defaults)] if defaults else []
    num_envs = base.env_settings.num_envs if base is not None else 1
    for where, settings in sections:
        problems += _trainer_section_problems(settings, where, num_envs)
    for where, settings in sections:
        problems += _trainer_problems(settings, where)

    phase_parameters: list[Optional[dict[str, Any]]] = []
    if base is not None and base.phases is not None:
        errs, phase_parameters = _check_phases(base, behaviors, defaults is not None, phase_parameters_raw)
        problems += errs
    parameters = None
    if parameters_raw is not None:
        parameters, errs = check_environment_parameters(parameters_raw, "environment_parameters")
        problems += errs
    if base is not None:
        problems += _check_curricula(base, behaviors, defaults, parameters, phase_parameters)
        env = base.env_settings
        if env.num_envs > 1 and env.env_path is None:
            problems.append("env_settings.num_envs: num_envs > 1 needs env_settings.env_path (or --env)")
        problems += _manager_problems(env)
        if base.checkpoint_settings.resume and base.checkpoint_settings.force:
            problems.append("checkpoint_settings: resume and force cannot both be set; pick one")

    if problems:
        raise ConfigError([f"{source}: {p}" for p in problems])
    assert base is not None
    update: dict[str, Any] = {"behaviors": behaviors, "default_settings": defaults}
    if parameters is not None:
        update["environment_parameters"] = parameters
    if base.phases is not None:
        update["phases"] = [
            phase if params is None else phase.model_copy(update={"environment_parameters": params})
            for phase, params in zip(base.phases, phase_parameters)
        ]
    return base.model_copy(update=update)
