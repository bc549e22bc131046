"""Turn an ``--env`` value into a factory that builds a BaseEnv inside a worker.

Accepted forms:
  builtin:<Name>        a built-in env (ml_arl.envs.games.builtin.BUILTIN_ENVS)
  gymnasium:<EnvId>     a gymnasium env wrapped as a one-agent BaseEnv
  pettingzoo:<module>   a PettingZoo env module's parallel_env (or AEC env), agents -> behaviors by name
  palaestrai:<run file> the environment of a palaestrAI run file, one behavior per agent (ml_arl.palaestrai)
                        prefix (ml_arl.envs.adapters.pettingzoo_env); pettingzoo:<module>:<attr> names the constructor
  grid2op:<name>        a Grid2Op power grid (its test data, no download): Operator [+ Opponent] behaviors
                        (ml_arl.envs.adapters.grid2op_env; docs/grid2op.md)
  package.module:attr   a callable returning a BaseEnv
  path/to/Build.x86_64  a Unity player build (any other value is a path; the extension may be left out)
  (nothing)             the Unity Editor: press Play in the Editor, we listen on port 5004

For Unity builds ``--env-args`` go to the executable unchanged; the build and every port it
needs are checked here, before any worker starts, so a wrong path or a busy port is a one-line
error. With ``manager: ray`` they are checked by each actor on its own node instead
(ml_arl.envs.adapters.unity_nodes), where the build must be at the same (absolute) path.

``--env-args key=value ...`` become keyword arguments (values read as YAML scalars). A user
callable receives ``worker_id`` and ``seed`` too when its signature names them (or takes
``**kwargs``), and ``num_areas`` when it names it (or takes ``**kwargs`` and num_areas is not 1).
``env_settings.num_areas`` (ML-Agents' training areas per instance) multiplies the agents of a
built-in env, builds that many copies of a gymnasium env (as agents of one behavior), and is
passed to a user callable, which must then accept it.
Factories travel to worker processes with cloudpickle, so lambdas and closures work.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any, Optional

import yaml

from ml_arl.core.env_factory import EnvFactory
from ml_arl.core.exceptions import EnvironmentSourceError
from ml_arl.core.import_path import ImportPathError, resolve

logger = logging.getLogger(__name__)


def parse_env_args(env_args: Optional[list[str]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in env_args or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise EnvironmentSourceError(
                f"--env-args: {item!r} is not key=value; Python environments take arguments as key=value"
            )
        try:
            out[key.lstrip("-")] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise EnvironmentSourceError(
                f"--env-args: the value of {key!r} is not a YAML scalar ({value!r}); quote it or fix its syntax"
            ) from None
    return out


def _accepts(fn: Callable[..., Any], name: str, via_var_keyword: bool = True) -> bool:
    """``fn`` has a parameter ``name`` (or, if ``via_var_keyword``, takes ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or (via_var_keyword and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()))


def is_python_source(env_path: Optional[str]) -> bool:
    """builtin:, gymnasium: or package.module:attr (anything else is a Unity build or the Editor)."""
    if not env_path:
        return False
    kind, sep, _ = env_path.partition(":")
    if not sep or not kind:
        return False
    if kind in ("builtin", "gymnasium", "pettingzoo", "palaestrai", "grid2op"):
        return True
    return "/" not in kind and "\\" not in kind and not kind.endswith((".x86_64", ".x86", ".exe", ".app"))


