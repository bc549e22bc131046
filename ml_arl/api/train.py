"""The Python API: ``ml_arl.train(config, run_id=..., callbacks=[...], **flags) -> Run``.

``config`` is what ``arl-learn`` takes (a YAML path, ML-Agents' schema or a palaestrAI run file),
a dict in the same schema, or a ``RunOptions``; ``flags`` are arl-learn's flags by their long
names (``num_envs=4``, ``resume=True``, ``env="gymnasium:CartPole-v1"``, ``torch_device="cpu"``).
The same checks run, bad input raises the same one-line errors as exceptions (``ConfigError``
with every problem in ``.problems``, ``RunDirectoryError``, ...), and results go to the same
``results/<run-id>/`` layout, so ``resume=True`` continues a run either made. ``arl-learn`` is
a shell over ``options_from`` and ``train``.

Ctrl-C (KeyboardInterrupt) and a callback's stop save a final checkpoint and return the ``Run``;
``Run.stopped`` says why. A worker or trainer failure raises.
"""

from __future__ import annotations

import difflib
import logging
import os
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Optional, Union

from ml_arl.core.exceptions import ConfigError
from ml_arl.settings import RunOptions, build_run_options, cli_flags
from ml_arl.training.callbacks import CallbackList

if TYPE_CHECKING:
    from ml_arl.api.inference import Policy
    from ml_arl.training.controller import TrainerController

logger = logging.getLogger(__name__)

ConfigLike = Union[str, "os.PathLike[str]", Mapping[str, Any], RunOptions, None]

FLAGS = cli_flags(RunOptions)


def _flag_names() -> dict[str, tuple[str, str]]:
    """Keyword -> (section, setting): each flag by its long name (``num_envs``, ``env``,
    ``torch_device``) and by the setting it sets (``env_path``, ``device``)."""
    names: dict[str, tuple[str, str]] = {}
    for flag in FLAGS:
        names[flag.option.lstrip("-").replace("-", "_")] = (flag.section, flag.name)
        names.setdefault(flag.name, (flag.section, flag.name))
    return names


