"""A gymnasium task for arl-learn that logs every finished episode with a timestamp, and the reader of
those logs: how bench/peers/cartpole_vs_sb3.py and bench/peers/sac_vs_sb3.py see, while arl-learn
runs, the moment its episodes reach a mean return. (It replaces bench/cartpole_probe.py and
bench/pendulum_probe.py, which differed only in the task and the length column.)

``--env bench.common.episode_log:make_env --env-args env_id=CartPole-v1 log_dir=DIR``: copy ``k`` (of
num_areas) in worker ``i`` appends one line ``<time.time()> <return> <length>`` per finished episode to
``DIR/worker_<i>_<k>.txt``, flushed at once, after a first line ``<time.time()> start`` written when
the env is built. arl-learn must be able to import ``bench``: start it from the repository root with
the root on PYTHONPATH.
"""

from __future__ import annotations

import os
import time
from typing import IO, Any, SupportsFloat

import gymnasium

from ml_arl.envs.adapters.gym_env import GymnasiumEnv, behavior_name_for


class EpisodeLog(gymnasium.Wrapper):
    """Sums rewards and steps, and writes (time, return, length) when an episode terminates or is truncated."""

    def __init__(self, env: gymnasium.Env, path: str):
        super().__init__(env)
        self._file: IO[str] = open(path, "a", buffering=1)  # closed in close()
        self._return = 0.0
        self._length = 0
        self._file.write(f"{time.time():.6f} start\n")
        self._file.flush()

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._return = 0.0
        self._length = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        self._length += 1
        if terminated or truncated:
            self._file.write(f"{time.time():.6f} {self._return:.6g} {self._length}\n")
            self._file.flush()
            self._return = 0.0
            self._length = 0
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self._file.close()
        super().close()


def make_env(worker_id: int, seed: int, env_id: str, log_dir: str, num_areas: int = 1) -> GymnasiumEnv:
    """What ``gymnasium:<env_id>`` builds (make_gymnasium_env), with the episode log inside."""
    envs = [
        EpisodeLog(gymnasium.make(env_id), os.path.join(log_dir, f"worker_{worker_id}_{k}.txt"))
        for k in range(num_areas)
    ]
    return GymnasiumEnv(envs, behavior_name_for(env_id), seed)


class EpisodeFiles:
    """Reads the per-worker logs of a log folder incrementally; only whole lines are consumed."""

    def __init__(self, log_dir: str):
        self.log_dir = log_dir
        self.offsets: dict[str, int] = {}
        self.episodes: list[tuple[float, float, int]] = []  # (time, return, length)
        self.starts: list[float] = []  # when each env copy was built

    def update(self) -> None:
        for name in sorted(os.listdir(self.log_dir)):
            path = os.path.join(self.log_dir, name)
            with open(path, "rb") as f:
                f.seek(self.offsets.get(name, 0))
                chunk = f.read()
            end = chunk.rfind(b"\n") + 1
            self.offsets[name] = self.offsets.get(name, 0) + end
            for line in chunk[:end].decode().splitlines():
                fields = line.split()
                if fields[1] == "start":
                    self.starts.append(float(fields[0]))
                else:
                    self.episodes.append((float(fields[0]), float(fields[1]), int(fields[2])))