def resolve_env(
    env_path: Optional[str], env_args: Optional[list[str]] = None, num_areas: int = 1, probe: bool = True
) -> EnvFactory:
    """Check a Python source exists (import it, look it up) and return its factory. ``probe``
    False (``--check``): nothing is built, not even the trial PettingZoo environment."""
    if not env_path or not is_python_source(env_path):
        raise EnvironmentSourceError(f"--env {env_path}: not a Python environment; Unity builds go through unity_factory")
    kwargs = parse_env_args(env_args)
    kind, sep, name = env_path.partition(":")
    if sep and kind == "builtin":
        from ml_arl.envs.games.builtin import BUILTIN_ENVS

        if name not in BUILTIN_ENVS:
            raise EnvironmentSourceError(
                f"--env {env_path}: no built-in environment '{name}'; available: {', '.join(sorted(BUILTIN_ENVS))}"
            )
        return EnvFactory(env_path, BUILTIN_ENVS[name], {**kwargs, "num_areas": num_areas})
    if sep and kind == "gymnasium":
        import gymnasium

        from ml_arl.envs.adapters.gym_env import make_gymnasium_env

        if name not in gymnasium.registry:
            raise EnvironmentSourceError(f"--env {env_path}: gymnasium has no environment id '{name}'")
        return EnvFactory(env_path, make_gymnasium_env, {"env_id": name, "num_areas": num_areas, **kwargs})
    if sep and kind == "pettingzoo":
        return _pettingzoo_factory(env_path, name, kwargs, num_areas, probe)
    if sep and kind == "grid2op":  # a Grid2Op power grid (ml_arl.envs.adapters.grid2op_env)
        from ml_arl.envs.adapters.grid2op_env.env_source import grid2op_source

        build, build_kwargs = grid2op_source(env_path, name, kwargs, num_areas, probe)
        return EnvFactory(env_path, build, build_kwargs)
    if sep and kind == "palaestrai":  # a palaestrAI run file's environment and agents (ml_arl.palaestrai)
        from ml_arl.palaestrai.env_source import make_env, palaestrai_env_kwargs

        return EnvFactory(f"palaestrAI run file {name}", make_env, palaestrai_env_kwargs(env_path, name), True, True)
    if sep:
        try:
            target = resolve(env_path)
        except ImportPathError as err:
            raise EnvironmentSourceError(f"--env {env_path}: {err}") from None
        if not callable(target):
            raise EnvironmentSourceError(f"--env {env_path}: '{name}' is not callable; it must return a BaseEnv")
        if _accepts(target, "num_areas", via_var_keyword=num_areas != 1):
            kwargs = {**kwargs, "num_areas": num_areas}
        elif num_areas != 1:
            raise EnvironmentSourceError(
                f"env_settings.num_areas: {num_areas}, but {env_path} takes no num_areas argument; "
                "add one to the factory or set num_areas to 1"
            )
        return EnvFactory(env_path, target, kwargs, _accepts(target, "worker_id"), _accepts(target, "seed"))
    raise EnvironmentSourceError(f"--env {env_path}: not a Python environment")


def _pettingzoo_factory(env_path: str, target: str, kwargs: dict[str, Any], num_areas: int, probe: bool) -> EnvFactory:
    """Import the module, find its constructor and (``probe``) build the env once here, so that a
    wrong name, argument or space is a one-line error before any worker starts."""
    try:
        import pettingzoo  # noqa: F401
    except ImportError:
        raise EnvironmentSourceError(
            f"--env {env_path}: PettingZoo is not installed; pip install 'ml_arl[pettingzoo]'"
        ) from None
    from ml_arl.envs.adapters.pettingzoo_env import env_constructor, make_pettingzoo_env

    if num_areas != 1:
        raise EnvironmentSourceError(
            f"env_settings.num_areas: {num_areas}, but PettingZoo environments have one area; set num_areas to 1"
        )
    try:
        _, described = env_constructor(target)
    except ValueError as err:
        raise EnvironmentSourceError(f"--env {env_path}: {err}") from None
    try:
        if probe:
            make_pettingzoo_env(target, seed=0, **kwargs).close()
    except Exception as err:  # the user's environment: any failure, said in one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise EnvironmentSourceError(
            f"--env {env_path}: {described}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}) failed: "
            f"{type(err).__name__}: {first}; check --env-args"
        ) from None
    return EnvFactory(env_path, make_pettingzoo_env, {"target": target, **kwargs})


def probe_env(factory: EnvFactory, seed: int) -> dict[str, Any]:
    """``--check-wiring``: build the environment once in this process, reset it, log its
    behaviors and close it; what it raises is a one-line EnvironmentSourceError."""
    try:
        env = factory(0, seed)
        try:
            env.reset()
            specs = dict(env.behavior_specs)
        finally:
            env.close()
    except Exception as err:  # the user's environment: any failure, said in one line
        if isinstance(err, EnvironmentSourceError):
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise EnvironmentSourceError(f"--env {factory.description}: did not start: {type(err).__name__}: {first}") from None
    for name, spec in specs.items():
        logger.info("Behavior %s: observations %s, actions %s", name, [tuple(o.shape) for o in spec.observation_specs],
                    spec.action_spec)
    return specs


