"""The run configuration: schema, defaults, YAML loading, validation and the CLI merge.

The schema follows ML-Agents' ``mlagents-learn`` YAML (behaviors, default_settings,
env_settings, engine_settings, checkpoint_settings, torch_settings, debug) with the same
defaults. Validation is strict and reports every problem at once, one line each, naming
the file, the key path, the bad value and the closest valid key.
"""

from __future__ import annotations

import copy
import difflib
import importlib
import logging
import math
import os
import re
from typing import Annotated, Any, Literal, Optional

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ml_arl import limits
from ml_arl.config_file import load_config_file as _read_config_file
from ml_arl.exceptions import ConfigError
from ml_arl.objectives import ROLE_OBJECTIVES, ObjectiveError, build_objective

logger = logging.getLogger(__name__)


def _to_int(value: Any) -> Any:
    """Accept 5.0e5, 500000.0 and "5.0e5" for integer keys, as ML-Agents does (int(float(v)));
    anything beyond +-2**53 is out of range (a typo, and not exact as a float)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and len(value) <= 40:
        try:
            as_float = float(value)
        except ValueError:
            return value
        if as_float.is_integer():
            value = int(as_float)
    if isinstance(value, int) and abs(value) > limits.MAX_INT:
        raise ValueError(f"out of range (at most {limits.MAX_INT:.3g} in absolute value)")
    return value


def _to_float(value: Any) -> Any:
    """YAML 1.1 reads "3.0e-4" (no sign after e) as a string; accept it as a number."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


Int = Annotated[int, BeforeValidator(_to_int)]
Float = Annotated[float, BeforeValidator(_to_float)]


class _Strict(BaseModel):
    # inf and nan are never meaningful settings (YAML's .inf / .nan, or 1e999)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


_RUN_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def check_run_name(value: str) -> str:
    """A run id names one folder inside the results folder: never a path (no escapes, no absolute paths)."""
    if not _RUN_NAME.match(value) or value in (".", ".."):
        raise ValueError(
            "is not a run name; use letters, digits, '-', '_' and '.' (one folder name: no '/', not '.' or '..')"
        )
    return value


RunName = Annotated[str, AfterValidator(check_run_name)]


ScheduleType = Literal["linear", "constant"]


class PPOSettings(_Strict):
    batch_size: Int = Field(1024, gt=0)
    buffer_size: Int = Field(10240, gt=0)
    learning_rate: Float = Field(3.0e-4, gt=0)
    beta: Float = Field(5.0e-3, ge=0)
    epsilon: Float = Field(0.2, gt=0)
    lambd: Float = Field(0.95, ge=0, le=1)
    num_epoch: Int = Field(3, gt=0)
    shared_critic: bool = False
    learning_rate_schedule: ScheduleType = "linear"
    beta_schedule: Optional[ScheduleType] = None
    epsilon_schedule: Optional[ScheduleType] = None
    # ml_arl extensions; the defaults are ML-Agents' behaviour.
    clip_value_loss: bool = True  # ML-Agents clips the value change per update to +-epsilon
    max_grad_norm: Optional[Float] = Field(None, gt=0)  # clip the gradient norm (SB3 uses 0.5)

    @model_validator(mode="after")
    def _inherit_schedules(self) -> PPOSettings:
        # As in ML-Agents: beta and epsilon follow the learning-rate schedule unless given.
        if self.beta_schedule is None:
            object.__setattr__(self, "beta_schedule", self.learning_rate_schedule)
        if self.epsilon_schedule is None:
            object.__setattr__(self, "epsilon_schedule", self.learning_rate_schedule)
        return self


class MemorySettings(_Strict):
    sequence_length: Int = Field(64, gt=0)
    memory_size: Int = Field(128, gt=0)


class NetworkSettings(_Strict):
    normalize: bool = False
    hidden_units: Int = Field(128, gt=0)
    num_layers: Int = Field(2, ge=1, le=1000)
    vis_encode_type: Literal["fully_connected", "match3", "simple", "nature_cnn", "resnet"] = "simple"
    memory: Optional[MemorySettings] = None

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError("recurrent networks (LSTM) are not supported yet; remove 'memory'")
        return value
    goal_conditioning_type: Literal["hyper", "none"] = "hyper"
    deterministic: bool = False
    # ml_arl extension: hidden-layer activation; ML-Agents always uses swish.
    activation: Literal["swish", "tanh"] = "swish"


