"""The run options: every section of a run configuration (env_settings, engine_settings,
checkpoint_settings, torch_settings, phases, results_store ...) with ML-Agents' keys and
defaults, and ``RunOptions``, which answers the settings of a behavior, in a phase too.

Settings that an ``arl-learn`` flag overrides declare the flag here (``setting(..., flag=...)``);
ml_arl.cli.learn builds its command line from them.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any, Literal, Optional

from pydantic import Field, PrivateAttr, field_validator, model_validator

import ml_arl.settings.bounds as bounds
from ml_arl.core.behavior_id import brain_name
from ml_arl.core.exceptions import ConfigError
from ml_arl.core.import_path import ImportPathError, is_import_path, resolve
from ml_arl.settings.errors import validate
from ml_arl.settings.flags import section, setting
from ml_arl.settings.parameters import EnvironmentParameters
from ml_arl.settings.trainer_settings import TrainerSettings
from ml_arl.settings.values import Float, Int, RunName, Strict, deep_merge, short

logger = logging.getLogger("ml_arl.settings")


class EnvSettings(Strict):
    env_path: Optional[str] = setting(
        None, flag="--env",
        help="environment: a Unity build (path), builtin:<Name>, gymnasium:<EnvId> or package.module:factory; "
        "leave out to train in the Unity Editor (port 5004); arl-learn --help lists every source",
    )
    env_args: Optional[list[str]] = setting(
        None, flag="--env-args", remainder=True,
        help="everything after it goes to the environment: a Unity build's command line, or key=value for Python envs",
    )
    base_port: Int = setting(5005, ge=1, le=65535, flag="--base-port", help="first port for Unity workers")
    num_envs: Int = setting(
        1, ge=1, le=bounds.MAX_NUM_ENVS, flag="--num-envs", help="number of environment worker processes"
    )
    num_areas: Int = setting(
        1, ge=1, le=bounds.MAX_NUM_AREAS, flag="--num-areas",
        help="training areas per environment instance: more agents per worker",
    )
    timeout_wait: Int = setting(
        60, gt=0, le=86400, flag="--timeout-wait", help="seconds to wait for an environment to start or answer"
    )
    seed: Int = setting(
        -1, ge=-1, le=bounds.MAX_SEED, flag="--seed", help="random seed, -1 = random; worker i gets seed + i"
    )
    max_lifetime_restarts: Int = setting(
        10, ge=-1, flag="--max-lifetime-restarts", help="restarts allowed per worker, -1 = unlimited"
    )
    restarts_rate_limit_n: Int = setting(
        1, ge=-1, flag="--restarts-rate-limit-n", help="restarts allowed per worker within the period, -1 = no limit"
    )
    restarts_rate_limit_period_s: Int = setting(
        60, ge=0, flag="--restarts-rate-limit-period-s", help="period of the restart rate limit in seconds"
    )
    # ml_arl extensions (not in ML-Agents): how the environment workers run: processes on this machine,
    # every env in the main process (breakpoints work), or Ray actors anywhere in a Ray cluster.
    # (the old key, backend: ray, is read as manager: ray with a warning: _one_manager_key)
    manager: Literal["subprocess", "inprocess", "ray"] = "subprocess"
    ray_address: Optional[str] = setting(
        None, flag="--ray-address", metavar="ADDRESS",
        help="run the environment workers as Ray actors (implies manager: ray) on the Ray cluster at ADDRESS "
        "(auto = the cluster this machine belongs to); manager: ray without an address starts a local Ray "
        "instance on loopback",
    )
    steps_per_message: Int = Field(16, ge=1, le=bounds.MAX_STEPS_PER_MESSAGE)
    deterministic: bool = setting(
        False, flag="--deterministic",
        help="reproduce a run bit for bit with the same --seed on the same machine: workers step in lockstep "
        "and their experience is taken in worker order (slower; see docs/configuration.md)",
    )
    worker_nice: Int = Field(0, ge=0, le=19)  # niceness added to worker processes: the trainer gets the CPU first
    # MB of shared memory a worker process may fill per behavior with observations on their way to
    # the trainer (ml_arl.acting.observation_slots); past it, and at 0, they travel pickled
    observation_memory_mb: Int = Field(1024, ge=0, le=2**20)
    listen_address: str = setting(
        "localhost", flag="--listen-address", metavar="ADDR",
        help="address the port for Unity builds / the Editor listens on; 0.0.0.0 = every interface",
    )
    # Unity builds: per-step messages read/written straight from the wire format (false = mlagents-envs' own)
    fast_bridge: bool = True

    @model_validator(mode="before")
    @classmethod
    def _one_manager_key(cls, data: Any) -> Any:
        """``manager`` says how workers run; ``ray_address`` implies manager: ray. The old spelling,
        ``backend: subprocess | ray`` beside ``manager: subprocess | inprocess``, is read with a
        warning naming the new one; a contradictory pair is a config error."""
        if not isinstance(data, dict) or ("backend" not in data and data.get("ray_address") is None):
            return data
        data = dict(data)
        manager, address = data.get("manager"), data.get("ray_address")
        if "backend" in data:
            backend = data.pop("backend")
            if backend not in ("subprocess", "ray"):
                raise ValueError(f"backend: {short(backend)} is not subprocess or ray; backend is deprecated: "
                                 "write manager: subprocess, inprocess or ray")
            if (backend, manager) in (("ray", "inprocess"), ("subprocess", "ray")):
                raise ValueError(f"manager: {manager} and backend: {backend} contradict each other; backend is "
                                 f"deprecated: write manager: {manager} or manager: {backend}, not both keys")
            if backend == "subprocess" and address is not None:
                raise ValueError(f"ray_address: {short(address)} needs manager: ray, and backend: subprocess "
                                 "says otherwise; remove backend or ray_address")
            manager = backend if backend == "ray" else manager or "subprocess"
            logger.warning("env_settings.backend is deprecated; write env_settings.manager: %s instead", manager)
        if address is not None and manager != "ray":
            if manager == "inprocess":
                raise ValueError(f"ray_address: {short(address)} needs manager: ray; manager: inprocess runs no "
                                 "workers for Ray to place; remove manager or ray_address")
            if manager == "subprocess":
                logger.warning("env_settings.manager: subprocess with ray_address means manager: ray now; "
                               "write env_settings.manager: ray instead")
            manager = "ray"
        data["manager"] = manager if manager is not None else "subprocess"
        return data


class EngineSettings(Strict):
    width: Int = setting(84, gt=0, le=16384, flag="--width", help="window width")
    height: Int = setting(84, gt=0, le=16384, flag="--height", help="window height")
    quality_level: Int = setting(5, ge=0, flag="--quality-level", help="quality level")
    # Unity clamps Time.timeScale to 100
    time_scale: Float = setting(20.0, gt=0, le=1000, flag="--time-scale", help="time scale")
    target_frame_rate: Int = setting(
        -1, ge=-1, flag="--target-frame-rate", help="target frame rate, -1 = as fast as possible"
    )
    capture_frame_rate: Int = setting(60, ge=0, flag="--capture-frame-rate", help="capture frame rate, 0 = off")
    no_graphics: bool = setting(False, flag="--no-graphics", help="run builds without graphics")
    no_graphics_monitor: bool = setting(False, flag="--no-graphics-monitor", help="graphics only for worker 0")


class CheckpointSettings(Strict):
    run_id: RunName = setting("ppo", flag="--run-id", help="name of the run; results go to <results-dir>/<run-id>")
    initialize_from: Optional[RunName] = setting(
        None, flag="--initialize-from", metavar="RUN_ID", help="start from the weights of an earlier run, at step 0"
    )
    load_model: bool = False
    resume: bool = setting(False, flag="--resume", help="continue the run --run-id from its last checkpoint")
    force: bool = setting(False, flag="--force", help="overwrite the results of an existing --run-id")
    train_model: bool = False
    inference: bool = setting(False, flag="--inference", help="act without training (use with --resume)")
    # ml_arl: acted episodes as Unity ML-Agents demonstrations (for behavioral_cloning / gail demo_path)
    record_demo: Optional[str] = setting(
        None, flag="--record-demo", metavar="DIR",
        help="write every behavior's finished episodes to DIR/<behavior>.demo (ML-Agents' .demo format), "
        "e.g. with --inference; DIR is created if missing",
    )
    results_dir: str = setting("results", flag="--results-dir", help="base folder of results")

    @property
    def write_path(self) -> str:
        return os.path.join(self.results_dir, self.run_id)

    @property
    def run_logs_dir(self) -> str:
        return os.path.join(self.write_path, "run_logs")


class TorchSettings(Strict):
    # cpu, cuda, cuda:N, mps, xpu[:N]; whether it exists is checked when torch is imported
    device: Optional[str] = setting(
        None, flag="--torch-device", help="cpu, cuda or cuda:N (default: cuda if available)"
    )
    # ml_arl: data-parallel learners on torch.distributed (ml_arl.trainers.learner_group)
    num_learners: Int = setting(
        1, ge=1, le=64, flag="--num-learners",
        help="learner processes per run: each PPO update is split over them, gradients all-reduced (gloo)",
    )

    @field_validator("device")
    @classmethod
    def _device(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not re.match(r"^(cpu|cuda|mps|xpu)(:[0-9]{1,3})?$", value):
            raise ValueError("is not a torch device; use cpu, cuda or cuda:N")
        return value


STORE_URL = re.compile(r"^postgresql(\+[a-z0-9_]+)?://")


class ResultsStoreSettings(Strict):
    """The run's results store: SQLite in results/<run-id>/results.sqlite, or with ``url`` a PostgreSQL
    database that many runs and machines share (ml_arl.results.server_store)."""

    enabled: bool = True
    record_steps: bool = False  # one row per agent step as well as per episode
    batch_size: Int = Field(256, gt=0)  # rows buffered before one write
    url: Optional[str] = setting(
        None, flag="--store", metavar="URL",
        help="write the run's episodes into the PostgreSQL database at URL (postgresql://user@host:port/db; "
        "the password from PGPASSWORD or ~/.pgpass) instead of results/<run-id>/results.sqlite",
    )
    run_name: Optional[str] = setting(
        None, flag="--store-run", metavar="NAME",
        help="the run's name in the --store database, where the run id is not unique (unset: the run id; arl-study uses <study>/<run-id>)",
    )

    @field_validator("url")
    @classmethod
    def _url(cls, value: Optional[str]) -> Optional[str]:
        if value is None:
            return value
        if not STORE_URL.match(value):
            raise ValueError("is not a PostgreSQL URL; use postgresql://user@host:port/database (leave it out for SQLite)")
        user_info = value.split("://", 1)[1].split("/", 1)[0].rpartition("@")[0]
        if ":" in user_info:
            raise ValueError(
                "holds a password, which would be written to configuration.yaml; leave it out and set PGPASSWORD or "
                "put it in ~/.pgpass"
            )
        return value


class TrackerSettings(Strict):
    """ml_arl: experiment trackers besides TensorBoard (ml_arl.results.trackers). Stats writers from Python
    entry points (``ml_arl.stats_writer`` and ML-Agents' ``mlagents.stats_writer``) load always."""

    mlflow_uri: Optional[str] = setting(
        None, flag="--mlflow-uri", metavar="URI",
        help="log the run to MLflow at URI (http://host:port, or sqlite:///FILE.db): the config as params, every summary as "
        "metrics, the .onnx models and the report as artifacts",
    )
    mlflow_experiment: str = setting("ml_arl", flag="--mlflow-experiment", metavar="NAME", help="the MLflow experiment")
    wandb_project: Optional[str] = setting(
        None, flag="--wandb-project", metavar="PROJECT",
        help="log the run to Weights & Biases project PROJECT (offline unless WANDB_MODE=online or an API key is set)",
    )
    wandb_mode: Optional[str] = setting(
        None, flag="--wandb-mode", metavar="MODE", help="online or offline; unset: online with an API key in WANDB_API_KEY, else offline"
    )
    plugins: bool = True  # load the stats writers that installed packages declare as entry points

    @field_validator("wandb_mode")
    @classmethod
    def _mode(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and value not in ("online", "offline"):
            raise ValueError("is not a W&B mode; use online or offline")
        return value


class LoadSettings(Strict):
    """Where a phase takes a brain from: results/<run>/<phase>/<behavior>/checkpoint.pt, or with
    ``initial`` the brain as this run first made it (its first weights, a fresh optimizer, step 0:
    a best response's fresh opponent, ml_arl.settings.matrix)."""

    run: Optional[RunName] = None  # default: this run
    phase: Optional[str] = None  # default: the newest phase (of that run) that saved the behavior
    behavior: Optional[str] = None  # default: the same behavior
    initial: bool = False

    @model_validator(mode="after")
    def _initial_alone(self) -> LoadSettings:
        if self.initial and (self.run or self.phase or self.behavior):
            raise ValueError("initial: true is this run's own first brain; leave out run, phase and behavior")
        return self


class StopWhen(Strict):
    """A phase ends early once ``behavior``'s episodes reach an objective: the mean, over its last
    ``episodes`` episodes of the phase, of each episode's objective per step (palaestrAI's
    AgentObjectiveTerminationCondition ``phase_avgN``)."""

    behavior: str
    episodes: Int = Field(gt=0)
    mean_objective_per_step: Float


# The built-in fixed policies (a phase's ``play``), in one table: each one's class as an import path
# (the settings stay torch-free and check a name without building the policy; ml_arl.rules has them).
BUILTIN_POLICIES: dict[str, str] = {
    "no_op": "ml_arl.rules.fixed_policy:NoOp",
    "random": "ml_arl.rules.fixed_policy:Random",
    "volt_var_droop": "ml_arl.rules.grid_defense_rules:VoltVarDroop",
    "greedy": "ml_arl.rules.grid_defense_rules:GreedyAttacker",
    "grid2op_do_nothing": "ml_arl.rules.grid2op_rules:DoNothing",  # --env grid2op:... (docs/grid2op.md)
    "grid2op_reconnect": "ml_arl.rules.grid2op_rules:ReconnectLines",
    "grid2op_greedy": "ml_arl.rules.grid2op_rules:Greedy",  # with simulate=true
    "random_line_attack": "ml_arl.rules.grid2op_rules:RandomLineAttack",
}


def policy_path(name: str) -> str:
    """The import path of the class that plays policy ``name``; ValueError (one line) when none does."""
    if name in BUILTIN_POLICIES:
        return BUILTIN_POLICIES[name]
    if not is_import_path(name):
        raise ValueError(f"no policy {name!r}: the built-in ones are {', '.join(BUILTIN_POLICIES)}; "
                         "yours is named pkg.module:Class")
    try:
        resolve(name)
    except ImportPathError as err:
        raise ValueError(str(err)) from None
    return name


class PolicySettings(Strict):
    """A fixed policy that plays a behavior in a phase: a built-in name (no_op, random,
    volt_var_droop, greedy) or pkg.module:Class, and its params (ml_arl.rules)."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class PhaseSettings(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    mode: Literal["train", "test"] = "train"
    max_steps: Optional[Int] = Field(None, gt=0)  # steps of each counting behavior in this phase
    episodes: Optional[Int] = Field(None, gt=0)  # or episodes each counting behavior finishes
    learn: Optional[list[str]] = None  # behaviors that learn (train mode); default: all
    deterministic: bool = False  # act with the most likely action (test phases)
    environment_parameters: Optional[EnvironmentParameters] = None  # on top of the run's environment_parameters
    behaviors: dict[str, dict[str, Any]] = Field(default_factory=dict)  # settings overrides per behavior
    load: dict[str, LoadSettings] = Field(default_factory=dict)  # behavior -> where its brain comes from
    stop_when: list[StopWhen] = Field(default_factory=list)  # ml_arl: the phase ends early once any of these holds
    play: dict[str, PolicySettings] = Field(default_factory=dict)  # behavior -> the fixed policy that plays it here
    act: Optional[list[str]] = None  # behaviors that act in this phase (default: all); the others sit it out
    group: Optional[str] = None  # the matrix phase this pairing comes from (ml_arl.settings.matrix)
    cell: dict[str, str] = Field(default_factory=dict)  # its players: behavior -> learned or a policy name

    def plays(self, brain: str) -> Optional[PolicySettings]:
        """The fixed policy that plays ``brain`` in this phase, or None (its own brain plays)."""
        return self.play.get(brain)

    def learns(self, brain: str) -> bool:
        return (self.mode == "train" and (self.learn is None or brain in self.learn) and brain not in self.play
                and self.acts(brain))

    def acts(self, brain: str) -> bool:
        """The behavior acts in this phase (it is not sitting it out)."""
        return self.act is None or brain in self.act


class RunOptions(Strict):
    behaviors: dict[str, TrainerSettings] = Field(default_factory=dict)  # merged with default_settings
    default_settings: Optional[TrainerSettings] = None
    env_settings: EnvSettings = section(lambda: EnvSettings())
    engine_settings: EngineSettings = section(lambda: EngineSettings(), flag_group="engine configuration (Unity builds)")
    environment_parameters: Optional[EnvironmentParameters] = None
    checkpoint_settings: CheckpointSettings = section(lambda: CheckpointSettings())
    torch_settings: TorchSettings = section(lambda: TorchSettings(), flag_group="torch configuration")
    tracker_settings: TrackerSettings = section(lambda: TrackerSettings(), flag_group="experiment trackers")
    debug: bool = setting(False, flag="--debug", help="debug logging")
    # ml_arl: phases (train, then test, ...) run in order within one arl-learn call
    phases: Optional[list[PhaseSettings]] = None
    results_store: ResultsStoreSettings = section(lambda: ResultsStoreSettings())
    _warned_unlisted: set[str] = PrivateAttr(default_factory=set)  # behaviors already named in a warning
    _fallback: Optional[TrainerSettings] = PrivateAttr(default=None)  # the defaults, once a behavior needed them

    def settings_for(self, behavior: str) -> TrainerSettings:
        """Settings of a behavior seen in the environment ("Name?team=1" maps to "Name"). A behavior
        the config does not name gets default_settings, or the defaults, as in ML-Agents; the first
        time, one warning line names it."""
        name = brain_name(behavior)
        if name in self.behaviors:
            return self.behaviors[name]
        source = "default_settings" if self.default_settings is not None else "the default settings"
        if name not in self._warned_unlisted:
            self._warned_unlisted.add(name)
            logger.warning(
                "Behavior '%s' is not in the config's behaviors; it trains with %s (add 'behaviors: {%s: ...}' to set it)",
                name, source, name,
            )
        if self.default_settings is not None:
            return self.default_settings
        if self._fallback is None:
            self._fallback = TrainerSettings()
        return self._fallback

    def phase_settings_for(self, behavior: str, phase: Optional[PhaseSettings]) -> TrainerSettings:
        """A behavior's settings in a phase: its settings with the phase's overrides merged in."""
        base = self.settings_for(behavior)
        if phase is None:
            return base
        return phase_settings(base, phase, brain_name(behavior))

    def as_dict(self) -> dict[str, Any]:
        """The options as plain data (configuration.yaml). Once a behavior the config does not name
        trained with the defaults, default_settings shows them."""
        data = self.model_dump(mode="json")
        if self.default_settings is None and self._fallback is not None:
            data["default_settings"] = self._fallback.model_dump(mode="json")
        return data


def phase_settings(base: TrainerSettings, phase: PhaseSettings, name: str) -> TrainerSettings:
    """Behavior ``name``'s settings ``base`` with ``phase``'s overrides merged in; ConfigError if
    they are invalid or change what cannot change between phases."""
    override = phase.behaviors.get(name)
    if not override:
        return base
    where = f"phases.{phase.name}.behaviors.{name}"
    merged, problems = validate(TrainerSettings, deep_merge(base.model_dump(), override), ("phases", phase.name, "behaviors", name))
    if problems:
        raise ConfigError(problems)
    problems = _phase_override_problems(base, merged, where)
    if problems:
        raise ConfigError(problems)
    return merged  # type: ignore[no-any-return]


def _phase_override_problems(base: TrainerSettings, merged: TrainerSettings, where: str) -> list[str]:
    """A phase may change hyperparameters, objectives, lengths ..., but not the network's shape or
    the trainer class: the brain carries over from phase to phase."""
    problems = []
    if merged.trainer_type != base.trainer_type:
        problems.append(f"{where}.trainer_type: a phase cannot change the trainer ({base.trainer_type}); start a new run")
    shape_keys = ("hidden_units", "num_layers", "vis_encode_type", "normalize", "activation", "goal_conditioning_type")
    for key in shape_keys:
        if getattr(merged.network_settings, key) != getattr(base.network_settings, key):
            problems.append(
                f"{where}.network_settings.{key}: a phase cannot change the network's shape; the brain carries over"
            )
    return problems
