"""A behavior's reward streams: one per configured reward signal (extrinsic, curiosity, GAIL,
RND), each with its gamma, strength and value head, as ML-Agents keeps them.

The extrinsic stream is the behavior's objective (the environment reward unless an objective
changes it); the others come from the reward providers of ``ml_arl.trainers.reward_signals``,
which score experience on the trainer side (workers stay unchanged). Each stream's rewards are
summed per episode and reported as ``Policy/<Signal> Reward`` when the episode ends, as
ML-Agents does (an episode an environment reset cut off is forgotten when the agent's next one
starts: ``Trajectory.episode_start``). Providers see continuous actions as the environment received them, so GAIL
compares the policy with demonstrations on equal terms.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, Optional, Union

import numpy as np
import torch
from mlagents_envs.base_env import BehaviorSpec

from ml_arl.core.behavior_id import brain_name
from ml_arl.core.exceptions import ConfigError
from ml_arl.core.experience import Trajectory
from ml_arl.demonstrations import Demonstrations, load_demonstrations
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import TrainerSettings
from ml_arl.trainers.optimizers import Adam
from ml_arl.trainers.return_scale import ReturnScaler
from ml_arl.trainers.reward_signals import LearnerSync, RewardProvider, SignalBatch, make_reward_providers

Actions = Callable[[np.ndarray], np.ndarray]
CPU = torch.device("cpu")


def expert_batch(demo: Demonstrations) -> SignalBatch:
    """Demonstrations as a batch for GAIL (and behavioral cloning)."""
    return SignalBatch.from_arrays(demo.obs, demo.continuous, demo.discrete, demo.dones.astype(np.float32), demo.next_obs, demo.rewards)


class RewardStreams:
    def __init__(
        self, behavior: str, settings: TrainerSettings, spec: BehaviorSpec, env_actions: Actions,
        device: torch.device = CPU,
    ):
        signals = settings.reward_signals.items()
        self.device = device
        brain = brain_name(behavior)
        self.env_actions = env_actions  # stored continuous actions -> what the env received
        expert = None
        if settings.reward_signals.gail is not None:
            where = f"behaviors.{brain}.reward_signals.gail.demo_path"
            expert = expert_batch(load_demonstrations(settings.reward_signals.gail.demo_path, where)).to(device)
        try:
            self.providers: dict[str, RewardProvider] = make_reward_providers(settings.reward_signals, spec, expert)
        except ValueError as err:
            raise ConfigError([f"behaviors.{brain}.{err}"]) from None
        for provider in self.providers.values():  # on the trainer's device; no step taken yet, so a fresh Adam there
            provider.to(device)
            if provider.optimizer is not None:
                provider.optimizer = Adam(provider.optimizer.params, lr=provider.optimizer.lr)
        self.names = tuple(name for name, _ in signals)
        self.learned = {name: p for name, p in self.providers.items() if name != "extrinsic"}
        self.tags = tuple(self.providers[name].display_name for name in self.names)
        self.gammas = tuple(float(s.gamma) for _, s in signals)
        self.strengths = np.array([s.strength for _, s in signals], np.float32)
        self.ignore_done = tuple(self.providers[name].ignore_done for name in self.names)
        # stream index -> its reward normaliser (reward_signals.<name>.normalize)
        self.scalers = {k: ReturnScaler(s.gamma) for k, (_, s) in enumerate(signals) if s.normalize}
        self._episode_sums: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(len(self.names), np.float64))

    def batch(self, traj: Trajectory) -> SignalBatch:
        """A trajectory as the providers read it."""
        return self.batch_of([traj])

    def batch_of(self, trajs: list[Trajectory]) -> SignalBatch:
        """Trajectories, in order, as one batch the providers read (a trainer's buffer): the
        step after each, the done flag on a trajectory's last step when its episode truly ended,
        continuous actions as the environment received them."""
        dones = np.concatenate([np.eye(1, len(t), len(t) - 1, dtype=np.float32)[0] * float(t.done and not t.interrupted) for t in trajs])
        n_obs = len(trajs[0].obs)
        obs = [np.concatenate([t.obs[k] for t in trajs]) for k in range(n_obs)]
        next_obs = [np.concatenate([np.concatenate([t.obs[k][1:], np.asarray(t.next_obs[k])[None]]) for t in trajs]) for k in range(n_obs)]
        continuous = self.env_actions(np.concatenate([t.continuous for t in trajs]))
        discrete = np.concatenate([t.discrete for t in trajs])
        rewards = np.concatenate([np.asarray(t.rewards, np.float32) for t in trajs])
        return SignalBatch.from_arrays(obs, continuous, discrete, dones, next_obs, rewards).to(self.device)

    def rewards(self, traj: Trajectory, stats: Optional[StatsReporter] = None) -> np.ndarray:
        """[T, streams]: each stream's reward for the trajectory's steps (divided by the running
        scale of its return where the signal normalizes), times its strength; the episode sums of
        the rewards before normalisation go to ``stats`` when the trajectory ends an episode."""
        batch = self.batch(traj) if self.learned else None
        columns = []
        for name in self.names:
            if name == "extrinsic":
                columns.append(np.asarray(traj.rewards, np.float32))
            else:
                assert batch is not None
                columns.append(self.providers[name].evaluate(batch))
        rewards = np.stack(columns, axis=1) * self.strengths[None, :]
        learned = rewards.copy() if self.scalers else rewards
        for k, scaler in self.scalers.items():
            learned[:, k] = scaler.scale(traj.agent_id, columns[k], traj.episode_start, traj.done) * self.strengths[k]
        if traj.episode_start:  # what the agent id summed before belongs to an episode a reset cut off
            self._episode_sums.pop(traj.agent_id, None)
        sums = self._episode_sums[traj.agent_id]
        sums += rewards.sum(axis=0)
        if traj.done:
            if stats is not None:
                for tag, total in zip(self.tags, sums):
                    stats.add_stat(f"Policy/{tag} Reward", float(total))
            del self._episode_sums[traj.agent_id]
        return learned

    def evaluate(self, batch: SignalBatch, sync: Optional[LearnerSync] = None) -> torch.Tensor:
        """[B, streams] rewards (times strength) of a batch whose ``rewards`` are the objective's.
        ``sync``: this is one learner of a group and ``batch`` its rows (a normaliser that takes in
        what it evaluates, RND's, takes in every learner's rows)."""
        columns = []
        for name in self.names:
            if name == "extrinsic":
                assert batch.rewards is not None
                columns.append(batch.rewards.float())
            else:
                provider = self.providers[name]
                provider.sync = sync
                try:
                    columns.append(torch.as_tensor(provider.evaluate(batch), device=self.device))
                finally:
                    provider.sync = None
        return torch.stack(columns, dim=1) * torch.as_tensor(self.strengths, device=self.device)[None, :]

    def update_rows(
        self, batch: SignalBatch, rows: Union[torch.Tensor, slice], slots: Optional[torch.Tensor], stats: dict[str, list[float]],
        sync: Optional[LearnerSync] = None,
    ) -> None:
        """One step of every learned signal on the trainer minibatch ``rows`` of ``batch`` (with
        ``slots``, the rows are sequence slots: slot -> step, -1 for padding, which is left out);
        each loss tag's value is appended to ``stats``. ``sync``: as in ``update``."""
        if slots is not None:
            held = slots[rows]
            rows = held[held >= 0]
        for tag, number in self.update(batch.select(rows), sync).items():
            stats.setdefault(tag, []).append(number)

    def update(self, batch: SignalBatch, sync: Optional[LearnerSync] = None) -> dict[str, float]:
        """One step of every learned signal on ``batch``; their loss tags. With ``sync`` this is
        one learner of a group and ``batch`` its shard of the minibatch (RewardProvider.update)."""
        stats: dict[str, float] = {}
        for provider in self.learned.values():
            stats.update(provider.update(batch, sync))
        return stats

    def group_state(self) -> tuple[dict[str, torch.nn.Module], dict[str, Adam]]:
        """The learned signals' networks and optimizers, as the learners of a group start an update
        from them (``signal.<name>``)."""
        modules = {f"signal.{name}": p for name, p in self.learned.items()}
        optimizers = {f"signal.{name}": p.optimizer for name, p in self.learned.items() if p.optimizer is not None}
        return dict(modules), optimizers

    @property
    def stateful(self) -> bool:
        """Whether a checkpoint has anything of the streams to keep."""
        return bool(self.learned or self.scalers)

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = {name: provider.state_dict() for name, provider in self.learned.items()}
        for k, scaler in self.scalers.items():
            state[f"{self.names[k]}.return_scale"] = scaler.state()
        return state

    def load_state(self, state: Optional[dict[str, Any]]) -> None:
        for name, provider in self.learned.items():
            if state is not None and name in state:
                provider.load_state_dict(state[name])
        for k, scaler in self.scalers.items():
            if state is not None and f"{self.names[k]}.return_scale" in state:
                scaler.load_state(state[f"{self.names[k]}.return_scale"])