class RewardSignalSettings(_Strict):
    gamma: Float = Field(0.99, ge=0, le=1)
    strength: Float = 1.0
    network_settings: NetworkSettings = Field(default_factory=lambda: NetworkSettings())


class RewardSignals(_Strict):
    extrinsic: RewardSignalSettings = Field(default_factory=lambda: RewardSignalSettings())


class ObjectiveSettings(_Strict):
    """What the behavior's agents maximise: a built-in objective or a class by import path."""

    name: str = "reward"  # reward | negated_reward | scaled_sum | pkg.module:Class
    params: dict[str, Any] = Field(default_factory=dict)


class SelfPlaySettings(_Strict):
    """ML-Agents' self-play (ghost trainer) settings and defaults."""

    save_steps: Int = Field(20000, gt=0)
    team_change: Optional[Int] = Field(None, gt=0)  # default 5 x save_steps
    swap_steps: Int = Field(2000, gt=0)
    window: Int = Field(10, gt=0)
    play_against_latest_model_ratio: Float = Field(0.5, ge=0, le=1)
    initial_elo: Float = 1200.0
    # ml_arl extension: the ELO K-factor. 1 is ML-Agents' rule (ELO moves by less than 1 per game).
    elo_k_factor: Float = Field(1.0, gt=0)

    @model_validator(mode="after")
    def _team_change(self) -> SelfPlaySettings:
        if self.team_change is None:
            object.__setattr__(self, "team_change", 5 * self.save_steps)
        return self


def _is_import_path(value: str) -> bool:
    module, sep, attr = value.partition(":")
    return bool(sep and module and attr and all(p.isidentifier() for p in module.split(".")) and attr.isidentifier())


