"""``EvalCallback``: a callback (ml_arl.training.callbacks) that plays evaluation episodes with a
behavior's newest policy as training goes (``ml_arl.api.inference.evaluate``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Optional

from ml_arl.core.experience import EpisodeStat
from ml_arl.training.callbacks import Callback

logger = logging.getLogger(__name__)


class EvalCallback(Callback):
    """Every ``every`` trainer steps of ``behavior``, play ``episodes`` episodes with its newest
    policy, deterministic, on a fresh environment (``env``: anything ``--env`` takes; default the
    run's own ``env_settings.env_path``), and write their mean return to TensorBoard as "Eval/Mean
    Return" with the behavior's next summary. ``results`` holds (step, mean return) pairs. It is
    checked as episodes end, in the main loop, which waits for it (a threaded trainer goes on)."""

    def __init__(self, behavior: str, every: int, episodes: int = 5, env: Optional[str] = None,
                 env_args: Optional[Sequence[str]] = None, seed: int = 12345, max_steps: int = 100_000):
        if every < 1 or episodes < 1:
            raise ValueError("EvalCallback: every and episodes must be at least 1")
        self.behavior, self.every, self.episodes = behavior, int(every), int(episodes)
        self.env, self.env_args, self.seed, self.max_steps = env, list(env_args or []), seed, max_steps
        self.run: Optional[Any] = None
        self._next = self.every
        self.results: list[tuple[int, float]] = []

    def on_start(self, run: Any) -> None:
        self.run = run
        if self.env is None:
            self.env = run.options.env_settings.env_path
            self.env_args = list(run.options.env_settings.env_args or [])

    def on_episode(self, behavior: str, episode: EpisodeStat) -> None:
        if behavior != self.behavior or self.run is None:
            return
        step = self.run.steps.get(behavior, 0)
        if step < self._next:
            return
        self._next = (step // self.every + 1) * self.every
        self.evaluate(step)

    def evaluate(self, step: int) -> float:
        assert self.run is not None and self.env is not None
        from ml_arl.api.inference import evaluate

        policy = self.run.policy(self.behavior, deterministic=True)
        returns = evaluate(policy, self.env, self.episodes, env_args=self.env_args, seed=self.seed,
                           max_steps=self.max_steps)
        mean = sum(returns) / len(returns)
        self.results.append((step, mean))
        self.run.add_stat(self.behavior, "Eval/Mean Return", mean)
        logger.info("%s: evaluation at step %d: mean return %.3f over %d episodes", self.behavior, step, mean,
                    len(returns))
        return mean
