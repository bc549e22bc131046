"""Turn an ``--env`` value into a factory that builds a BaseEnv inside a worker.

The forms (one module of this package each, found by ``registry.sources()``; ``arl-learn --help``
lists them):
  builtin:<Name>        a built-in env (ml_arl.envs.games.builtin.BUILTIN_ENVS)
  gymnasium:<EnvId>     a gymnasium env wrapped as a one-agent BaseEnv
  pettingzoo:<module>   a PettingZoo env module's parallel_env (or AEC env), agents -> behaviors by name
                        prefix (ml_arl.envs.adapters.pettingzoo_env); pettingzoo:<module>:<attr> names the constructor
  grid2op:<name>        a Grid2Op power grid (its test data, no download): Operator [+ Opponent] behaviors
                        (ml_arl.envs.adapters.grid2op_env; docs/grid2op.md)
  palaestrai:<run file> the environment of a palaestrAI run file, one behavior per agent (ml_arl.palaestrai)
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

import logging
from typing import Any, Optional

import yaml

from ml_arl.core.env_factory import EnvFactory
from ml_arl.core.exceptions import EnvironmentSourceError
from ml_arl.envs.sources.registry import source_for

logger = logging.getLogger(__name__)

__all__ = ["EnvFactory", "is_python_source", "parse_env_args", "probe_env", "resolve_env", "unity_factory"]


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


def is_python_source(env_path: Optional[str]) -> bool:
    """A Python source (anything but a Unity build or the Editor)."""
    return source_for(env_path).python


def resolve_env(
    env_path: Optional[str], env_args: Optional[list[str]] = None, num_areas: int = 1, probe: bool = True
) -> EnvFactory:
    """Check a Python source exists (import it, look it up) and return its factory. ``probe``
    False (``--check``): nothing is built, not even the trial PettingZoo environment."""
    source = source_for(env_path)
    if not env_path or not source.python:
        raise EnvironmentSourceError(f"--env {env_path}: not a Python environment; Unity builds go through unity_factory")
    kwargs = parse_env_args(env_args)
    _, _, rest = env_path.partition(":")
    return source.factory(env_path, rest, kwargs, num_areas, probe)


def unity_factory(options: Any, seed: int) -> EnvFactory:
    """The factory of a Unity build (``env_settings.env_path``) or of the Editor (no env_path)."""
    from ml_arl.envs.sources.unity_source import factory_from_options

    return factory_from_options(options, seed)


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