def unity_factory(options: Any, seed: int) -> EnvFactory:
    """The factory of a Unity build (``env_settings.env_path``) or of the Editor (no env_path).
    Checks the build and the ports now; ``options`` is a RunOptions."""
    import os

    from mlagents_envs import env_utils

    from ml_arl.envs.adapters.unity_env import EDITOR_PORT, make_unity_env, port_is_free
    from ml_arl.settings import lesson_values, resolve_parameter_seeds

    env = options.env_settings
    engine = options.engine_settings
    file_name: Optional[str] = None
    on_nodes = env.manager == "ray"
    if on_nodes and not env.env_path:
        raise EnvironmentSourceError(
            "manager: ray needs a Unity build (--env path/to/Build.x86_64): the Unity Editor runs on this machine "
            "only; train in the Editor with manager: subprocess"
        )
    if on_nodes:
        # the build and its ports are checked by each actor on its own node (ml_arl.envs.adapters.unity_nodes)
        file_name = os.path.abspath(env.env_path)
        logger.info(
            "Unity build %s: not checked here (manager: ray); each worker checks it and picks a free port from "
            "%d up on its own Ray node", file_name, env.base_port,
        )
    elif env.env_path:
        launch = env_utils.validate_environment_path(env.env_path)
        if launch is None or os.path.isdir(launch):
            raise EnvironmentSourceError(
                f"--env {env.env_path}: no Unity build found there (also tried the .x86_64 and .x86 "
                "extensions); check the path, or leave --env out to train in the Unity Editor"
            )
        if not os.access(launch, os.X_OK):
            raise EnvironmentSourceError(f"--env {env.env_path}: {launch} is not executable; run chmod +x {launch}")
        file_name = os.path.abspath(launch)
        ports = [env.base_port + i for i in range(env.num_envs)]
        if ports[-1] > 65535:
            raise EnvironmentSourceError(
                f"--base-port: {env.base_port} + {env.num_envs} workers runs past port 65535; use a lower --base-port"
            )
        for worker_id, port in enumerate(ports):
            if not port_is_free(port, env.listen_address):
                raise EnvironmentSourceError(
                    f"--base-port: port {port} (worker {worker_id}) is already in use, maybe by another training "
                    f"run or Unity process; pick free ports with --base-port (e.g. --base-port {env.base_port + 100})"
                )
    elif not port_is_free(EDITOR_PORT, env.listen_address):
        raise EnvironmentSourceError(
            f"port {EDITOR_PORT} (the Unity Editor's) is already in use, maybe by another arl-learn or "
            "mlagents-learn waiting for the Editor; stop it, or pass --env to train a build"
        )
    kwargs = {
        "file_name": file_name,
        "base_port": env.base_port,
        "no_graphics": engine.no_graphics,
        "no_graphics_monitor": engine.no_graphics_monitor,
        "timeout_wait": env.timeout_wait,
        "additional_args": list(env.env_args or []),
        "log_folder": os.path.abspath(options.checkpoint_settings.run_logs_dir),
        "num_areas": env.num_areas,
        "engine": {
            "width": engine.width,
            "height": engine.height,
            "quality_level": engine.quality_level,
            "time_scale": engine.time_scale,
            "target_frame_rate": engine.target_frame_rate,
            "capture_frame_rate": engine.capture_frame_rate,
        },
        # the first lessons' values; the controller sends the current ones when a phase begins
        "environment_parameters": lesson_values(resolve_parameter_seeds(options.environment_parameters, seed)),
        "listen_address": env.listen_address,
        "debug": options.debug,
        "fast_bridge": env.fast_bridge,
    }
    description = f"Unity build {file_name}" if file_name else f"Unity Editor (port {EDITOR_PORT})"
    if on_nodes:
        from ml_arl.envs.adapters.unity_nodes import make_unity_env_on_node

        return EnvFactory(description + " (on the Ray nodes)", make_unity_env_on_node, kwargs, pass_worker_id=True)
    if file_name is None:
        logger.info(
            "Listening on port %d. Start training by pressing the Play button in the Unity Editor "
            "(waiting up to %d s, --timeout-wait).", EDITOR_PORT, env.timeout_wait,
        )
    return EnvFactory(description, make_unity_env, kwargs, pass_worker_id=True, pass_seed=True)
