"""The main-process end of one behavior: its trajectories to the trainer's queue, its episodes
and environment stats to the behavior's StatsReporter. The worker side, which builds the
trajectories, is ml_arl.acting.agent_processor."""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable

from ml_arl.core.actor_weights import PolicySnapshot
from ml_arl.core.experience import EnvStatAggregation, EpisodeStat, Trajectory
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.trainers.queues import AgentManagerQueue

_AGGREGATIONS = {EnvStatAggregation.AVERAGE: "average", EnvStatAggregation.SUM: "sum", EnvStatAggregation.HISTOGRAM: "histogram"}


class AgentManager:
    """Main-process end of one behavior: routes its trajectories and episode stats to the trainer."""

    def __init__(self, behavior: str, stats: StatsReporter, threaded: bool, stop_event: threading.Event):
        self.behavior = behavior
        self.stats = stats
        self.threaded = threaded
        self.stop_event = stop_event
        self.trajectory_queue: AgentManagerQueue[Trajectory] = AgentManagerQueue(behavior, 20 if threaded else 0)
        self.policy_queue: AgentManagerQueue[PolicySnapshot] = AgentManagerQueue(behavior)
        self.recent_rewards: deque[float] = deque(maxlen=100)  # last episode returns, newest last

    def add_trajectories(self, trajectories: list[Trajectory], check_alive: Callable[[], None]) -> None:
        for traj in trajectories:
            while True:
                try:
                    self.trajectory_queue.put(traj, timeout=0.5)
                    break
                except queue.Full:
                    check_alive()  # raises if the trainer thread died; otherwise keep waiting
                    if self.stop_event.is_set():
                        return

    def record_episodes(self, episodes: list[EpisodeStat]) -> None:
        for ep in episodes:
            self.stats.add_stat("Environment/Cumulative Reward", ep.reward, "histogram")
            self.stats.add_stat("Objective/Cumulative Objective", ep.objective)
            self.stats.add_stat("Environment/Episode Length", float(ep.length))
            self.stats.add_stat("Environment/Episode Count", 1.0, "sum")
            self.stats.add_episode_reward(ep.reward)
            self.recent_rewards.append(ep.reward)

    def record_environment_stats(self, env_stats: dict[str, list[tuple[float, EnvStatAggregation]]], worker_id: int) -> None:
        """The stats side channel, as ML-Agents: averaged, summed or histogrammed over the summary
        period; MOST_RECENT only from worker 0, so that workers do not overwrite each other."""
        for key, values in env_stats.items():
            for value, aggregation in values:
                if aggregation == EnvStatAggregation.MOST_RECENT:
                    if worker_id == 0:
                        self.stats.set_stat(key, value)
                else:
                    self.stats.add_stat(key, value, _AGGREGATIONS.get(aggregation, "average"))

    def record_entropy(self, total: float, count: int) -> None:
        if count:
            self.stats.add_stat("Policy/Entropy", total / count)
