"""``--env gymnasium:<EnvId>``: a gymnasium environment as a one-agent BaseEnv (ml_arl.envs.adapters.gym_env)."""

from __future__ import annotations

from typing import Any

from ml_arl.core.env_factory import EnvFactory
from ml_arl.core.exceptions import EnvironmentSourceError
from ml_arl.envs.sources.registry import EnvSource


def factory(env_path: str, rest: str, kwargs: dict[str, Any], num_areas: int, probe: bool) -> EnvFactory:
    import gymnasium

    from ml_arl.envs.adapters.gym_env import make_gymnasium_env

    if rest not in gymnasium.registry:
        raise EnvironmentSourceError(f"--env {env_path}: gymnasium has no environment id '{rest}'")
    return EnvFactory(env_path, make_gymnasium_env, {"env_id": rest, "num_areas": num_areas, **kwargs})


SOURCE = EnvSource(prefix="gymnasium", form="gymnasium:<EnvId>", summary="a gymnasium environment id", order=11, make=factory)