class TrainerSettings(_Strict):
    trainer_type: str = "ppo"  # ppo, or a user trainer class pkg.module:Class (ml_arl.trainers.base.Trainer)
    # PPOSettings for ppo; for a user trainer, the mapping its class receives unchanged
    hyperparameters: Any = Field(default=None, validate_default=True)
    checkpoint_interval: Int = Field(500000, gt=0)
    network_settings: NetworkSettings = Field(default_factory=lambda: NetworkSettings())
    reward_signals: RewardSignals = Field(default_factory=lambda: RewardSignals())
    init_path: Optional[str] = None
    keep_checkpoints: Int = Field(5, ge=1)
    even_checkpoints: bool = False
    max_steps: Int = Field(500000, gt=0)
    time_horizon: Int = Field(64, gt=0)
    summary_freq: Int = Field(50000, gt=0)
    threaded: bool = False
    self_play: Optional[SelfPlaySettings] = None
    # ml_arl (Adversarial Resilience Learning): what the agents maximise. role is shorthand:
    # attacker = the negated environment reward, defender = the environment reward.
    objective: Optional[ObjectiveSettings] = None
    role: Optional[Literal["attacker", "defender"]] = None

    @field_validator("trainer_type")
    @classmethod
    def _trainer_type(cls, value: str) -> str:
        if value in ("sac", "poca"):
            raise ValueError(f"trainer '{value}' is not supported yet; use ppo or a trainer class pkg.module:Class")
        if value != "ppo" and not _is_import_path(value):
            hint = "did you mean 'ppo'? " if difflib.get_close_matches(value, ["ppo"], n=1, cutoff=0.5) else ""
            raise ValueError(f"{hint}expected 'ppo' or the import path of a trainer class, pkg.module:Class")
        return value

    @field_validator("hyperparameters", mode="before")
    @classmethod
    def _hyperparameters(cls, value: Any, info: ValidationInfo) -> Any:
        if info.data.get("trainer_type", "ppo") == "ppo":
            return value if isinstance(value, PPOSettings) else PPOSettings.model_validate(value or {})
        if value is not None and not isinstance(value, dict):
            raise ValueError("expected a mapping of hyperparameters for the trainer class")
        return dict(value or {})

    @model_validator(mode="after")
    def _derived(self) -> TrainerSettings:
        if self.even_checkpoints:
            object.__setattr__(self, "checkpoint_interval", max(1, self.max_steps // self.keep_checkpoints))
        return self

    def objective_spec(self) -> tuple[str, dict[str, Any]]:
        """(name, params) of the objective: role shorthand, the objective given, or the reward."""
        if self.objective is not None:
            return self.objective.name, dict(self.objective.params)
        if self.role is not None:
            return ROLE_OBJECTIVES[self.role], {}
        return "reward", {}


class EnvSettings(_Strict):
    env_path: Optional[str] = None
    env_args: Optional[list[str]] = None
    base_port: Int = Field(5005, ge=1, le=65535)
    num_envs: Int = Field(1, ge=1, le=limits.MAX_NUM_ENVS)
    num_areas: Int = Field(1, ge=1, le=limits.MAX_NUM_AREAS)
    timeout_wait: Int = Field(60, gt=0, le=86400)
    seed: Int = Field(-1, ge=-1, le=limits.MAX_SEED)
    max_lifetime_restarts: Int = Field(10, ge=-1)
    restarts_rate_limit_n: Int = Field(1, ge=-1)
    restarts_rate_limit_period_s: Int = Field(60, ge=0)
    # ml_arl extensions (not in ML-Agents): how workers run.
    manager: Literal["subprocess", "inprocess"] = "subprocess"
    steps_per_message: Int = Field(16, ge=1, le=limits.MAX_STEPS_PER_MESSAGE)
    worker_nice: Int = Field(0, ge=0, le=19)  # niceness added to worker processes: the trainer gets the CPU first
    # where the port opened for a Unity build / the Editor listens: loopback unless asked otherwise
    listen_address: str = "localhost"
    # Unity builds: per-step messages read/written straight from the wire format (false = mlagents-envs' own)
    fast_bridge: bool = True


class EngineSettings(_Strict):
    width: Int = Field(84, gt=0, le=16384)
    height: Int = Field(84, gt=0, le=16384)
    quality_level: Int = Field(5, ge=0)
    time_scale: Float = Field(20.0, gt=0, le=1000)  # Unity clamps Time.timeScale to 100
    target_frame_rate: Int = Field(-1, ge=-1)  # -1: as fast as possible
    capture_frame_rate: Int = Field(60, ge=0)  # 0: off
    no_graphics: bool = False
    no_graphics_monitor: bool = False


class CheckpointSettings(_Strict):
    run_id: RunName = "ppo"
    initialize_from: Optional[RunName] = None
    load_model: bool = False
    resume: bool = False
    force: bool = False
    train_model: bool = False
    inference: bool = False
    results_dir: str = "results"

    @property
    def write_path(self) -> str:
        return os.path.join(self.results_dir, self.run_id)

    @property
    def run_logs_dir(self) -> str:
        return os.path.join(self.write_path, "run_logs")


class TorchSettings(_Strict):
    # cpu, cuda, cuda:N, mps, xpu[:N]; whether it exists is checked when torch is imported
    device: Optional[str] = None

    @field_validator("device")
    @classmethod
    def _device(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not re.match(r"^(cpu|cuda|mps|xpu)(:[0-9]{1,3})?$", value):
            raise ValueError("is not a torch device; use cpu, cuda or cuda:N")
        return value


class ResultsStoreSettings(_Strict):
    """The run's SQLite results store (results/<run-id>/results.sqlite)."""

    enabled: bool = True
    record_steps: bool = False  # one row per agent step as well as per episode
    batch_size: Int = Field(256, gt=0)  # rows buffered before one write


class LoadSettings(_Strict):
    """Where a phase takes a brain from: results/<run>/<phase>/<behavior>/checkpoint.pt."""

    run: Optional[RunName] = None  # default: this run
    phase: Optional[str] = None  # default: the newest phase (of that run) that saved the behavior
    behavior: Optional[str] = None  # default: the same behavior


class PhaseSettings(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    mode: Literal["train", "test"] = "train"
    max_steps: Optional[Int] = Field(None, gt=0)  # steps of each counting behavior in this phase
    episodes: Optional[Int] = Field(None, gt=0)  # or episodes each counting behavior finishes
    learn: Optional[list[str]] = None  # behaviors that learn (train mode); default: all
    deterministic: bool = False  # act with the most likely action (test phases)
    environment_parameters: Optional[dict[str, Any]] = None  # on top of the run's environment_parameters
    behaviors: dict[str, dict[str, Any]] = Field(default_factory=dict)  # settings overrides per behavior
    load: dict[str, LoadSettings] = Field(default_factory=dict)  # behavior -> where its brain comes from

    def learns(self, brain: str) -> bool:
        return self.mode == "train" and (self.learn is None or brain in self.learn)


class RunOptions(_Strict):
    behaviors: dict[str, TrainerSettings] = Field(default_factory=dict)
    default_settings: Optional[TrainerSettings] = None
    env_settings: EnvSettings = Field(default_factory=lambda: EnvSettings())
    engine_settings: EngineSettings = Field(default_factory=lambda: EngineSettings())
    environment_parameters: Optional[dict[str, Any]] = None  # checked by _check_environment_parameters
    checkpoint_settings: CheckpointSettings = Field(default_factory=lambda: CheckpointSettings())
    torch_settings: TorchSettings = Field(default_factory=lambda: TorchSettings())
    debug: bool = False
    # ml_arl: phases (train, then test, ...) run in order within one arl-learn call
    phases: Optional[list[PhaseSettings]] = None
    results_store: ResultsStoreSettings = Field(default_factory=lambda: ResultsStoreSettings())
    _warned_unlisted: set[str] = PrivateAttr(default_factory=set)  # behaviors already named in a warning

    def settings_for(self, behavior: str) -> TrainerSettings:
        """Settings of a behavior seen in the environment ("Name?team=1" maps to "Name"). A behavior
        the config does not name gets default_settings, or the defaults, as in ML-Agents; the first
        time, one warning line names it."""
        name = behavior.split("?", 1)[0]
        if name in self.behaviors:
            return self.behaviors[name]
        source = "default_settings" if self.default_settings is not None else "the default settings"
        if name not in self._warned_unlisted:
            self._warned_unlisted.add(name)
            logger.warning(
                "Behavior '%s' is not in the config's behaviors; it trains with %s (add 'behaviors: {%s: ...}' to set it)",
                name, source, name,
            )
        if self.default_settings is None:
            self.default_settings = TrainerSettings()
        return self.default_settings

    def phase_settings_for(self, behavior: str, phase: Optional[PhaseSettings]) -> TrainerSettings:
        """A behavior's settings in a phase: its settings with the phase's overrides merged in."""
        base = self.settings_for(behavior)
        name = behavior.split("?", 1)[0]
        override = phase.behaviors.get(name) if phase is not None else None
        if not override:
            return base
        merged, problems = _validate(
            TrainerSettings, _deep_merge(base.model_dump(), override), ("phases", phase.name, "behaviors", name)  # type: ignore[union-attr]
        )
        if problems:
            raise ConfigError(problems)
        problems = _phase_override_problems(base, merged, f"phases.{phase.name}.behaviors.{name}")  # type: ignore[union-attr]
        if problems:
            raise ConfigError(problems)
        return merged  # type: ignore[no-any-return]

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")



def _phase_override_problems(base: TrainerSettings, merged: TrainerSettings, where: str) -> list[str]:
    """A phase may change hyperparameters, objectives, lengths ..., but not the network's shape or
    the trainer class: the brain carries over from phase to phase."""
    problems = []
    if merged.trainer_type != base.trainer_type:
        problems.append(f"{where}.trainer_type: a phase cannot change the trainer ({base.trainer_type}); start a new run")
    shape_keys = ("hidden_units", "num_layers", "vis_encode_type", "normalize", "activation")
    for key in shape_keys:
        if getattr(merged.network_settings, key) != getattr(base.network_settings, key):
            problems.append(
                f"{where}.network_settings.{key}: a phase cannot change the network's shape; the brain carries over"
            )
    return problems


# --------------------------------------------------------------------------- loading


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Valid key names at ``loc`` (the path to a nested section inside ``model``)."""
    current: Optional[type[BaseModel]] = model
    for part in loc:
        if isinstance(part, int):  # an item of a list of sections (phases)
            continue
        field = current.model_fields.get(str(part)) if current is not None else None
        if field is not None and part == "hyperparameters":
            current = PPOSettings
            continue
        current = _model_in(field.annotation) if field is not None else None
    return list(current.model_fields) if current is not None else []


def _model_in(annotation: Any) -> Optional[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if getattr(annotation, "__origin__", None) is dict:
        return None
    for arg in getattr(annotation, "__args__", ()) or ():
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
        if getattr(arg, "__origin__", None) is list:
            return _model_in(arg)
    return None


_UNSUPPORTED = {
    "reward_signals": {"curiosity", "gail", "rnd"},
    "": {"behavioral_cloning"},
}


def _describe(error: Any, prefix: tuple[Any, ...], model: type[BaseModel]) -> str:
    # pydantic adds union members / validator tags to some locations; drop them for the user.
    rel = tuple(
        p for p in error["loc"]
        if not (isinstance(p, str) and (p.startswith("function-") or p in ("float", "dict[str,any]", "constrained-float")))
    )
    clean = tuple(prefix) + rel
    path = ".".join(_key(p) for p in clean) or "(top level)"
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        key = str(clean[-1])
        parent = clean[:-1]
        if key in _UNSUPPORTED["reward_signals"] and parent and parent[-1] == "reward_signals":
            return f"{path}: reward signal '{key}' is not supported yet; only 'extrinsic' is available"
        if key in _UNSUPPORTED[""]:
            return f"{path}: '{key}' is not supported yet by ml_arl; remove it"
        valid = _fields_at(model, rel[:-1])
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else (f"; valid keys: {', '.join(valid)}" if valid else "")
        return f"{path}: unknown key '{key}'{hint}"
    if kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        close_msg = ""
        if isinstance(value, str):
            options = [o.strip(" '") for o in str(expected).replace(" or ", ",").split(",")]
            close = difflib.get_close_matches(value, options, n=1, cutoff=0.5)
            if close:
                close_msg = f"; did you mean '{close[0]}'?"
        return f"{path}: {_short(value)} is not allowed, expected {expected}{close_msg}"
    if kind == "missing":
        return f"{path}: required key is missing"
    msg = error["msg"].removeprefix("Value error, ")
    return f"{path}: {_short(value)} is invalid: {msg[0].lower() + msg[1:]}"


def _validate(model: type[BaseModel], data: Any, prefix: tuple[Any, ...]) -> tuple[Any, list[str]]:
    try:
        return model.model_validate(data), []
    except ValidationError as err:
        return None, [_describe(e, prefix, model) for e in err.errors()]


def load_config_file(path: str) -> dict[str, Any]:
    """Read a YAML config within the limits of ml_arl.config_file; its warnings are logged."""
    data, warnings = _read_config_file(path)
    for warning in warnings:
        logger.warning("%s", warning)
    return data


_SAMPLER_PARAMETERS: dict[str, dict[str, Any]] = {
    "constant": {"value": 0.0},
    "uniform": {"min_value": 0.0, "max_value": 1.0},
    "gaussian": {"mean": 1.0, "st_dev": 1.0},
    "multirangeuniform": {"intervals": [[0.0, 1.0]]},
}


def _number(value: Any) -> Optional[float]:
    value = _to_float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _key(part: Any) -> str:
    """A key in a dotted path: as written when it is a plain name, quoted (escapes shown) otherwise."""
    text = str(part)
    if text and text.isprintable() and not any(ch.isspace() or ch in ".'\"" for ch in text) and len(text) <= 60:
        return text
    return _short(text)


def _short(value: Any, limit: int = 60) -> str:
    """repr of a value for a one-line message, cut to ``limit`` characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_environment_parameters(params: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """environment_parameters: each a float or {sampler_type, sampler_parameters} (ML-Agents'
    samplers and defaults). Returns them normalised (floats; samplers with every parameter and a
    seed, -1 = derived from the run seed) and the problems found."""
    out: dict[str, Any] = {}
    problems: list[str] = []
    for key, raw in params.items():
        where = f"environment_parameters.{key}"
        as_float = _number(raw)
        if as_float is not None:
            out[key] = as_float
            continue
        if not isinstance(raw, dict):
            problems.append(f"{where}: {_short(raw)} is invalid; give a number or a sampler {{sampler_type: ..., sampler_parameters: ...}}")
            continue
        if "curriculum" in raw:
            problems.append(f"{where}.curriculum: curricula (lessons) are not supported yet; give a number or a sampler")
            continue
        unknown = sorted(set(raw) - {"sampler_type", "sampler_parameters"})
        if unknown:
            problems.append(f"{where}: unknown key '{unknown[0]}'; a sampler has sampler_type and sampler_parameters")
            continue
        kind = raw.get("sampler_type")
        if not isinstance(kind, str) or kind not in _SAMPLER_PARAMETERS:
            close = difflib.get_close_matches(str(kind), list(_SAMPLER_PARAMETERS), n=1, cutoff=0.5)
            hint = f"; did you mean '{close[0]}'?" if close else f"; expected one of {', '.join(_SAMPLER_PARAMETERS)}"
            problems.append(f"{where}.sampler_type: {_short(kind)} is not a sampler{hint}")
            continue
        given = raw.get("sampler_parameters") or {}
        if not isinstance(given, dict):
            problems.append(f"{where}.sampler_parameters: expected a mapping, got {_short(given)}")
            continue
        defaults = _SAMPLER_PARAMETERS[kind]
        values: dict[str, Any] = {**copy.deepcopy(defaults), "seed": -1}
        bad = False
        for name, value in given.items():
            if name not in values:
                valid = ", ".join(list(defaults) + ["seed"])
                problems.append(f"{where}.sampler_parameters: unknown key '{name}' for a {kind} sampler; valid keys: {valid}")
                bad = True
            elif name == "intervals":
                ok = isinstance(value, list) and value and all(
                    isinstance(iv, list) and len(iv) == 2 and all(_number(v) is not None for v in iv) for iv in value
                )
                if not ok:
                    problems.append(f"{where}.sampler_parameters.intervals: {_short(value)} is invalid; give a list of [min, max] pairs")
                    bad = True
                    continue
                values[name] = [[_number(lo), _number(hi)] for lo, hi in value]
                for lo, hi in values[name]:
                    if lo > hi:
                        problems.append(f"{where}.sampler_parameters.intervals: [{lo}, {hi}] has min > max; swap them")
                        bad = True
            elif name == "seed":
                try:
                    seed = _to_int(value)
                except ValueError:
                    seed = None
                if not isinstance(seed, int) or isinstance(seed, bool) or not -1 <= seed <= limits.MAX_SEED:
                    problems.append(f"{where}.sampler_parameters.seed: {_short(value)} is not an integer from -1 to {limits.MAX_SEED}")
                    bad = True
                else:
                    values[name] = seed
            else:
                number = _number(value)
                if number is None:
                    problems.append(f"{where}.sampler_parameters.{name}: {_short(value)} is not a number")
                    bad = True
                else:
                    values[name] = number
        if not bad and kind == "uniform" and values["min_value"] > values["max_value"]:
            problems.append(
                f"{where}.sampler_parameters: min_value {values['min_value']} is larger than max_value "
                f"{values['max_value']}; swap them"
            )
            bad = True
        if not bad:
            out[key] = {"sampler_type": kind, "sampler_parameters": values}
    return out, problems


def resolve_parameter_seeds(params: Optional[dict[str, Any]], run_seed: int) -> dict[str, Any]:
    """Samplers whose seed is -1 get run_seed + their position among the samplers (as ML-Agents)."""
    out: dict[str, Any] = {}
    offset = 0
    for key, value in (params or {}).items():
        if isinstance(value, dict):
            value = copy.deepcopy(value)
            if value["sampler_parameters"]["seed"] == -1:
                value["sampler_parameters"]["seed"] = run_seed + offset
            offset += 1
        out[key] = value
    return out


def _trainer_problems(settings: TrainerSettings, where: str) -> list[str]:
    problems = []
    if settings.role is not None and settings.objective is not None:
        problems.append(f"{where}: give either role ({settings.role}) or objective, not both; role is shorthand for an objective")
    name, params = settings.objective_spec()
    try:
        build_objective(name, params)
    except ObjectiveError as err:
        problems.append(f"{where}.objective: {err}")
    if settings.trainer_type != "ppo":
        module_name, _, attr = settings.trainer_type.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            problems.append(f"{where}.trainer_type: cannot import module {module_name!r} ({err}); is it on PYTHONPATH?")
        else:
            if not isinstance(getattr(module, attr, None), type):
                problems.append(f"{where}.trainer_type: module {module_name!r} has no class {attr!r}")
    return problems


def _check_phases(base: RunOptions, behaviors: dict[str, TrainerSettings], has_defaults: bool) -> list[str]:
    """Phase names, lengths, learners, overrides and brain sources (what can be checked before
    the environment shows its behaviors; loads from other runs are checked with the results folder)."""
    phases = base.phases or []
    problems: list[str] = []
    if not phases:
        return ["phases: the list is empty; give at least one phase or remove 'phases'"]
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
        for name, override in phase.behaviors.items():
            if unknown(name):
                problems.append(f"{where}.behaviors: '{name}' is not a configured behavior (configured: {configured})")
                continue
            if name in behaviors and isinstance(override, dict):
                try:
                    base.behaviors = behaviors
                    base.phase_settings_for(name, phase)
                except ConfigError as err:
                    problems += err.problems
        if phase.environment_parameters:
            normalized, errs = _check_environment_parameters(phase.environment_parameters)
            problems += [f"{where}.{e}" for e in errs]
            if not errs:
                phase.environment_parameters = normalized
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
    return problems


def build_run_options(data: dict[str, Any], cli_overrides: dict[str, dict[str, Any]], source: str) -> RunOptions:
    """Validate a config dict plus typed CLI flags into RunOptions, reporting every problem at once."""
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

    problems: list[str] = []
    behaviors_raw = data.pop("behaviors", None)
    defaults_raw = data.pop("default_settings", None)
    if behaviors_raw is None:
        behaviors_raw = {}
    elif not isinstance(behaviors_raw, dict):
        problems.append(f"behaviors: expected a mapping of behavior name to settings, got {_short(behaviors_raw)}")
        behaviors_raw = {}
    if defaults_raw is not None and not isinstance(defaults_raw, dict):
        problems.append(f"default_settings: expected a mapping of trainer settings, got {_short(defaults_raw)}")
        defaults_raw = None

    base, errs = _validate(RunOptions, data, ())
    problems += errs
    defaults = None
    if defaults_raw is not None:
        defaults, errs = _validate(TrainerSettings, defaults_raw, ("default_settings",))
        problems += errs

    behaviors: dict[str, TrainerSettings] = {}
    for where, section in [("default_settings", defaults_raw)] + [(f"behaviors.{n}", r) for n, r in behaviors_raw.items()]:
        if isinstance(section, dict) and "framework" in section:
            section.pop("framework")  # legacy ML-Agents key; ML-Agents drops it the same way
            logger.warning("%s: %s.framework is obsolete and was ignored", source, where)
    for name, raw in behaviors_raw.items():
        if not isinstance(name, str) or "?" in name or limits.behavior_name_problem(name) is not None:
            problems.append(
                f"behaviors: {_short(name)} is not a behavior name; use the name the environment gives "
                "(no '/', '\\', '?', not '.' or '..')"
            )
            continue
        raw = {} if raw is None else raw
        if not isinstance(raw, dict):
            problems.append(f"behaviors.{name}: expected a mapping of trainer settings, got {_short(raw)}")
            continue
        own, errs = _validate(TrainerSettings, raw, ("behaviors", name))
        problems += errs
        if own is None:
            continue
        merged_raw = _deep_merge(defaults_raw or {}, raw)
        merged, errs = _validate(TrainerSettings, merged_raw, ("behaviors", name))
        if merged is not None:
            behaviors[str(name)] = merged
        elif defaults is not None:
            problems += errs

    for name, settings in list(behaviors.items()) + ([("default_settings", defaults)] if defaults else []):
        where = f"behaviors.{name}" if name != "default_settings" else name
        hp = settings.hyperparameters
        if isinstance(hp, PPOSettings) and hp.batch_size > hp.buffer_size:
            problems.append(
                f"{where}.hyperparameters.batch_size: {hp.batch_size} is larger than buffer_size "
                f"({hp.buffer_size}); make batch_size <= buffer_size"
            )
        net = settings.network_settings
        num_envs = base.env_settings.num_envs if base is not None else 1
        too_big = limits.network_memory_problem(net.hidden_units, net.num_layers, num_envs)
        if too_big is not None:
            problems.append(f"{where}.network_settings: {too_big}")

    for name, settings in list(behaviors.items()) + ([("default_settings", defaults)] if defaults else []):
        where = f"behaviors.{name}" if name != "default_settings" else name
        problems += _trainer_problems(settings, where)

    if base is not None and base.phases is not None:
        problems += _check_phases(base, behaviors, defaults is not None)

    raw_parameters = data.get("environment_parameters")
    if isinstance(raw_parameters, dict) and raw_parameters:  # checked even when other sections failed
        normalized, errs = _check_environment_parameters(raw_parameters)
        problems += errs
        if not errs and base is not None:
            base.environment_parameters = normalized

    if base is not None:
        env = base.env_settings
        if env.num_envs > 1 and env.env_path is None:
            problems.append("env_settings.num_envs: num_envs > 1 needs env_settings.env_path (or --env)")
        if base.checkpoint_settings.resume and base.checkpoint_settings.force:
            problems.append("checkpoint_settings: resume and force cannot both be set; pick one")

    if problems:
        raise ConfigError([f"{source}: {p}" for p in problems])
    assert base is not None
    base.behaviors = behaviors
    base.default_settings = defaults
    return base