def overrides_from(flags: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``train``'s keyword flags as the merge takes them: {section: {setting: value}}; an unknown
    keyword is a ConfigError naming the closest flag."""
    names = _flag_names()
    overrides: dict[str, dict[str, Any]] = {}
    problems = []
    for key, value in flags.items():
        if key not in names:
            close = difflib.get_close_matches(key, list(names), n=1)
            hint = f"; did you mean {close[0]}?" if close else "; the keywords are arl-learn's long flags (num_envs=4)"
            problems.append(f"train(): unknown option {key}{hint}")
            continue
        section, name = names[key]
        if name == "env_path" and callable(value):
            value = _import_path_of(value, problems)
        overrides.setdefault(section, {})[name] = list(value) if name == "env_args" and value is not None else value
    if problems:
        raise ConfigError(problems)
    return overrides


def _import_path_of(factory: Any, problems: list[str]) -> Optional[str]:
    """``train(env=make_env)``: the factory's ``module:name``, what ``--env`` takes, so the run's
    configuration.yaml names it. One defined in the script or a notebook cell (``__main__``)
    reaches the workers by cloudpickle, by value; a lambda or a nested function has no name to
    find it by."""
    module, name = getattr(factory, "__module__", None), getattr(factory, "__qualname__", "")
    if module and name and "<" not in name:
        found: Any = sys.modules.get(module)
        for part in name.split("."):
            found = getattr(found, part, None)
        if found is factory:
            return f"{module}:{name}"
    problems.append(
        f"train(): env={factory!r} cannot be named as module:attribute; define it at the top level of the "
        "script or module (a lambda or a nested function has no name), or pass env='module:attribute'"
    )
    return None


def options_from(
    config: ConfigLike, overrides: Optional[dict[str, dict[str, Any]]] = None, check_environment: bool = False,
    import_plugins: bool = False,
) -> RunOptions:
    """RunOptions from what arl-learn or ``train`` was given, with the typed flags on top.
    ``check_environment`` (``--check-wiring``): a palaestrAI run file's environments are started
    once here, and every agent's sensors and actuators checked against them; otherwise nothing starts.
    ``import_plugins`` (``--check``): every class a run file names is imported here; otherwise
    only its module is found, and the class is checked where it is built, after the launch."""
    overrides = overrides or {}
    if isinstance(config, RunOptions):
        if not overrides:
            return config
        return build_run_options(config.as_dict(), overrides, "(RunOptions)")
    if config is None:
        return build_run_options({}, overrides, "(no config file)")
    if isinstance(config, Mapping):
        data, where = dict(config), "(config dict)"
    else:
        from ml_arl.settings.config_file import load_config_file

        where = os.fspath(config)
        data, warnings = load_config_file(where)
        for warning in warnings:
            logger.warning("%s", warning)
        if not data:
            logger.warning("%s: the config is empty; every behavior trains with the default settings", where)
    from ml_arl.palaestrai.runfile import is_run_file

    if is_run_file(data):  # a palaestrAI experiment run file, as palaestrai 3.5.18 reads it
        from ml_arl.palaestrai.runfile import translate_file

        results_dir = overrides.get("checkpoint_settings", {}).get("results_dir", "results")
        data = translate_file(data, where, results_dir, overrides.get("env_settings", {}).get("num_envs"), check_environment,
                              import_plugins)
    return build_run_options(data, overrides, where)


class InterruptedWhileStopping(KeyboardInterrupt):
    """Ctrl-C came again while the run was saving after the first: the final checkpoint may be
    missing (those saved before are intact)."""


class Run:
    """A run of ``train``: where its files are, what it reached, and its policies.

    During the run (a callback's ``on_start`` gets it) ``policy`` gives each behavior's newest
    published policy; afterwards, its final one."""

    def __init__(self, options: RunOptions, controller: TrainerController, callbacks: CallbackList):
        self.options = options
        self._controller = controller
        self._callbacks = callbacks
        self.finished = False
        self.interrupted = False  # Ctrl-C

    # ------------------------------------------------------------------ where
    @property
    def run_id(self) -> str:
        return self.options.checkpoint_settings.run_id

    @property
    def path(self) -> str:
        """results/<run-id>"""
        return self.options.checkpoint_settings.write_path

    @property
    def run_logs(self) -> str:
        return self.options.checkpoint_settings.run_logs_dir

    @property
    def results_store(self) -> str:
        from ml_arl.results.sqlite_store import STORE_FILENAME

        return os.path.join(self.path, STORE_FILENAME)

    def onnx(self, behavior: str) -> Optional[str]:
        """results/<run-id>/<behavior>.onnx (the final model) where it was written."""
        path = os.path.join(self.path, f"{behavior}.onnx")
        return path if os.path.isfile(path) else None

    # ------------------------------------------------------------------ what it reached
    @property
    def behaviors(self) -> list[str]:
        return list(self._controller.trainers)

    @property
    def steps(self) -> dict[str, int]:
        """Each behavior's trainer step."""
        return {b: t.step for b, t in self._controller.trainers.items()}

    @property
    def env_steps(self) -> int:
        return self._controller.env_steps.total

    @property
    def stats(self) -> dict[str, dict[str, float]]:
        """Each behavior's last summary: tag -> mean over its period (what TensorBoard got last)."""
        return {b: dict(s.values) for b, s in self._callbacks.last_summary.items()}

    @property
    def stopped(self) -> Optional[str]:
        """Why a callback stopped the run (None: it was not stopped by one)."""
        return self._callbacks.reason

    @property
    def phases(self) -> list[dict[str, Any]]:
        """The schedule: each phase's name, mode and state (pending, running or done), with the steps
        each behavior acted and the episodes it finished where the phase began."""
        schedule = self._controller.schedule
        logged = schedule.log.data.get("phases", {})
        out = []
        for index, phase in enumerate(self.options.phases or [None]):
            name = phase.name if phase is not None else schedule.name
            mode = phase.mode if phase is not None else schedule.mode
            entry = dict(logged.get(name, {}))
            if phase is None:  # the unnamed phase keeps no log entry
                state = "done" if schedule.ended else ("running" if schedule.begun else "pending")
                entry = {"state": state, "acted": dict(schedule.acted), "episodes": dict(schedule.episodes)}
            elif not entry:
                entry = {"state": "pending"}
            out.append({"index": index, "name": name, "mode": mode, **entry})
        return out

    # ------------------------------------------------------------------ policies
    def policy(self, behavior: Optional[str] = None, deterministic: bool = True) -> Policy:
        """The behavior's policy as numpy (``act(observations)``); the only behavior by default."""
        from ml_arl.api.inference import Policy
        from ml_arl.core.behavior_id import choose_behavior

        trainers = self._controller.trainers
        behavior = choose_behavior(trainers, behavior, "this run")
        trainer = trainers[behavior]
        live = self._controller.router.live.get(behavior)
        snapshot = trainer.policy_snapshot() if self.finished or live is None else live
        return Policy(behavior, trainer.spec, snapshot.weights, snapshot.muscle, deterministic)

    def save_checkpoint(self, behavior: str) -> Optional[str]:
        """Save the behavior's checkpoint now; call it from ``on_summary`` (the trainer's thread)."""
        return self._controller.trainers[behavior].save_checkpoint()

    def add_stat(self, behavior: str, key: str, value: float) -> None:
        """A value for the behavior's next summary (TensorBoard, trackers)."""
        self._controller.trainers[behavior].stats.add_stat(key, value)

    def __repr__(self) -> str:
        state = "finished" if self.finished else "running"
        return f"Run({self.run_id!r}, {state}, path={self.path!r}, steps={self.steps})"


def train(config: ConfigLike = None, run_id: Optional[str] = None, callbacks: Iterable[Any] = (), **flags: Any) -> Run:
    """Train as ``arl-learn CONFIG --run-id RUN_ID --flag value ...`` does, in this process, and
    return the ``Run``. See the module's docstring."""
    if run_id is not None:
        flags["run_id"] = run_id
    options = options_from(config, overrides_from(flags))
    return train_options(options, CallbackList(callbacks))


def _quick_start(options: RunOptions, env_manager: Any, seed: int) -> Any:
    """The environments start and step in a thread while torch is imported, where the run allows
    (ml_arl.training.quick_start); None where it does not."""
    from ml_arl.training.quick_start import QuickStart, run_problem

    problem = run_problem(options)
    if problem is not None:
        logger.debug("Quick start: not for this run (%s)", problem)
        return None
    quick = QuickStart(options, env_manager, seed)
    quick.start()
    return quick


def train_options(options: RunOptions, callbacks: Optional[CallbackList] = None) -> Run:
    """``train`` on checked options (what arl-learn calls)."""
    callbacks = callbacks or CallbackList()
    env = options.env_settings
    if env.manager == "subprocess":
        from ml_arl.envs.backends.forkserver import prestart

        prestart()  # the worker server boots while the run directory is checked and the env resolved
    from ml_arl.envs.backends.factory import create_env_manager
    from ml_arl.results.run_folder import resolve_seed, validate_run_directories

    validate_run_directories(options)  # --force deletes only once everything has been checked
    seed = resolve_seed(options)
    # Workers start now and import their env while this process imports torch.
    env_manager = create_env_manager(options, seed)
    quick = None
    try:
        env_manager.launch()
        quick = _quick_start(options, env_manager, seed)
        logger.debug("Launched %d environment worker(s); importing torch", options.env_settings.num_envs)
        from ml_arl.training.controller import TrainerController

        controller = TrainerController(options, env_manager, seed, callbacks=callbacks, quick=quick)
    except BaseException:
        if quick is not None:
            quick.halt()
        env_manager.close()
        raise
    run = Run(options, controller, callbacks)  # the controller owns the env manager now and closes it
    try:
        callbacks.start(run)
        run.interrupted = controller.start_learning()
    except KeyboardInterrupt:  # a second Ctrl-C, while the first one's checkpoint was being saved
        raise InterruptedWhileStopping() from None
    finally:
        run.finished = True
    return run
