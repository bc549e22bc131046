"""PPO as ML-Agents defines it: clipped surrogate, clipped value loss, GAE, entropy bonus,
linear schedules for learning rate / epsilon / beta, advantages normalised over the buffer,
optional observation normalisation. One Adam optimizer over actor and critic.

With network_settings.memory (an LSTM actor) the update runs over sequences, as ML-Agents': each
trajectory is cut into sequences of ``sequence_length`` steps, its last one padded at its end
(ML-Agents pads the first one at its front, which starts it from the padding's memory); every
sequence starts from the memory the worker acted with at its first step (stored in the
trajectory; no burn-in, as ML-Agents' PPO); minibatches are whole sequences
(batch_size // sequence_length of them) and padding is masked out of every loss term. The critic
has an LSTM too (its own, or the actor's with shared_critic); as ML-Agents, the trainer keeps
each agent's critic memory from one trajectory to the next (dropped when its episode ends, or
when its next episode starts after a reset cut it off: ``Trajectory.episode_start``) and
records, when a trajectory arrives, the critic memory before each of its sequences and after its
last step.

The trainer is the *brain*: it consumes trajectories from its AgentManagerQueue, updates the
network when ``buffer_size`` experiences are collected, and announces each new policy version
on its policy queue; the env side then hands the new actor weights to the muscles.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional

import numpy as np
import torch

from ml_arl.core.experience import Trajectory
from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.settings import PPOSettings
from ml_arl.trainers.learner_group import LearnerGroup
from ml_arl.trainers.learner_protocol import ShardMessage
from ml_arl.trainers.on_policy import OnPolicyTrainer
from ml_arl.trainers.on_policy_group import descend_shard, update_in_group
from ml_arl.trainers.optimizers import Adam, clip_grad_norm
from ml_arl.trainers.returns import ADVANTAGE_EPSILON, gae
from ml_arl.trainers.reward_signals import LearnerSync
from ml_arl.trainers.tensor_batches import select_rows

logger = logging.getLogger(__name__)


@dataclass
class PPOBatch:
    """Experience as tensors: the buffer's rows, or a minibatch of them. ``values``,
    ``advantages`` and ``returns`` are filled in at update time."""

    obs: list[torch.Tensor]  # one [N, *shape] tensor per observation
    allowed: Optional[torch.Tensor]  # [N, sum(branches)] action masks; None without discrete actions
    continuous: torch.Tensor  # [N, n_cont]
    discrete: torch.Tensor  # [N, n_branches]
    log_prob: torch.Tensor  # [N, D] under the acting policy, per continuous dimension and discrete branch
    values: torch.Tensor = field(default_factory=lambda: torch.zeros(0))  # [N, streams] the critic's, before the update
    advantages: torch.Tensor = field(default_factory=lambda: torch.zeros(0))  # [N] the mean over streams
    returns: torch.Tensor = field(default_factory=lambda: torch.zeros(0))  # [N, streams] advantages + values
    memories: Optional[torch.Tensor] = None  # [N, memory_size] the actor's memory before each step (with an LSTM)
    critic_memories: Optional[torch.Tensor] = None  # [N, memory_size] the critic's, at each sequence's first row (else 0)
    mask: Optional[torch.Tensor] = None  # [N] 1 for a step, 0 for padding (laid out in sequences)

    def __len__(self) -> int:
        return int(self.log_prob.shape[0])

    def select(self, idx: torch.Tensor) -> PPOBatch:
        """The rows ``idx`` of every field."""
        return select_rows(self, idx)


class PPOBuffer:
    """Trajectories since the last update. Values and advantages are computed at update time in
    one forward pass: the critic only changes inside ``update``, so this equals computing them
    trajectory by trajectory, at a fraction of the cost."""

    def __init__(self) -> None:
        self.trajectories: list[Trajectory] = []
        self.stream_rewards: list[np.ndarray] = []  # per trajectory, [T, streams] with each signal's strength
        # per trajectory, with a recurrent critic: its memory before each sequence [S, M] and after the last step [M]
        self.critic_memories: list[tuple[np.ndarray, np.ndarray]] = []
        self.size = 0

    def add(self, traj: Trajectory, stream_rewards: np.ndarray, critic_memories: Optional[tuple[np.ndarray, np.ndarray]] = None) -> None:
        self.trajectories.append(traj)
        self.stream_rewards.append(stream_rewards)
        if critic_memories is not None:
            self.critic_memories.append(critic_memories)
        self.size += len(traj)

    def batch(self, device: torch.device) -> tuple[PPOBatch, list[torch.Tensor]]:
        """Every experience as one batch, and the observations that followed each trajectory."""
        trajs = self.trajectories

        def cat(arrays: list[np.ndarray], dtype: torch.dtype) -> torch.Tensor:
            return torch.as_tensor(np.concatenate(arrays), dtype=dtype, device=device)

        n_obs = len(trajs[0].obs)
        next_obs = [
            torch.as_tensor(np.stack([t.next_obs[k] for t in trajs]), dtype=torch.float32, device=device)
            for k in range(n_obs)
        ]
        batch = PPOBatch(
            obs=[cat([t.obs[k] for t in trajs], torch.float32) for k in range(n_obs)],
            allowed=cat([t.allowed for t in trajs], torch.bool) if trajs[0].allowed is not None else None,  # type: ignore[misc]
            continuous=cat([t.continuous for t in trajs], torch.float32),
            discrete=cat([t.discrete for t in trajs], torch.int64),
            log_prob=cat([t.log_prob.reshape(len(t), -1) for t in trajs], torch.float32),
            memories=cat([t.memories for t in trajs], torch.float32) if trajs[0].memories is not None else None,  # type: ignore[misc]
        )
        return batch, next_obs

    def clear(self) -> None:
        self.trajectories = []
        self.stream_rewards = []
        self.critic_memories = []
        self.size = 0


def sequence_rows(lengths: list[int], sequence_length: int) -> np.ndarray:
    """Trajectories of ``lengths`` steps (consecutive rows of one batch) laid out as sequences of
    ``sequence_length``: for each slot, the row it holds, or -1 for the padding after a
    trajectory's last step. Every sequence starts with a step of its own trajectory."""
    out = []
    start = 0
    for n in lengths:
        slots = np.full(-(-n // sequence_length) * sequence_length, -1, np.int64)
        slots[:n] = np.arange(start, start + n)
        out.append(slots)
        start += n
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def masked_mean(x: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
    """The mean of ``x`` ([N] or [N, k]) over the rows where ``mask`` [N] is 1 (all rows when None)."""
    if mask is None:
        return x.mean()
    keep = mask.reshape(-1, *([1] * (x.dim() - 1))).expand_as(x) > 0
    # selected, not multiplied: whatever a padding row computes (even inf) stays out
    return torch.where(keep, x, torch.zeros_like(x)).sum() / keep.sum().clamp(min=1)


def clipped_surrogate_loss(
    log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor, epsilon: float,
    mask: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """ML-Agents' trust_region_policy_loss: ``log_prob`` and ``old_log_prob`` [N, D] give one ratio per
    continuous dimension and discrete branch, each clipped to 1 +- epsilon, and the loss is minus the
    mean over N x D ([N] joint log-probabilities give the usual single ratio). PPO's and POCA's."""
    ratio = torch.exp(log_prob - old_log_prob)
    adv = advantages[:, None] if ratio.dim() == 2 else advantages
    return -masked_mean(torch.min(ratio * adv, torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * adv), mask)


class PPOLoss(NamedTuple):
    total: torch.Tensor
    policy: torch.Tensor
    value: torch.Tensor


def ppo_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    value: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    entropy: torch.Tensor,
    epsilon: float,
    beta: float,
    clip_value_loss: bool = False,
    mask: Optional[torch.Tensor] = None,
) -> PPOLoss:
    """ML-Agents' PPO loss: clipped surrogate (``clipped_surrogate_loss``: a ratio per action
    dimension), value loss (clipped to +-epsilon around the old
    values unless ``clip_value_loss`` is off; with several reward streams, ``value``,
    ``old_values`` and ``returns`` are [N, streams] and the loss is the mean over streams), and
    the entropy bonus: ``policy + 0.5 * value - beta * mean(entropy)``. ``mask`` [N] (sequences of
    a recurrent actor) leaves padding out of every mean."""
    policy_loss = clipped_surrogate_loss(log_prob, old_log_prob, advantages, epsilon, mask)
    if clip_value_loss:
        clipped = old_values + torch.clamp(value - old_values, -epsilon, epsilon)
        value_loss = masked_mean(torch.max((returns - value) ** 2, (returns - clipped) ** 2), mask)
    else:
        value_loss = masked_mean((returns - value) ** 2, mask)
    return PPOLoss(policy_loss + 0.5 * value_loss - beta * masked_mean(entropy, mask), policy_loss, value_loss)


class PPOTrainer(OnPolicyTrainer[PPOSettings]):
    def build_networks(self) -> None:
        spec, net, device = self.spec, self.settings.network_settings, self.device
        self.network = self._networks(
            lambda: ActorCritic(spec, net, self.hp.shared_critic, streams=self.streams.names).to(device)
        )
        self._train(list(self.network.parameters()))
        self.buffer = PPOBuffer()
        self.learners: Optional[LearnerGroup] = None  # --num-learners > 1: the group this brain updates with
        self.critic_memory: dict[str, torch.Tensor] = {}  # agent id -> the critic's memory after its last trajectory

    def add_experience(self, traj: Trajectory) -> None:
        self._update_normalizer(traj)
        critic = self._critic_memories(traj) if self.network.critic_lstm is not None else None
        self.buffer.add(traj, self.streams.rewards(traj, self.stats), critic)

    def _critic_memories(self, traj: Trajectory) -> tuple[np.ndarray, np.ndarray]:
        """The critic's memory before each sequence of ``traj`` and after its last step, from the memory
        its agent's previous trajectory left (zeros at an episode's start); kept for the next one
        unless the episode ended (ML-Agents' critic_memory_dict)."""
        net = self.network
        memory = self.critic_memory.pop(traj.agent_id, None)
        if memory is None or traj.episode_start:  # (a memory kept from an episode a reset cut off: not this one's)
            memory = torch.zeros(1, net.memory_size, device=self.device)
        starts = []
        with torch.no_grad():
            features = net.critic_features([torch.as_tensor(o, dtype=torch.float32, device=self.device) for o in traj.obs])
            for first in range(0, len(traj), self.sequence_length):
                starts.append(memory[0])
                _, after = net.critic_recurrent(features[first : first + self.sequence_length], memory)
                assert after is not None
                memory = after
        if not traj.done:
            self.critic_memory[traj.agent_id] = memory
        return torch.stack(starts).cpu().numpy(), memory[0].cpu().numpy()

    def ready_to_update(self) -> bool:
        return self.buffer.size >= self.hp.buffer_size

    def on_new_phase(self) -> None:
        """A new phase: experience of the last one is not on-policy for it."""
        self.buffer.clear()
        self.critic_memory.clear()

    # ------------------------------------------------------------------ the update
    def update(self) -> None:
        hp = self.hp
        epsilon, beta = self._schedules()
        data = self._with_advantages()
        signal_data = self.streams.batch_of(self.buffer.trajectories) if self.streams.learned else None
        signal_stats: dict[str, list[float]] = {}
        n = len(data)
        if n > 1:
            adv = data.advantages
            data.advantages = (adv - adv.mean()) / (adv.std(correction=0) + ADVANTAGE_EPSILON)
        # the unit of a minibatch: a step, or with an LSTM a sequence of them (padded, in slots)
        flat_rows = None
        if self.network.lstm is not None:
            slots = sequence_rows([len(t) for t in self.buffer.trajectories], self.sequence_length)
            flat_rows = torch.as_tensor(slots, device=self.device)
            data = data.select(flat_rows.clamp(min=0))
            data.mask = (flat_rows >= 0).float()
        if self.learners is not None:  # --num-learners: this learner's shard, the others' scattered
            losses = update_in_group(self, data, signal_data, epsilon, beta,
                                     lambda rows, signals, mb, rng, reduce, sync: self._descend(
                                         rows, epsilon, beta, mb, rng, signals, None, signal_stats, reduce, sync))
        else:
            batch = max(min(hp.batch_size, n) // self.sequence_length, 1)
            losses = self._descend(data, epsilon, beta, batch, self.rng, signal_data, flat_rows, signal_stats)
        self.buffer.clear()
        for tag, numbers in signal_stats.items():
            self.stats.add_stat(tag, float(np.mean(numbers)))
        if self.bc is not None:
            for tag, number in self.bc.update(self.step).items():
                self.stats.add_stat(tag, number)
        self.stats.add_stat("Losses/Policy Loss", float(torch.stack(losses[0]).mean()))
        self.stats.add_stat("Losses/Value Loss", float(torch.stack(losses[1]).mean()))
        self.stats.add_stat("Policy/Learning Rate", self.optimizer.lr)
        self.stats.add_stat("Policy/Epsilon", epsilon)
        self.stats.add_stat("Policy/Beta", beta)

    def _descend(
        self, data: PPOBatch, epsilon: float, beta: float, batch: int, rng: np.random.Generator,
        signal_data: Any = None, flat_rows: Optional[torch.Tensor] = None,
        signal_stats: Optional[dict[str, list[float]]] = None, reduce: Optional[Callable[[list[torch.Tensor]], None]] = None,
        sync: Optional[LearnerSync] = None,
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """``num_epoch`` passes over ``data`` in minibatches of ``batch`` units (steps, or sequences
        with an LSTM) in an order drawn from ``rng``; ``reduce`` (the learner group's all-reduce)
        sees each minibatch's gradients before they are clipped, and ``sync`` the reward signals'
        (on_policy_group). Returns the policy and value losses."""
        hp, net, length = self.hp, self.network, self.sequence_length
        units = len(data) // length
        policy_losses, value_losses = [], []
        for _ in range(hp.num_epoch):
            if batch >= units:  # one minibatch per epoch: its order does not matter, skip the shuffle
                minibatches = [data]
                rows: list[Any] = [slice(None)]
            else:
                perm = torch.as_tensor(rng.permutation(units), device=self.device)
                picks = [perm[i : i + batch] for i in range(0, units - batch + 1, batch)]
                offsets = torch.arange(length, device=self.device)
                rows = [(pick[:, None] * length + offsets).reshape(-1) for pick in picks] if length > 1 else picks
                minibatches = [data.select(idx) for idx in rows]
            for mb, idx in zip(minibatches, rows):
                first = None if mb.memories is None else mb.memories[::length]  # each sequence's starting memory
                critic_first = None if mb.critic_memories is None else mb.critic_memories[::length]
                log_prob, entropy, values = net.evaluate(mb.obs, mb.allowed, mb.continuous, mb.discrete, first, critic_first)
                loss = ppo_loss(
                    log_prob, mb.log_prob, mb.advantages, values, mb.values, mb.returns, entropy,
                    epsilon, beta, hp.clip_value_loss, mb.mask,
                )
                self.optimizer.zero_grad()
                loss.total.backward()
                if reduce is not None:
                    reduce(self.optimizer.params)
                if hp.max_grad_norm is not None:
                    for group in self.clip_groups:
                        clip_grad_norm(group, hp.max_grad_norm)
                self.optimizer.step()
                policy_losses.append(loss.policy.detach())
                value_losses.append(loss.value.detach())
                if signal_data is not None and signal_stats is not None:  # ML-Agents: the signals learn from the same minibatches
                    self.streams.update_rows(signal_data, idx, flat_rows, signal_stats, sync)
        return policy_losses, value_losses

    # ------------------------------------------------------------------ --num-learners
    def _group_state(self) -> tuple[dict[str, torch.nn.Module], dict[str, Adam]]:
        """What the learners of a group start each update from."""
        modules, optimizers = self.streams.group_state()
        return {"network": self.network, **modules}, {"optimizer": self.optimizer, **optimizers}

    def descend_shard(self, message: ShardMessage, rank: int, world: int) -> None:
        """A learner's part of a group update (ml_arl.trainers.learner_main)."""
        descend_shard(self, message, rank, world, PPOBatch,
                      lambda rows, signals, eps, beta, mb, rng, reduce, sync: self._descend(
                          rows, eps, beta, mb, rng, signals, None, {}, reduce, sync))

    def _with_advantages(self) -> PPOBatch:
        """The buffer as one batch with values, GAE advantages (per trajectory and reward stream,
        averaged over streams, as ML-Agents) and returns per stream; the value after a trajectory
        is 0 only at a true termination, and never for streams that ignore dones (curiosity, RND)."""
        data, next_obs = self.buffer.batch(self.device)
        with torch.no_grad():
            if self.network.critic_lstm is not None:
                values, next_values = self._recurrent_values(data, next_obs)
            else:
                values = self.network.values(data.obs).cpu().numpy()
                next_values = self.network.values(next_obs).cpu().numpy()
        streams = self.streams
        advantages = self.stream_targets(
            self.buffer.trajectories, self.buffer.stream_rewards, values, next_values,
            lambda traj: traj.done and not traj.interrupted, gae, self.hp.lambd,
        )
        for k, tag in enumerate(streams.tags):
            self.stats.add_stat(f"Policy/{tag} Value Estimate", float(values[:, k].mean()))
        data.values = torch.as_tensor(values, device=self.device)
        data.returns = torch.as_tensor(advantages, device=self.device) + data.values
        data.advantages = torch.as_tensor(advantages.mean(axis=1), device=self.device)
        return data

    def _recurrent_values(self, data: PPOBatch, next_obs: list[torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
        """Values of a recurrent critic: over each trajectory's sequences from the critic memories
        recorded when it arrived, and for the observation after it from the memory after its last
        step. Sets ``data.critic_memories`` (each sequence's memory at its first row)."""
        net = self.network
        length = self.sequence_length
        slots = sequence_rows([len(t) for t in self.buffer.trajectories], length)
        real = slots >= 0
        starts = torch.as_tensor(np.concatenate([c[0] for c in self.buffer.critic_memories]), device=self.device)
        ends = torch.as_tensor(np.stack([c[1] for c in self.buffer.critic_memories]), device=self.device)
        rows = torch.as_tensor(np.maximum(slots, 0), device=self.device)
        in_slots = net.values([o[rows] for o in data.obs], starts).cpu().numpy()
        values = np.zeros((len(data), in_slots.shape[1]), np.float32)
        values[slots[real]] = in_slots[real]
        critic_memories = torch.zeros(len(data), net.memory_size, device=self.device)
        critic_memories[torch.as_tensor(slots[::length], device=self.device)] = starts
        data.critic_memories = critic_memories
        return values, net.values(next_obs, ends).cpu().numpy()
