"""gymnasium CartPole-v1 that ends the run once it is solved, for tests/integration/test_learning.py.

``--env tests.support.solved_envs:cartpole`` with ``env_settings.manager: inprocess`` builds the same
environment as ``gymnasium:CartPole-v1`` (``num_areas`` copies as agents of behavior
"CartPole") and records every finished episode's return in ``TRACKER``. Once the mean of the
last ``TRACKER.window`` returns reaches ``TRACKER.threshold``, worker 0's environment raises
KeyboardInterrupt: the trainer controller takes it as a user's Ctrl-C, saves and returns
normally, so the test does not train on to max_steps after CartPole is solved.

The interrupt must not drop episodes the tracker counted: an EnvRunner sees an episode end in
``get_steps`` and hands it over with its batch only when ``run()`` returns (after asking for
``take_environment_stats``), and the in-process manager runs the workers in order. So a return
is counted when the runner saw it end and handed over in the order the controller receives it,
and the interrupt comes at the very start of worker 0's next ``run()``, when every counted
episode has reached the controller. Should that order ever change, the run just stops later
(or sooner): the test asserts the threshold on what the controller recorded, not on this count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import gymnasium
from mlagents_envs.base_env import DecisionSteps, TerminalSteps

from ml_arl.envs.adapters.gym_env import GymnasiumEnv


class SolvedTracker:
    def __init__(self, window: int = 20, threshold: float = 475.0):
        self.window, self.threshold = window, threshold
        self.returns: list[float] = []  # handed over to the controller, in order
        self.stopped_at: Optional[int] = None  # episodes counted when the run was interrupted

    def reset(self) -> None:
        self.returns, self.stopped_at = [], None

    @property
    def solved(self) -> bool:
        last = self.returns[-self.window :]
        return len(last) == self.window and sum(last) / self.window >= self.threshold


TRACKER = SolvedTracker()


class _Returns(gymnasium.Wrapper):
    """Sums the rewards of the running episode; ``last`` is the return of the last one that ended."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self.total, self.last = 0.0, 0.0

    def reset(self, **kwargs: Any) -> Any:
        self.total = 0.0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.total += float(reward)
        if terminated or truncated:
            self.last = self.total
        return obs, reward, terminated, truncated, info


class SolvedCartPole(GymnasiumEnv):
    def __init__(self, envs: Sequence[_Returns], worker_id: int, seed: Optional[int]):
        super().__init__(envs, "CartPole", seed)
        self.copies = list(envs)
        self.worker_id = worker_id
        self.fresh = False  # stepped since the runner last looked
        self.seen: list[float] = []  # episodes the runner saw end: they go out with its next batch
        self.run_starts = True

    def step(self) -> None:
        super().step()
        self.fresh = True

    def get_steps(self, behavior_name: str) -> tuple[DecisionSteps, TerminalSteps]:
        if self.run_starts:
            self.run_starts = False
            if self.worker_id == 0 and TRACKER.solved:
                TRACKER.stopped_at = len(TRACKER.returns)
                raise KeyboardInterrupt  # solved: stop as Ctrl-C does
        decision, terminal = super().get_steps(behavior_name)
        if self.fresh:
            self.fresh = False
            self.seen += [self.copies[int(agent)].last for agent in terminal.agent_id]
        return decision, terminal

    def take_environment_stats(self) -> dict[str, Any]:
        """Asked once at the end of every EnvRunner.run: the batch with ``seen`` is handed over."""
        TRACKER.returns += self.seen
        self.seen = []
        self.run_starts = True
        return {}


def cartpole(worker_id: int, seed: Optional[int] = None, num_areas: int = 1) -> SolvedCartPole:
    return SolvedCartPole([_Returns(gymnasium.make("CartPole-v1")) for _ in range(num_areas)], worker_id, seed)
