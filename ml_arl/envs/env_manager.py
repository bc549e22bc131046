"""EnvManager: the interface the TrainerController drives, and the restart quotas.

``start()`` builds the environments and returns their behavior specs; ``set_policy()`` hands
new actor weights to the acting side; ``step()`` blocks (with a deadline) until at least one
environment has a ``StepBatch`` ready and returns all that are ready; ``close()`` shuts down.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections import defaultdict, deque
from typing import Any

from mlagents_envs.base_env import BehaviorSpec

from ml_arl.envs.env_runner import PolicyMessage, StepBatch
from ml_arl.exceptions import RestartQuotaExceeded, WorkerError
from ml_arl.settings import EnvSettings

logger = logging.getLogger(__name__)


class RestartQuota:
    """ML-Agents' rules: at most ``max_lifetime`` restarts per worker (-1 = unlimited) and at most
    ``rate_n`` within any ``period_s`` seconds (-1 = no rate limit)."""

    def __init__(self, max_lifetime: int, rate_n: int, period_s: float):
        self.max_lifetime = max_lifetime
        self.rate_n = rate_n
        self.period_s = period_s
        self.counts: dict[int, int] = defaultdict(int)
        self.times: dict[int, deque[float]] = defaultdict(deque)

    def allows(self, worker_id: int, now: float) -> bool:
        if self.max_lifetime != -1 and self.counts[worker_id] >= self.max_lifetime:
            return False
        if self.rate_n == -1:
            return True
        recent = self.times[worker_id]
        while recent and now - recent[0] >= self.period_s:
            recent.popleft()
        return len(recent) < self.rate_n

    def record(self, worker_id: int, now: float) -> int:
        self.counts[worker_id] += 1
        self.times[worker_id].append(now)
        return self.counts[worker_id]


class EnvManager(ABC):
    def __init__(self, settings: EnvSettings):
        self.settings = settings
        self.quota = RestartQuota(
            settings.max_lifetime_restarts, settings.restarts_rate_limit_n, settings.restarts_rate_limit_period_s
        )
        self.policies: dict[str, PolicyMessage] = {}
        self.policy_serials: dict[str, int] = {}  # bumped on every set_policy: what a worker has is compared to it

    @property
    @abstractmethod
    def num_workers(self) -> int: ...

    def launch(self) -> None:  # noqa: B027 - optional hook; managers with nothing to launch keep it
        """Begin starting the environments without waiting for them (optional)."""

    @abstractmethod
    def start(self) -> dict[str, BehaviorSpec]:
        """Environments ready (launching them if needed); their behavior specs."""

    @abstractmethod
    def step(self) -> list[StepBatch]: ...

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def reset(self) -> None:
        """Reset every environment; every half-built trajectory is discarded."""

    def set_policy(self, behavior: str, msg: PolicyMessage) -> None:
        self.policies[behavior] = msg
        self.policy_serials[behavior] = self.policy_serials.get(behavior, 0) + 1

    @abstractmethod
    def set_environment_parameters(self, params: dict[str, Any]) -> None:
        """Give every environment new parameters and reset it (a phase switch); the steps in
        flight are finished and half-built trajectories discarded."""

    def handle_failure(self, failure: WorkerError) -> None:
        """Restart the failed worker if the failure is restartable and quota is left; else raise.
        A restarted worker that fails again while starting counts as a further restart."""
        while True:
            wid = failure.worker_id
            if not failure.restartable:
                raise failure
            now = time.monotonic()
            if not self.quota.allows(wid, now):
                raise RestartQuotaExceeded(
                    f"Worker {wid} exceeded the allowed number of restarts ({self.quota.counts[wid]} so far; "
                    f"max_lifetime_restarts={self.quota.max_lifetime}, restarts_rate_limit_n={self.quota.rate_n} "
                    f"per {self.quota.period_s} s); last failure: {failure}"
                ) from failure
            count = self.quota.record(wid, now)
            limit = "unlimited" if self.quota.max_lifetime == -1 else str(self.quota.max_lifetime)
            logger.warning("Restarting worker[%d] after '%s' (restart %d of %s)", wid, failure, count, limit)
            try:
                self.restart_worker(wid)
                return
            except WorkerError as again:
                if again.worker_id != wid:
                    raise
                failure = again

    @abstractmethod
    def restart_worker(self, worker_id: int) -> None: ...
