"""MA-POCA as ML-Agents defines it (Cohen et al. 2021, "On the Use and Misuse of Absorbing
States in Multi-agent Reinforcement Learning"): agents with the same group id share a
centralised critic (``trainers/poca/networks.py``) that values the group, and a per-agent
counterfactual baseline that sees the agent's observation and its groupmates' observations
and actions. The actor is PPO's (the same muscle and ONNX export).

Per trajectory (``Trajectory.groupmates`` carries what the worker saw of the groupmates):
- rewards: the extrinsic stream is the agent's reward plus its group reward (ML-Agents'
  extrinsic signal with groups); other reward signals as in PPO;
- TD(lambda) returns from the group's values, bootstrapped with the group's value after the
  last step, which is 0 only when the agent's whole group has ended (an agent that leaves its
  group early is still credited with what the group goes on to get);
- advantages: returns minus the agent's baseline, averaged over streams, normalised over the
  buffer.
The loss: clipped surrogate + 0.5 * (value loss + 0.5 * baseline loss) - beta * entropy, the
value and baseline losses clipped to +-epsilon around their estimates before the update.

With network_settings.memory the actor has PPO's LSTM and the update runs over PPO's sequences
(each trajectory cut into sequences of ``sequence_length``, its last one padded at its end and
the padding masked out of every loss; the actor starts each from the memory the worker acted
with). The critic has an LSTM too (``poca_networks``), which values and baselines run through
from their own memories, as ML-Agents' POCA keeps critic and baseline memories: the trainer keeps
each agent's two memories from one trajectory to the next (dropped at its episode's end) and
records, when a trajectory arrives, both before each of its sequences and the value memory after
its last step (for the value that bootstraps it).

What the trainer keeps per agent (the critic memories, the group rewards of its episode so far for
``Environment/Group Cumulative Reward``) is dropped at the episode's end and, for an episode an
environment reset cut off, when the agent's next episode starts (``Trajectory.episode_start``), as
ML-Agents zeroes them when the environments reset.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

import numpy as np
import torch
from mlagents_envs.base_env import BehaviorSpec

from ml_arl.core.experience import Groupmates, Trajectory
from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.settings import POCASettings
from ml_arl.trainers.learner_group import LearnerGroup
from ml_arl.trainers.learner_protocol import ShardMessage
from ml_arl.trainers.on_policy import OnPolicyTrainer
from ml_arl.trainers.on_policy_group import descend_shard, update_in_group
from ml_arl.trainers.optimizers import Adam, clip_grad_norm
from ml_arl.trainers.poca.networks import POCACritic
from ml_arl.trainers.ppo.trainer import clipped_surrogate_loss, masked_mean, sequence_rows
from ml_arl.trainers.returns import ADVANTAGE_EPSILON, lambda_returns
from ml_arl.trainers.reward_signals import LearnerSync
from ml_arl.trainers.tensor_batches import select_rows

logger = logging.getLogger(__name__)


@dataclass
class POCABatch:
    """Experience as tensors: the buffer's rows or a minibatch of them. Groupmate slots are
    padded to the most groupmates in the buffer (``present`` marks the filled ones)."""

    obs: list[torch.Tensor]  # one [N, *shape] per observation
    allowed: Optional[torch.Tensor]  # [N, sum(branches)]
    continuous: torch.Tensor  # [N, n_cont]
    discrete: torch.Tensor  # [N, n_branches]
    log_prob: torch.Tensor  # [N, D] per continuous dimension and discrete branch
    mates_obs: list[torch.Tensor]  # one [N, M, *shape] per observation
    mates_continuous: torch.Tensor  # [N, M, n_cont]
    mates_discrete: torch.Tensor  # [N, M, n_branches]
    present: torch.Tensor  # [N, M] bool
    values: torch.Tensor  # [N, streams] the group's value before the update
    baselines: torch.Tensor  # [N, streams] the agent's baseline before the update
    returns: torch.Tensor  # [N, streams] TD(lambda) returns
    advantages: torch.Tensor  # [N] returns - baselines, mean over streams, normalised
    # with memory, laid out in sequences: the actor's memory before each step, the critic's value
    # and baseline memories at each sequence's first row (else 0), and 1 for a step, 0 for padding
    memories: Optional[torch.Tensor] = None
    value_memories: Optional[torch.Tensor] = None
    baseline_memories: Optional[torch.Tensor] = None
    mask: Optional[torch.Tensor] = None

    def __len__(self) -> int:
        return int(self.log_prob.shape[0])

    def select(self, idx: torch.Tensor) -> POCABatch:
        """The rows ``idx`` of every field (the estimates are empty until ``_batch`` computed them)."""
        return select_rows(self, idx)


def _padded(groupmates: list[Optional[Groupmates]], lengths: list[int], spec: BehaviorSpec) -> tuple[
    list[np.ndarray], np.ndarray, np.ndarray, np.ndarray, list[np.ndarray], np.ndarray
]:
    """Every trajectory's groupmates, padded to the most slots of any: (obs per observation
    [N, M, ...], continuous, discrete, present [N, M], next obs per observation [n_traj, M, ...],
    next present [n_traj, M]). A trajectory without a group has no groupmates."""
    slots = max([g.present.shape[1] for g in groupmates if g is not None] + [0])
    n, n_traj = sum(lengths), len(lengths)
    shapes = [tuple(o.shape) for o in spec.observation_specs]
    obs = [np.zeros((n, slots, *s), np.float32) for s in shapes]
    nxt = [np.zeros((n_traj, slots, *s), np.float32) for s in shapes]
    cont = np.zeros((n, slots, spec.action_spec.continuous_size), np.float32)
    disc = np.zeros((n, slots, len(spec.action_spec.discrete_branches)), np.int64)
    present = np.zeros((n, slots), bool)
    next_present = np.zeros((n_traj, slots), bool)
    start = 0
    for i, (g, length) in enumerate(zip(groupmates, lengths)):
        if g is not None:
            m = g.present.shape[1]
            rows = slice(start, start + length)
            for k in range(len(shapes)):
                obs[k][rows, :m] = g.obs[k]
                nxt[k][i, :m] = g.next_obs[k]
            cont[rows, :m], disc[rows, :m], present[rows, :m] = g.continuous, g.discrete, g.present
            next_present[i, :m] = g.next_present
        start += length
    return obs, cont, disc, present, nxt, next_present


def group_done(traj: Trajectory) -> bool:
    """The trajectory ends where its agent's whole group had ended: no value after it
    (ML-Agents: done_reached and all_group_dones_reached and not interrupted)."""
    all_done = traj.groupmates.all_done if traj.groupmates is not None else True
    return traj.done and not traj.interrupted and all_done


class POCALoss(NamedTuple):
    total: torch.Tensor
    policy: torch.Tensor
    value: torch.Tensor
    baseline: torch.Tensor


def clipped_value_loss(
    estimate: torch.Tensor, old: torch.Tensor, returns: torch.Tensor, epsilon: float, mask: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """ML-Agents' trust_region_value_loss: max of the squared errors of the estimate and of the
    estimate clipped to +-epsilon around ``old``; the mean over rows (where ``mask`` is 1) and streams."""
    clipped = old + torch.clamp(estimate - old, -epsilon, epsilon)
    return masked_mean(torch.max((returns - estimate) ** 2, (returns - clipped) ** 2), mask)


def poca_loss(
    log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor,
    values: torch.Tensor, baselines: torch.Tensor, old_baselines: torch.Tensor,
    returns: torch.Tensor, entropy: torch.Tensor, epsilon: float, beta: float, mask: Optional[torch.Tensor] = None,
) -> POCALoss:
    """``policy + 0.5 * (value + 0.5 * baseline) - beta * mean(entropy)``, as ML-Agents' POCA optimizer;
    ``mask`` [N] (sequences with memory): every mean over the rows where it is 1. The baseline loss is
    clipped to +-epsilon around the stored baselines; the value loss is plain, as ML-Agents 1.1.0
    computes it (the "old values" it clips around are the returns, buffer.py's value_estimates_key,
    so its clip never acts)."""
    policy = clipped_surrogate_loss(log_prob, old_log_prob, advantages, epsilon, mask)
    value = masked_mean((returns - values) ** 2, mask)
    baseline = clipped_value_loss(baselines, old_baselines, returns, epsilon, mask)
    return POCALoss(policy + 0.5 * (value + 0.5 * baseline) - beta * masked_mean(entropy, mask), policy, value, baseline)


class POCATrainer(OnPolicyTrainer[POCASettings]):
    def build_networks(self) -> None:
        spec, net, device = self.spec, self.settings.network_settings, self.device
        self.network = self._networks(lambda: ActorCritic(spec, net, streams=self.streams.names, critic=False).to(device))
        self.critic = self._networks(lambda: POCACritic(spec, net, self.network.normalizer, self.streams.names).to(device))
        self._train(list(self.network.parameters()) + list(self.critic.parameters()))
        self.learners: Optional[LearnerGroup] = None  # --num-learners > 1 (ml_arl.trainers.on_policy_group)
        self.trajectories: list[Trajectory] = []
        self.stream_rewards: list[np.ndarray] = []
        self.size = 0
        self.group_rewards: dict[str, float] = defaultdict(float)  # per agent, its group rewards this episode
        # with memory: per agent, the critic's value and baseline memories after its last trajectory;
        # per buffered trajectory, both before each sequence and the value memory after its last step
        self.value_memory: dict[str, torch.Tensor] = {}
        self.baseline_memory: dict[str, torch.Tensor] = {}
        self.critic_memories: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add_experience(self, traj: Trajectory) -> None:
        if traj.episode_start:  # a new episode: what was kept for the agent id is another episode's (one dropped by a reset)
            self.group_rewards.pop(traj.agent_id, None)
            self.value_memory.pop(traj.agent_id, None)
            self.baseline_memory.pop(traj.agent_id, None)
        self._update_normalizer(traj)
        # ML-Agents' extrinsic signal with groups: the agent's reward plus its group reward
        with_group = Trajectory(**{**traj._asdict(), "rewards": traj.rewards + traj.group_rewards})  # (_replace trips on __len__)
        self.stream_rewards.append(self.streams.rewards(with_group, self.stats))
        if self.critic.lstm is not None:
            self.critic_memories.append(self._critic_memories(traj))
        self.trajectories.append(traj)
        self.size += len(traj)
        self._group_episode_stats(traj)

    def _group_episode_stats(self, traj: Trajectory) -> None:
        """``Environment/Group Cumulative Reward`` when the agent's whole group has ended, as ML-Agents
        (one value per agent present at the group's end; an agent that left early is not counted)."""
        self.group_rewards[traj.agent_id] += float(np.sum(traj.group_rewards))
        if not traj.done:
            return
        all_done = traj.groupmates.all_done if traj.groupmates is not None else True
        total = self.group_rewards.pop(traj.agent_id)
        if all_done:
            self.stats.add_stat("Environment/Group Cumulative Reward", total, "histogram")

    def _critic_memories(self, traj: Trajectory) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The critic's value and baseline memories before each sequence of ``traj`` and its value
        memory after the last step, from the agent's memories after its last trajectory (zeros at an
        episode's start); both are kept for its next trajectory unless its episode ended."""
        critic, device, length = self.critic, self.device, self.sequence_length
        mates_obs, mates_cont, mates_disc, present, _, _ = _padded([traj.groupmates], [len(traj)], self.spec)
        obs = [torch.as_tensor(o, device=device) for o in traj.obs]
        mates = [torch.as_tensor(o, device=device) for o in mates_obs]
        present_t = torch.as_tensor(present, device=device)
        zeros = torch.zeros(1, critic.memory_size, device=device)
        value_mem = self.value_memory.pop(traj.agent_id, zeros)
        baseline_mem = self.baseline_memory.pop(traj.agent_id, zeros)
        value_starts, baseline_starts = [], []
        with torch.no_grad():
            value_features = critic.value_features(obs, mates, present_t)
            baseline_features = critic.baseline_features(
                obs, mates, torch.as_tensor(mates_cont, device=device), torch.as_tensor(mates_disc, device=device), present_t,
            )
            for first in range(0, len(traj), length):
                value_starts.append(value_mem[0])
                baseline_starts.append(baseline_mem[0])
                value_mem = critic.head(value_features[first : first + length], value_mem)[1]  # type: ignore[assignment]
                baseline_mem = critic.head(baseline_features[first : first + length], baseline_mem)[1]  # type: ignore[assignment]
        if not traj.done:
            self.value_memory[traj.agent_id], self.baseline_memory[traj.agent_id] = value_mem, baseline_mem
        return torch.stack(value_starts).cpu().numpy(), torch.stack(baseline_starts).cpu().numpy(), value_mem[0].cpu().numpy()

    def ready_to_update(self) -> bool:
        return self.size >= self.hp.buffer_size

    def _clear_buffer(self) -> None:
        self.trajectories, self.stream_rewards, self.critic_memories, self.size = [], [], [], 0

    def on_new_phase(self) -> None:
        """A new phase: the buffer is dropped and no episode goes on from the last one's memories."""
        self._clear_buffer()
        self.value_memory.clear()
        self.baseline_memory.clear()

    # ------------------------------------------------------------------ the update
    def update(self) -> None:
        hp = self.hp
        epsilon, beta = self._schedules()

        data = self._batch()
        n = self.size
        # the unit of a minibatch: a step, or with memory a sequence of them (padded, in slots)
        length = self.sequence_length if data.mask is not None else 1
        batch = max(min(hp.batch_size, n) // length, 1)
        # ML-Agents: the reward signals learn from the same minibatches (their steps, without padding)
        signal_data = self.streams.batch_of(self.trajectories) if self.streams.learned else None
        flat_rows = None
        if signal_data is not None and length > 1:
            flat_rows = torch.as_tensor(sequence_rows([len(t) for t in self.trajectories], length), device=self.device)
        signal_stats: dict[str, list[float]] = {}
        if self.learners is not None:  # --num-learners: this learner's shard, the others' scattered
            losses = update_in_group(self, data, signal_data, epsilon, beta,
                                     lambda rows, signals, mb, rng, reduce, sync: self._descend(
                                         rows, epsilon, beta, mb, rng, signals, None, signal_stats, reduce, sync))
        else:
            losses = self._descend(data, epsilon, beta, batch, self.rng, signal_data, flat_rows, signal_stats)
        self._clear_buffer()  # the buffer is spent
        for tag, numbers in signal_stats.items():
            self.stats.add_stat(tag, float(np.mean(numbers)))
        if self.bc is not None:
            for tag, number in self.bc.update(self.step).items():
                self.stats.add_stat(tag, number)
        self.stats.add_stat("Losses/Policy Loss", float(torch.stack([x.policy for x in losses]).mean()))
        self.stats.add_stat("Losses/Value Loss", float(torch.stack([x.value for x in losses]).mean()))
        self.stats.add_stat("Losses/Baseline Loss", float(torch.stack([x.baseline for x in losses]).mean()))
        self.stats.add_stat("Policy/Learning Rate", self.optimizer.lr)
        self.stats.add_stat("Policy/Epsilon", epsilon)
        self.stats.add_stat("Policy/Beta", beta)

    def _descend(
        self, data: POCABatch, epsilon: float, beta: float, batch: int, rng: np.random.Generator, signal_data: Any = None,
        flat_rows: Optional[torch.Tensor] = None, signal_stats: Optional[dict[str, list[float]]] = None,
        reduce: Optional[Callable[[list[torch.Tensor]], None]] = None, sync: Optional[LearnerSync] = None,
    ) -> list[POCALoss]:
        """``num_epoch`` passes over ``data`` in minibatches of ``batch`` units drawn from ``rng``;
        ``reduce`` (the learner group's all-reduce) sees each minibatch's gradients before clipping,
        ``sync`` the reward signals' (on_policy_group)."""
        hp = self.hp
        length = self.sequence_length if data.mask is not None else 1
        units = len(data) // length
        offsets = torch.arange(length, device=self.device)
        losses: list[POCALoss] = []
        for _ in range(hp.num_epoch):
            perm = torch.as_tensor(rng.permutation(units), device=self.device)
            for start in range(0, units - batch + 1, batch):
                pick = perm[start : start + batch]
                idx = (pick[:, None] * length + offsets).reshape(-1) if length > 1 else pick
                mb = data.select(idx)
                first = [None if m is None else m[::length] for m in (mb.memories, mb.value_memories, mb.baseline_memories)]
                dist = self.network.distribution(mb.obs, mb.allowed, first[0])
                log_prob, entropy = dist.log_probs(mb.continuous, mb.discrete), dist.entropy()
                values = self.critic.values(mb.obs, mb.mates_obs, mb.present, first[1])
                baselines = self.critic.baselines(mb.obs, mb.mates_obs, mb.mates_continuous, mb.mates_discrete, mb.present, first[2])
                loss = poca_loss(
                    log_prob, mb.log_prob, mb.advantages, values, baselines, mb.baselines, mb.returns,
                    entropy, epsilon, beta, mb.mask,
                )
                self.optimizer.zero_grad()
                loss.total.backward()
                if reduce is not None:
                    reduce(self.optimizer.params)
                if hp.max_grad_norm is not None:
                    for group in self.clip_groups:
                        clip_grad_norm(group, hp.max_grad_norm)
                self.optimizer.step()
                losses.append(POCALoss(*(part.detach() for part in loss)))
                if signal_data is not None and signal_stats is not None:
                    self.streams.update_rows(signal_data, idx, flat_rows, signal_stats, sync)
        return losses

    def _group_state(self) -> tuple[dict[str, torch.nn.Module], dict[str, Adam]]:
        """What the learners of a group start each update from."""
        modules, optimizers = self.streams.group_state()
        return {"network": self.network, "critic": self.critic, **modules}, {"optimizer": self.optimizer, **optimizers}

    def descend_shard(self, message: ShardMessage, rank: int, world: int) -> None:
        """A learner's part of a group update (ml_arl.trainers.learner_main)."""
        descend_shard(self, message, rank, world, POCABatch,
                      lambda rows, signals, eps, beta, mb, rng, reduce, sync: self._descend(
                          rows, eps, beta, mb, rng, signals, None, {}, reduce, sync))

    def _batch(self) -> POCABatch:
        """The buffer as one batch with the critic's values and baselines, TD(lambda) returns per
        trajectory and stream, and normalised advantages."""
        trajs, device = self.trajectories, self.device

        def tensor(array: np.ndarray, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.as_tensor(array, dtype=dtype, device=device)

        lengths = [len(t) for t in trajs]
        n_obs = len(trajs[0].obs)
        mates_obs, mates_cont, mates_disc, present, next_mates, next_present = _padded([t.groupmates for t in trajs], lengths, self.spec)
        obs = [tensor(np.concatenate([t.obs[k] for t in trajs])) for k in range(n_obs)]
        next_obs = [tensor(np.stack([np.asarray(t.next_obs[k]) for t in trajs])) for k in range(n_obs)]
        data = POCABatch(
            obs=obs,
            allowed=tensor(np.concatenate([t.allowed for t in trajs]), torch.bool) if trajs[0].allowed is not None else None,  # type: ignore[misc]
            continuous=tensor(np.concatenate([t.continuous for t in trajs])),
            discrete=tensor(np.concatenate([t.discrete for t in trajs]), torch.int64),
            log_prob=tensor(np.concatenate([t.log_prob.reshape(len(t), -1) for t in trajs])),
            mates_obs=[tensor(o) for o in mates_obs], mates_continuous=tensor(mates_cont),
            mates_discrete=tensor(mates_disc, torch.int64), present=tensor(present, torch.bool),
            values=torch.zeros(0), baselines=torch.zeros(0), returns=torch.zeros(0), advantages=torch.zeros(0),
        )
        next_mates_t, next_present_t = [tensor(o) for o in next_mates], tensor(next_present, torch.bool)
        with torch.no_grad():
            if self.critic.lstm is None:
                values = self.critic.values(data.obs, data.mates_obs, data.present).cpu().numpy()
                baselines = self.critic.baselines(
                    data.obs, data.mates_obs, data.mates_continuous, data.mates_discrete, data.present
                ).cpu().numpy()
                next_values = self.critic.values(next_obs, next_mates_t, next_present_t).cpu().numpy()
            else:
                slots = sequence_rows(lengths, self.sequence_length)
                data = data.select(tensor(np.maximum(slots, 0), torch.int64))  # laid out in sequences
                values, baselines, next_values = self._recurrent_estimates(data, slots, next_obs, next_mates_t, next_present_t)
        streams = self.streams
        returns = self.stream_targets(trajs, self.stream_rewards, values, next_values, group_done, lambda_returns, self.hp.lambd)
        for k, tag in enumerate(streams.tags):
            self.stats.add_stat(f"Policy/{tag} Value Estimate", float(values[:, k].mean()))
            self.stats.add_stat(f"Policy/{tag} Baseline Estimate", float(baselines[:, k].mean()))
        advantages = (returns - baselines).mean(axis=1)
        if len(advantages) > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + ADVANTAGE_EPSILON)
        if self.critic.lstm is not None:  # the per-step numbers into the sequences' slots (padding: the trajectory's last step's)
            rows = np.maximum(slots, 0)
            values, baselines, returns, advantages = values[rows], baselines[rows], returns[rows], advantages[rows]
        data.values, data.baselines = tensor(values), tensor(baselines)
        data.returns, data.advantages = tensor(returns), tensor(advantages)
        return data

    def _recurrent_estimates(
        self, data: POCABatch, slots: np.ndarray, next_obs: list[torch.Tensor], next_mates: list[torch.Tensor], next_present: torch.Tensor,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """With memory, ``data`` laid out in the sequences ``slots`` (``sequence_rows``): the values and
        baselines of every step [N, streams] in step order, from the memories recorded when each
        trajectory arrived, and the value after each trajectory [n_traj, streams] from the memory after
        its last step. Sets the mask and each sequence's actor, value and baseline memories."""
        device, length, size = self.device, self.sequence_length, self.critic.memory_size
        value_starts = torch.as_tensor(np.concatenate([c[0] for c in self.critic_memories]), device=device)
        baseline_starts = torch.as_tensor(np.concatenate([c[1] for c in self.critic_memories]), device=device)
        ends = torch.as_tensor(np.stack([c[2] for c in self.critic_memories]), device=device)
        in_slots = self.critic.values(data.obs, data.mates_obs, data.present, value_starts).cpu().numpy()
        base_slots = self.critic.baselines(
            data.obs, data.mates_obs, data.mates_continuous, data.mates_discrete, data.present, baseline_starts,
        ).cpu().numpy()
        real = slots >= 0
        values = np.zeros((self.size, in_slots.shape[1]), np.float32)
        baselines = np.zeros_like(values)
        values[slots[real]], baselines[slots[real]] = in_slots[real], base_slots[real]
        actor = np.concatenate([t.memories for t in self.trajectories if t.memories is not None])
        data.memories = torch.as_tensor(actor[np.maximum(slots, 0)], device=device)
        data.value_memories = torch.zeros(len(slots), size, device=device)
        data.baseline_memories = torch.zeros(len(slots), size, device=device)
        data.value_memories[::length], data.baseline_memories[::length] = value_starts, baseline_starts
        data.mask = torch.as_tensor(real, dtype=torch.float32, device=device)
        return values, baselines, self.critic.values(next_obs, next_mates, next_present, ends).cpu().numpy()

    # ------------------------------------------------------------------ persistence
    def _extra_state(self) -> dict[str, Any]:
        return {"Critic": self.critic.state_dict()}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        if "Critic" in state:
            self.critic.load_state_dict(state["Critic"])
