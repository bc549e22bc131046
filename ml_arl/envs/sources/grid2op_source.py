"""``--env grid2op:<name>``: a Grid2Op power grid (ml_arl.envs.adapters.grid2op_env): the extra, the
name and the options checked, the environment built once, and what the workers' factory is made of."""

from __future__ import annotations

import os
import warnings
from typing import Any

from ml_arl.core.env_factory import EnvFactory
from ml_arl.core.exceptions import EnvironmentSourceError
from ml_arl.envs.adapters.grid2op_env import INSTALL_HINT, check_options, import_grid2op
from ml_arl.envs.sources.registry import EnvSource


def available_names() -> list[str]:
    """The Grid2Op environments that need no download (grid2op's test data)."""
    grid2op = import_grid2op()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sorted(grid2op.list_available_test_env())


def grid2op_source(
    env_path: str, name: str, kwargs: dict[str, Any], num_areas: int, probe: bool = True
) -> tuple[Any, dict[str, Any]]:
    """``--env grid2op:<name>``: checks the extra, the name, the options (``probe``: by building
    the environment once here) and returns the builder and its keyword arguments; EnvironmentSourceError in one line."""
    try:
        import_grid2op()
    except ImportError:
        raise EnvironmentSourceError(f"--env {env_path}: Grid2Op is not installed; {INSTALL_HINT}") from None
    if num_areas != 1:
        raise EnvironmentSourceError(
            f"env_settings.num_areas: {num_areas}, but Grid2Op environments have one area; set num_areas to 1 "
            "(num_envs runs more copies)")
    try:
        check_options(kwargs)
    except ValueError as err:
        raise EnvironmentSourceError(f"--env {env_path}: {err}; check --env-args") from None
    if not name or (name not in available_names() and not os.path.isdir(name)):
        raise EnvironmentSourceError(
            f"--env {env_path}: no Grid2Op environment {name!r} available offline; available: "
            f"{', '.join(available_names())} (or the folder of a downloaded one)")
    from ml_arl.envs.adapters.grid2op_env.adapter import make_grid2op_env

    try:
        if probe:
            make_grid2op_env(name, seed=0, **kwargs).close()
    except Exception as err:  # grid2op's own complaint (a line name, a dataset folder), said in one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise EnvironmentSourceError(f"--env {env_path}: {type(err).__name__}: {first}; check --env-args") from None
    return make_grid2op_env, {"name": name, **kwargs}


def factory(env_path: str, rest: str, kwargs: dict[str, Any], num_areas: int, probe: bool) -> EnvFactory:
    build, build_kwargs = grid2op_source(env_path, rest, kwargs, num_areas, probe)
    return EnvFactory(env_path, build, build_kwargs)


SOURCE = EnvSource(prefix="grid2op", form="grid2op:<name>", summary="a Grid2Op power grid, no download", order=13, make=factory)
