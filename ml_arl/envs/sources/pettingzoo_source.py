"""``--env pettingzoo:<module>[:<attr>]``: a PettingZoo environment, its agents as behaviors by
name (ml_arl.envs.adapters.pettingzoo_env)."""

from __future__ import annotations

from typing import Any

from ml_arl.core.env_factory import EnvFactory
from ml_arl.core.exceptions import EnvironmentSourceError
from ml_arl.envs.sources.registry import EnvSource


def factory(env_path: str, target: str, kwargs: dict[str, Any], num_areas: int, probe: bool) -> EnvFactory:
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


SOURCE = EnvSource(prefix="pettingzoo", form="pettingzoo:<module>[:<attr>]", summary="a PettingZoo environment module", order=12, make=factory)
