"""CartPole-v1 for arl-learn that logs every finished episode, for bench/cartpole_vs_sb3.py.

``--env bench.cartpole_probe:make_env --env-args log_dir=DIR``: copy ``k`` (of num_areas) in
worker ``i`` appends one line ``<time.time()> <return>`` per finished episode to
``DIR/worker_<i>_<k>.txt``, flushed at once, after a first line ``<time.time()> start`` written
when the env is built.
"""

from __future__ import annotations

import os
import time
from typing import IO, Any, SupportsFloat

import gymnasium

from ml_arl.envs.adapters.gym_env import GymnasiumEnv, behavior_name_for

ENV_ID = "CartPole-v1"


class EpisodeLog(gymnasium.Wrapper):
    """Sums rewards and writes (time, return) when an episode terminates or is truncated."""

    def __init__(self, env: gymnasium.Env, path: str):
        super().__init__(env)
        self._file: IO[str] = open(path, "a", buffering=1)  # closed in close()
        self._return = 0.0
        self._file.write(f"{time.time():.6f} start\n")
        self._file.flush()

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._return = 0.0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        if terminated or truncated:
            self._file.write(f"{time.time():.6f} {self._return:g}\n")
            self._file.flush()
            self._return = 0.0
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self._file.close()
        super().close()


def make_env(worker_id: int, seed: int, log_dir: str, num_areas: int = 1) -> GymnasiumEnv:
    """What ``gymnasium:CartPole-v1`` builds (make_gymnasium_env), with the episode log inside."""
    envs = [
        EpisodeLog(gymnasium.make(ENV_ID), os.path.join(log_dir, f"worker_{worker_id}_{k}.txt"))
        for k in range(num_areas)
    ]
    return GymnasiumEnv(envs, behavior_name_for(ENV_ID), seed)
