"""Turn an ``--env`` value into a factory that builds a BaseEnv inside a worker.

Accepted forms:
  builtin:<Name>        a built-in env (ml_arl.envs.builtin.BUILTIN_ENVS)
  gymnasium:<EnvId>     a gymnasium env wrapped as a one-agent BaseEnv
  package.module:attr   a callable returning a BaseEnv

``--env-args key=value ...`` become keyword arguments (values read as YAML scalars). A user
callable receives ``worker_id`` and ``seed`` too when its signature names them (or takes
``**kwargs``), and ``num_areas`` when it names it (or takes ``**kwargs`` and num_areas is not 1).
``env_settings.num_areas`` (ML-Agents' training areas per instance) multiplies the agents of a
built-in env, builds that many copies of a gymnasium env (as agents of one behavior), and is
passed to a user callable, which must then accept it.
Factories travel to worker processes with cloudpickle, so lambdas and closures work.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

import yaml
from mlagents_envs.base_env import BaseEnv

from ml_arl.exceptions import EnvironmentSourceError


def parse_env_args(env_args: Optional[list[str]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in env_args or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise EnvironmentSourceError(
                f"--env-args: {item!r} is not key=value; Python environments take arguments as key=value"
            )
        out[key.lstrip("-")] = yaml.safe_load(value)
    return out


@dataclass
class EnvFactory:
    """Builds the environment of worker ``worker_id``; picklable with cloudpickle."""

    description: str
    build: Callable[..., BaseEnv]
    kwargs: dict[str, Any] = field(default_factory=dict)
    pass_worker_id: bool = False
    pass_seed: bool = True

    def __call__(self, worker_id: int, seed: int) -> BaseEnv:
        kwargs = dict(self.kwargs)
        if self.pass_worker_id:
            kwargs["worker_id"] = worker_id
        if self.pass_seed:
            kwargs["seed"] = seed
        env = self.build(**kwargs)
        if not isinstance(env, BaseEnv):
            raise TypeError(
                f"{self.description} returned {type(env).__name__}, expected an mlagents_envs.base_env.BaseEnv"
            )
        return env


def _accepts(fn: Callable[..., Any], name: str, via_var_keyword: bool = True) -> bool:
    """``fn`` has a parameter ``name`` (or, if ``via_var_keyword``, takes ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or (via_var_keyword and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()))


def resolve_env(env_path: Optional[str], env_args: Optional[list[str]] = None, num_areas: int = 1) -> EnvFactory:
    """Check the source exists (import it, look it up) and return its factory."""
    if not env_path:
        raise EnvironmentSourceError(
            "no environment given: set env_settings.env_path in the config or pass --env "
            "(builtin:Reach, gymnasium:CartPole-v1 or package.module:factory)"
        )
    kwargs = parse_env_args(env_args)
    kind, sep, name = env_path.partition(":")
    if sep and kind == "builtin":
        from ml_arl.envs.builtin import BUILTIN_ENVS

        if name not in BUILTIN_ENVS:
            raise EnvironmentSourceError(
                f"--env {env_path}: no built-in environment '{name}'; available: {', '.join(sorted(BUILTIN_ENVS))}"
            )
        return EnvFactory(env_path, BUILTIN_ENVS[name], {**kwargs, "num_areas": num_areas})
    if sep and kind == "gymnasium":
        import gymnasium

        from ml_arl.envs.gym_env import make_gymnasium_env

        if name not in gymnasium.registry:
            raise EnvironmentSourceError(f"--env {env_path}: gymnasium has no environment id '{name}'")
        return EnvFactory(env_path, make_gymnasium_env, {"env_id": name, "num_areas": num_areas, **kwargs})
    if sep and "/" not in kind and not kind.endswith((".x86_64", ".exe", ".app")):
        try:
            module = importlib.import_module(kind)
        except ImportError as err:
            raise EnvironmentSourceError(f"--env {env_path}: cannot import module '{kind}': {err}") from None
        target: Any = module
        for part in name.split("."):
            if not hasattr(target, part):
                raise EnvironmentSourceError(f"--env {env_path}: module '{kind}' has no attribute '{name}'")
            target = getattr(target, part)
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
    raise EnvironmentSourceError(
        f"--env {env_path}: Unity executables are not supported yet; use builtin:<Name>, "
        "gymnasium:<EnvId> or package.module:factory"
    )
