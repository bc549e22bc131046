"""``--env package.module:attr``: a callable of the user's that returns a BaseEnv."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Optional

from ml_arl.core.env_factory import EnvFactory
from ml_arl.core.exceptions import EnvironmentSourceError
from ml_arl.core.import_path import ImportPathError, resolve
from ml_arl.envs.sources.registry import EnvSource

UNITY_EXTENSIONS = (".x86_64", ".x86", ".exe", ".app")


def _accepts(fn: Callable[..., Any], name: str, via_var_keyword: bool = True) -> bool:
    """``fn`` has a parameter ``name`` (or, if ``via_var_keyword``, takes ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or (via_var_keyword and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()))


def claims(env_path: Optional[str]) -> bool:
    if not env_path:
        return False
    kind, sep, _ = env_path.partition(":")
    return bool(sep and kind) and "/" not in kind and "\\" not in kind and not kind.endswith(UNITY_EXTENSIONS)


def factory(env_path: str, rest: str, kwargs: dict[str, Any], num_areas: int, probe: bool) -> EnvFactory:
    try:
        target = resolve(env_path)
    except ImportPathError as err:
        raise EnvironmentSourceError(f"--env {env_path}: {err}") from None
    if not callable(target):
        raise EnvironmentSourceError(f"--env {env_path}: '{rest}' is not callable; it must return a BaseEnv")
    if _accepts(target, "num_areas", via_var_keyword=num_areas != 1):
        kwargs = {**kwargs, "num_areas": num_areas}
    elif num_areas != 1:
        raise EnvironmentSourceError(
            f"env_settings.num_areas: {num_areas}, but {env_path} takes no num_areas argument; "
            "add one to the factory or set num_areas to 1"
        )
    return EnvFactory(env_path, target, kwargs, _accepts(target, "worker_id"), _accepts(target, "seed"))


SOURCE = EnvSource(form="package.module:factory", summary="a callable returning a BaseEnv", order=90, make=factory, claims=claims)
