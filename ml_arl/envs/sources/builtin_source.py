"""``--env builtin:<Name>``: a built-in environment (ml_arl.envs.games)."""

from __future__ import annotations

from typing import Any

from ml_arl.core.env_factory import EnvFactory
from ml_arl.core.exceptions import EnvironmentSourceError
from ml_arl.envs.sources.registry import EnvSource


def factory(env_path: str, rest: str, kwargs: dict[str, Any], num_areas: int, probe: bool) -> EnvFactory:
    from ml_arl.envs.games.builtin import BUILTIN_ENVS

    if rest not in BUILTIN_ENVS:
        raise EnvironmentSourceError(
            f"--env {env_path}: no built-in environment '{rest}'; available: {', '.join(sorted(BUILTIN_ENVS))}"
        )
    return EnvFactory(env_path, BUILTIN_ENVS[rest], {**kwargs, "num_areas": num_areas})


SOURCE = EnvSource(prefix="builtin", form="builtin:<Name>", summary="a built-in environment", make=factory)
