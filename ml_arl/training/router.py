"""The run's one router between the env manager and the trainers.

Out of the environments: ``route(batch)`` takes a worker's ``StepBatch`` and sends each part where
it goes. Trajectories go to their brain's trajectory queue (not those of a frozen brain, nor a
self-play opponent's), to the store when it records every step, and to ``--record-demo``. Finished
episodes go to the brain's summaries, the store, the curriculum, the phase's counters, self-play's
games and the callbacks. Entropy, acted steps and the stats side channel go to the summaries and
the counters.

Back to the environments: ``collect_policies(brain)`` takes the newest policy a trainer
published, and ``push(brain)`` builds the ``PolicyMessage`` each of the brain's behavior ids acts
with (built by ``ml_arl.training.policy_message``) and hands it to the env manager, which sends
it with the next step request.

Self-play is one collaborator, asked through ``ml_arl.training.selfplay.SelfPlay``'s interface:
does a team learn now, which snapshot does it act with, and what a played game or a number of
acted steps changes.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Optional

from ml_arl.core.actor_weights import PolicySnapshot
from ml_arl.core.experience import EnvStatAggregation, EpisodeStat, StepBatch, Trajectory
from ml_arl.envs.backends.env_manager import EnvManager
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import RunOptions
from ml_arl.trainers.queues import AgentManagerQueue
from ml_arl.trainers.trainer import Trainer
from ml_arl.training.policy_message import fixed_policy_snapshot, policy_message
from ml_arl.training.selfplay import SelfPlay

if TYPE_CHECKING:
    from ml_arl.training.brains import Brains
    from ml_arl.training.callbacks import CallbackList
    from ml_arl.training.curriculum import Curriculum
    from ml_arl.training.demo_recording import DemoRecorder
    from ml_arl.training.phases import PhaseSchedule
    from ml_arl.training.run_outputs import RunOutputs
    from ml_arl.training.threads import TrainerThreads

_AGGREGATIONS = {EnvStatAggregation.AVERAGE: "average", EnvStatAggregation.SUM: "sum", EnvStatAggregation.HISTOGRAM: "histogram"}


class AgentManager:
    """The main-process end of one brain: its trajectories to the trainer's queue, its episodes
    and environment stats to its StatsReporter. The worker side, which builds the trajectories,
    is ml_arl.acting.agent_processor."""

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


class Router:
    def __init__(self, options: RunOptions, env_manager: EnvManager, brains: Brains, schedule: PhaseSchedule,
                 outputs: RunOutputs, selfplay: SelfPlay, threads: TrainerThreads, callbacks: CallbackList,
                 demos: Optional[DemoRecorder], curriculum: Curriculum):
        self.env_manager = env_manager
        self.brains, self.schedule, self.outputs, self.selfplay = brains, schedule, outputs, selfplay
        self.threads, self.callbacks, self.demos = threads, callbacks, demos
        self.curriculum = curriculum  # the controller hands each phase's own
        self.train_model = not options.checkpoint_settings.inference
        self.record_steps = options.results_store.record_steps
        self.record_demo = options.checkpoint_settings.record_demo is not None
        self.managers: dict[str, AgentManager] = {}
        self.live: dict[str, PolicySnapshot] = {}  # brain -> the newest policy its trainer published

    # ------------------------------------------------------------------ a new brain
    def add_brain(self, trainer: Trainer, stats: StatsReporter) -> None:
        """The queues between the router and a new trainer, and its first policy."""
        brain = trainer.behavior
        manager = AgentManager(brain, stats, trainer.settings.threaded and self.threads.allowed, self.threads.stop_event)
        trainer.subscribe_trajectory_queue(manager.trajectory_queue)
        trainer.publish_policy_queue(manager.policy_queue)
        self.managers[brain] = manager
        self.live[brain] = trainer.policy_snapshot()

    # ------------------------------------------------------------------ out of the environments
    def route(self, batch: StepBatch) -> None:
        """Every part of one worker's StepBatch to where it goes (its new behaviors are known by now)."""
        self.outputs.steps_arrived()
        self.outputs.env_steps.total += batch.env_steps
        self._trajectories(batch)
        for ep in batch.episodes:
            self._episode(ep, batch.worker_id)
        swaps: set[str] = set()
        brain_of = self.brains.brain_of
        for behavior, (total, count) in batch.entropy.items():
            brain = brain_of[behavior]
            self.managers[brain].record_entropy(total, count)
            self.schedule.count_acted(brain, count)
            if self.selfplay.acted(brain, behavior, count):
                swaps.add(brain)
        for brain in swaps:
            self.push(brain)  # the brain's opponents changed
        if batch.env_stats:
            for manager in self.managers.values():
                manager.record_environment_stats(batch.env_stats, batch.worker_id)

    def _trajectories(self, batch: StepBatch) -> None:
        by_brain: dict[str, list[Trajectory]] = {}
        record_steps, trainers = self.outputs.records_steps, self.brains.trainers
        for traj in batch.trajectories:
            brain = self.brains.brain_of[traj.behavior]
            if self.demos is not None:
                self.demos.record(traj, trainers[brain].spec)
            if record_steps:
                self.outputs.record_steps(self.schedule.name, brain, traj, batch.worker_id)
            if self.train_model and (not trainers[brain].learning or not self.selfplay.is_learning(brain, traj.behavior)):
                continue  # frozen in this phase, or a self-play opponent: acted, not learned from
            by_brain.setdefault(brain, []).append(traj)
        for brain, trajectories in by_brain.items():
            self.managers[brain].add_trajectories(trajectories, self.threads.check)

    def _episode(self, ep: EpisodeStat, worker_id: int) -> None:
        brain, schedule = self.brains.brain_of[ep.behavior], self.schedule
        if not self.selfplay.is_learning(brain, ep.behavior):
            return  # a snapshot played it: not this brain's episode (nor in TensorBoard, nor in the store)
        phase = schedule.phase
        if phase is not None and phase.episodes is not None and schedule.episodes.get(brain, 0) >= phase.episodes:
            return  # the phase has its episodes: one that ended after them (workers step ahead) is not the phase's
        self.managers[brain].record_episodes([ep])
        self.curriculum.record_episode(brain, ep.reward)
        number = schedule.count_episode(brain, ep.objective, ep.length)
        self.selfplay.episode_ended(brain, ep)
        played = schedule.phase.plays(brain) if schedule.phase is not None else None
        self.outputs.record_episode(
            schedule.name, schedule.mode, brain, ep, worker_id, number, self.selfplay.elo(brain),
            played.name if played is not None else None,
        )
        if self.callbacks.callbacks:
            self.callbacks.episode(brain, ep)

    # ------------------------------------------------------------------ back to the environments
    def collect_policies(self, brain: str, trainer: Trainer) -> None:
        """The newest policy the brain's trainer published, if any, on its way to the workers."""
        newest = self.managers[brain].policy_queue.drain()
        if newest:
            self.live[brain] = newest[-1]
            self.selfplay.policy_published(brain, newest[-1])
            self.push(brain)
        self.selfplay.trainer_stepped(brain, trainer)

    def push(self, brain: str) -> None:
        """Send the brain's policy to every behavior id it acts for: the live policy (or the fixed
        policy that plays it in this phase), or for a self-play team that does not learn now, the
        opponent snapshot drawn for it."""
        trainer, phase = self.brains.trainers[brain], self.schedule.phase
        live = self.live[brain]
        policy = phase.plays(brain) if phase is not None else None
        if policy is not None:  # a fixed policy plays the behavior in this phase (ml_arl.rules)
            live = fixed_policy_snapshot(policy.name, policy.params, brain, trainer.spec, trainer.policy_version)
        for behavior_id in self.brains.behavior_ids[brain]:
            snapshot = self.selfplay.snapshot_for(brain, behavior_id, live)
            if snapshot is None:
                continue
            learning_team = self.selfplay.is_learning(brain, behavior_id)
            # trajectories are built for a team that learns, with --inference (what was acted is
            # counted), when the store records every step and with --record-demo (a frozen brain's
            # episodes too); never for a self-play opponent
            collect = learning_team and (trainer.learning or not self.train_model or self.record_steps or self.record_demo)
            self.env_manager.set_policy(behavior_id, policy_message(snapshot, trainer.settings, phase, collect))
