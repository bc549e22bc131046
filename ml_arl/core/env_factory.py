"""``EnvFactory``: what builds a worker's environment. ``ml_arl.envs.sources`` makes one from an
``--env`` value in the main process; it travels to the worker with cloudpickle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mlagents_envs.base_env import BaseEnv


@dataclass
class EnvFactory:
    """Builds the environment of worker ``worker_id``; picklable with cloudpickle."""

    description: str
    build: Callable[..., BaseEnv]
    kwargs: dict[str, Any] = field(default_factory=dict)
    pass_worker_id: bool = False
    pass_seed: bool = True
    # modules every worker imports that the fork server may import once, before it forks them, so
    # that the workers share them (memory) and boot sooner: packages that start no thread on import
    preload: tuple[str, ...] = ()

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
