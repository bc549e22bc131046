"""Soft Actor-Critic as ML-Agents defines it (sac/trainer.py, sac/optimizer_torch.py).

- The actor is ml_arl's ``ActorCritic`` without its critic, with a state-dependent log sigma and
  tanh-squashed continuous actions (what the workers act with and what ONNX exports).
- Critics (``sac_networks``): a value network V with a target copy moved by soft updates
  (``tau``), and twin Q networks; each has one output per reward stream, and with discrete
  actions one per action of every branch.
- The entropy coefficient is learned: one for the continuous actions, one per discrete branch,
  towards ML-Agents' target entropies (-1 x the continuous size; 0.2 x log(branch size)).
- Experience goes into a replay buffer (``buffer_size``, the newest kept). Once it holds
  ``batch_size`` experiences and ``buffer_init_steps`` were taken, the trainer takes one gradient
  step per ``steps_per_update`` environment steps (catching up in a burst after a pause, as
  ML-Agents does), and the workers get the new actor after each burst.

With ``network_settings.memory`` the actor and every critic have an LSTM, and a gradient step
takes ``batch_size // sequence_length`` whole sequences from the replay buffer (see
``replay_buffer``), with padding left out of every loss, as ML-Agents' SAC:
- the actor runs each sequence from the memory the worker acted with at its first step;
- V runs it from the value network's memory before that step, recorded when the trajectory
  arrived (the trainer keeps each agent's value memory from one trajectory to the next, dropped
  when its episode ends, or when its next one starts after a reset cut it off: ML-Agents' critic
  memories);
- the target V runs the sequence's first observation and then its next observations from that
  same memory (ML-Agents steps V itself over the first observation; see ``_sequence_targets``);
- Q1 and Q2 run each sequence from zero memories (ML-Agents: they have no memories at inference).
"""

from __future__ import annotations

import copy
import logging
import os
from collections import defaultdict
from collections.abc import Callable
from typing import Any, NamedTuple, Optional

import numpy as np
import torch

from ml_arl.core.actor_weights import PolicySnapshot
from ml_arl.core.behavior_id import brain_name
from ml_arl.core.exceptions import ConfigError
from ml_arl.core.experience import Trajectory
from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.settings import SACSettings
from ml_arl.trainers.behavioral_cloning import make_behavioral_cloning
from ml_arl.trainers.learner_group import LearnerGroup
from ml_arl.trainers.learner_protocol import ReplayShardMessage
from ml_arl.trainers.optimizers import Adam
from ml_arl.trainers.reward_signals import LearnerSync, SignalBatch
from ml_arl.trainers.reward_streams import RewardStreams
from ml_arl.trainers.sac.entropy import EntropyCoefficients
from ml_arl.trainers.sac.grouped import descend_shard, group_update
from ml_arl.trainers.sac.networks import Critic, frozen, soft_update
from ml_arl.trainers.sac.replay_buffer import ReplayBatch, ReplayBuffer
from ml_arl.trainers.trainer import Trainer

logger = logging.getLogger(__name__)

REPLAY_BUFFER_FILE = "last_replay_buffer.npz"


class SACLoss(NamedTuple):
    q1: torch.Tensor
    q2: torch.Tensor
    value: torch.Tensor
    policy: torch.Tensor
    entropy: torch.Tensor


def _branch_sums(x: torch.Tensor, branches: tuple[int, ...]) -> torch.Tensor:
    """[B, ..., sum(branches)] -> [B, ..., n_branches]: the sum over each branch's actions."""
    return torch.stack([part.sum(-1) for part in torch.split(x, list(branches), dim=-1)], dim=-1)


def sac_losses(
    q1: torch.Tensor,
    q2: torch.Tensor,
    target_values: torch.Tensor,
    rewards: torch.Tensor,
    dones: torch.Tensor,
    gammas: torch.Tensor,
    use_dones: torch.Tensor,
    values: torch.Tensor,
    q1_policy: torch.Tensor,
    q2_policy: torch.Tensor,
    cont_log_probs: Optional[torch.Tensor],
    disc_log_probs: Optional[torch.Tensor],
    branches: tuple[int, ...],
    log_alpha_cont: Optional[torch.Tensor],
    log_alpha_disc: Optional[torch.Tensor],
    target_entropy_cont: float,
    target_entropy_disc: Optional[torch.Tensor],
) -> SACLoss:
    """ML-Agents' SAC losses for one minibatch of B experiences and S reward streams.

    ``q1``/``q2`` [B, S]: Q of the stored actions (with discrete actions, of the taken action,
    averaged over branches); ``target_values`` [B, S]: the target V of the next observations;
    ``values`` [B, S]: V of the observations; ``q1_policy``/``q2_policy`` [B, S, A]: Q with the
    actor's fresh continuous sample, one column per discrete action (A = 1 without discrete
    actions); ``cont_log_probs`` [B, n_cont] per-dimension log-densities of that sample;
    ``disc_log_probs`` [B, sum(branches)] log-softmax of every branch."""
    # Q losses: one-step backups through the target V; signals that ignore dones (curiosity, RND) always bootstrap
    with torch.no_grad():
        backup = rewards + (1.0 - use_dones[None, :] * dones[:, None]) * gammas[None, :] * target_values
    q1_loss = (0.5 * ((backup - q1) ** 2).mean(0)).mean()
    q2_loss = (0.5 * ((backup - q2) ** 2).mean(0)).mean()

    alpha_cont = log_alpha_cont.exp().detach() if log_alpha_cont is not None else None
    alpha_disc = log_alpha_disc.exp().detach() if log_alpha_disc is not None else None
    # V's target: the smaller Q of the actor's own action (expected over discrete actions), minus the entropy terms
    with torch.no_grad():
        if disc_log_probs is None:
            min_policy_q = torch.min(q1_policy[..., 0], q2_policy[..., 0])
        else:
            probs = disc_log_probs.exp()[:, None, :]
            min_policy_q = torch.min(
                _branch_sums(q1_policy * probs, branches).mean(-1), _branch_sums(q2_policy * probs, branches).mean(-1)
            )
        v_backup = min_policy_q
        if disc_log_probs is not None:
            assert alpha_disc is not None
            neg_entropy = _branch_sums(disc_log_probs * disc_log_probs.exp(), branches)  # [B, n_branches]
            v_backup = v_backup - (alpha_disc[None, :] * neg_entropy).mean(-1, keepdim=True)
        if cont_log_probs is not None:
            assert alpha_cont is not None
            v_backup = v_backup - (alpha_cont * cont_log_probs).sum(-1, keepdim=True)
    value_loss = (0.5 * ((values - v_backup) ** 2).mean(0)).mean()

    # the actor: maximise Q (the first Q network, averaged over streams) plus entropy
    # (the sums below start from the first term present rather than from zeros: the same numbers, fewer tensor ops)
    mean_q1 = q1_policy.mean(1)  # [B, A]
    policy_terms: Optional[torch.Tensor] = None
    if disc_log_probs is not None:
        assert alpha_disc is not None
        probs = disc_log_probs.exp()
        per_branch = _branch_sums(disc_log_probs * probs, branches) * alpha_disc[None, :] - _branch_sums(mean_q1 * probs, branches)
        policy_terms = per_branch.sum(-1)
        expected_q1 = (probs * mean_q1).sum(-1)
    else:
        expected_q1 = mean_q1[:, 0]
    if cont_log_probs is not None:
        assert alpha_cont is not None
        # alpha times the joint log-density (the sum over dimensions), as in the value target and alpha's loss
        cont_terms = alpha_cont * cont_log_probs.sum(-1) - expected_q1
        policy_terms = cont_terms if policy_terms is None else policy_terms + cont_terms
    assert policy_terms is not None, "SAC needs continuous actions or discrete branches"
    policy_loss = policy_terms.mean()

    # the entropy coefficients (as logs), towards the target entropies
    entropy_loss: Optional[torch.Tensor] = None
    if disc_log_probs is not None:
        assert log_alpha_disc is not None and target_entropy_disc is not None
        with torch.no_grad():
            diff = _branch_sums(disc_log_probs * disc_log_probs.exp(), branches) + target_entropy_disc[None, :]
        entropy_loss = -(log_alpha_disc[None, :] * diff).mean(-1).mean()
    if cont_log_probs is not None:
        assert log_alpha_cont is not None
        with torch.no_grad():
            diff_c = cont_log_probs.sum(-1) + target_entropy_cont
        cont_entropy_loss = (log_alpha_cont * diff_c).mean()
        entropy_loss = -cont_entropy_loss if entropy_loss is None else entropy_loss - cont_entropy_loss
    assert entropy_loss is not None
    return SACLoss(q1_loss, q2_loss, value_loss, policy_loss, entropy_loss)


def condense_q(q: torch.Tensor, discrete: torch.Tensor, branches: tuple[int, ...]) -> torch.Tensor:
    """[B, S, sum(branches)] -> [B, S]: the Q of the taken action of each branch, averaged over branches."""
    picked = []
    start = 0
    for i, size in enumerate(branches):
        picked.append(q[:, :, start : start + size].gather(2, discrete[:, None, i : i + 1].expand(-1, q.shape[1], 1)))
        start += size
    return torch.cat(picked, dim=2).mean(2)


class SACTrainer(Trainer[SACSettings]):
    def build(self) -> None:
        behavior, settings, spec, device = self.behavior, self.settings, self.spec, self.device
        self.streams = RewardStreams(behavior, settings, spec, lambda actions: actions, device)  # stored = sent, tanh-squashed
        net = settings.network_settings
        try:
            self.network = ActorCritic(spec, net, conditional_sigma=True, tanh_squash=True, critic=False).to(device)
        except ValueError as err:  # the behavior's observations do not fit network_settings
            raise ConfigError([f"behaviors.{brain_name(behavior)}.{err}"]) from None
        self.branches = tuple(int(b) for b in spec.action_spec.discrete_branches)
        self.n_cont = int(spec.action_spec.continuous_size)
        n_streams = len(self.streams.names)
        q_outputs = sum(self.branches) if self.branches else 1
        normalizer = self.network.normalizer
        self.value_net = Critic(spec, net, normalizer, n_streams).to(device)
        self.target_net = copy.deepcopy(self.value_net)
        self.target_net.encoder._normalizer = [normalizer]  # the copy reads the live normalizer
        self.q1 = Critic(spec, net, normalizer, n_streams, self.n_cont, q_outputs).to(device)
        self.q2 = Critic(spec, net, normalizer, n_streams, self.n_cont, q_outputs).to(device)
        self.gammas = torch.tensor(self.streams.gammas, dtype=torch.float32, device=device)
        self.use_dones = torch.tensor([0.0 if ignore else 1.0 for ignore in self.streams.ignore_done], device=device)
        self.alphas = EntropyCoefficients(self.hp.init_entcoef, self.n_cont, self.branches, device)
        lr = self.hp.learning_rate
        self.policy_optimizer = Adam(self.network.actor_parameters(), lr=lr)
        self.value_optimizer = Adam(
            list(self.q1.parameters()) + list(self.q2.parameters()) + list(self.value_net.parameters()), lr=lr
        )
        self.entropy_optimizer = Adam(self.alphas.parameters(), lr=lr)
        self._optimizers = (self.policy_optimizer, self.value_optimizer, self.entropy_optimizer)
        self._q1_params = list(self.q1.parameters())
        self._value_params = list(self.value_net.parameters())
        self._target_params = list(self.target_net.parameters())
        self._stat_names = ["Losses/Policy Loss", "Losses/Value Loss", "Losses/Q1 Loss", "Losses/Q2 Loss"] + self.alphas.stat_names()
        self._strengths_of: Optional[np.ndarray] = None
        self._strengths_tensor = torch.zeros(0)
        self.sequence_length = net.memory.sequence_length if net.memory is not None else 1
        self.critic_memory: dict[str, torch.Tensor] = {}  # agent id -> V's memory after its last trajectory
        self.replay = self._new_replay()
        self.learners: Optional[LearnerGroup] = None  # --num-learners > 1 (ml_arl.trainers.sac.grouped)
        self.update_steps = 1  # gradient steps taken + 1, as ML-Agents counts them
        self.signal_update_steps = 1  # reward-signal steps taken + 1
        self.bc = make_behavioral_cloning(
            behavior, settings.behavioral_cloning, self.network, lr, self.hp.batch_size, 1, device, self.rng, self.sequence_length,
        )

    def _new_replay(self) -> ReplayBuffer:
        obs_shapes = [tuple(int(d) for d in o.shape) for o in self.spec.observation_specs]
        return ReplayBuffer(
            self.hp.buffer_size, obs_shapes, self.n_cont, self.branches, self.device, self.network.memory_size, self.sequence_length,
        )

    # ------------------------------------------------------------------ acting side
    def policy_snapshot(self) -> PolicySnapshot:
        return PolicySnapshot(self.policy_version, self.network.muscle_weights())

    def add_experience(self, traj: Trajectory) -> None:
        obs = [torch.as_tensor(o, device=self.device) for o in traj.obs]
        if self.network.normalize:
            vectors = self.network.vector_part(obs)
            if vectors is not None:
                self.network.normalizer.update(vectors)
        critic_memories = None
        with torch.no_grad():
            if self.value_net.lstm is None:
                values = self.value_net(obs)[:, :, 0].mean(0)
            else:  # V over the trajectory from the agent's value memory (zeros at an episode's start)
                memory = self.critic_memory.pop(traj.agent_id, None)
                if memory is None or traj.episode_start:  # (one kept from an episode a reset cut off: not this one's)
                    memory = torch.zeros(1, self.value_net.memory_size, device=self.device)
                out, before, after = self.value_net.over_trajectory(obs, memory, self.sequence_length)
                values = out[:, :, 0].mean(0)
                critic_memories = before.cpu().numpy()
                if not traj.done:
                    self.critic_memory[traj.agent_id] = after
        for tag, value in zip(self.streams.tags, values.tolist()):
            self.stats.add_stat(f"Policy/{tag} Value", value)
        self.streams.rewards(traj, self.stats)  # episode sums of every signal (the replay keeps the objective)
        self.replay.add(traj, critic_memories)

    def on_new_phase(self) -> None:
        """A new phase may change the objective: stored rewards would mean something else."""
        self.replay = self._new_replay()
        self.critic_memory.clear()

    def _sample(self) -> ReplayBatch:
        """A minibatch: ``batch_size`` steps, or with memory ``batch_size // sequence_length`` sequences."""
        if self.network.lstm is not None:
            return self.replay.sample_sequences(max(self.hp.batch_size // self.sequence_length, 1), self.rng)
        return self.replay.sample(self.hp.batch_size, self.rng)

    def _updates_due(self) -> bool:
        hp = self.hp
        return (self.step - hp.buffer_init_steps) / self.update_steps > hp.steps_per_update

    def ready_to_update(self) -> bool:
        hp = self.hp
        return len(self.replay) >= hp.batch_size and self.step >= hp.buffer_init_steps and self._updates_due()

    # ------------------------------------------------------------------ the update
    def update(self) -> None:
        hp = self.hp
        lr = self.scheduled(hp.learning_rate, 1e-10, hp.learning_rate_schedule)
        for optimizer in (self.policy_optimizer, self.value_optimizer, self.entropy_optimizer):
            optimizer.lr = lr
        steps: list[torch.Tensor] = []  # each step's stats, turned into numbers once per burst
        signal_stats: dict[str, list[float]] = defaultdict(list)
        if self.learners is not None:  # --num-learners: every learner takes the steps over its rows
            steps = group_update(self, signal_stats)
        while self.learners is None and self._updates_due():
            steps.append(self._gradient_step(self._sample()))
            self.update_steps += 1
        if self.learners is None:
            for batch in self.signal_batches_due():
                for tag, number in self.streams.update(batch).items():
                    signal_stats[tag].append(number)
                self.signal_update_steps += 1
        if steps:
            for name, value in zip(self._stat_names, torch.stack(steps).mean(0).tolist()):
                self.stats.add_stat(name, value)
        for tag, numbers in signal_stats.items():
            self.stats.add_stat(tag, float(np.mean(numbers)))
        if self.bc is not None:  # as ML-Agents' SAC: behavioral cloning's passes once per gradient step
            bc_stats: dict[str, list[float]] = defaultdict(list)
            for _ in steps:
                for tag, number in self.bc.update(self.step).items():
                    bc_stats[tag].append(number)
            for tag, numbers in bc_stats.items():
                self.stats.add_stat(tag, float(np.mean(numbers)))
        self.stats.add_stat("Policy/Learning Rate", lr)

    def signal_batches_due(self) -> list[SignalBatch]:
        """The reward signals' minibatches due now, drawn from the replay (each is one step of every
        learned signal, taken after the gradient steps)."""
        hp, out = self.hp, list[SignalBatch]()
        every = hp.reward_signal_steps_per_update or hp.steps_per_update
        while self.streams.learned and (self.step - hp.buffer_init_steps) / (self.signal_update_steps + len(out)) > every:
            out.append(self._signal_batch(self.replay.sample(hp.batch_size, self.rng)))
        return out

    @staticmethod
    def _signal_batch(batch: ReplayBatch) -> SignalBatch:
        return SignalBatch(batch.obs, batch.next_obs, batch.continuous, batch.discrete, batch.dones, batch.rewards)

    def descend_shard(self, message: ReplayShardMessage, rank: int, world: int) -> None:
        """A learner's part of a group update (ml_arl.trainers.sac.grouped)."""
        descend_shard(self, message, rank, world)

    def _gradient_step(self, batch: ReplayBatch, reduce: Optional[Callable[[list[torch.Tensor]], None]] = None,
                       sync: Optional[LearnerSync] = None) -> torch.Tensor:
        """One gradient step of the actor, the critics and the entropy coefficients; returns the
        step's stats (``_stat_names``' values, as one tensor without a graph).

        Every loss is taken at the same parameters, as ML-Agents' three backward passes and
        optimizer steps do; here one backward pass serves all of them, each parameter getting the
        gradient of its own loss only: the actor the policy loss (through Q1's value of its own
        action, with Q1's parameters held fixed), Q1/Q2/V their losses, the entropy coefficients
        theirs. Q2 scores the actor's action without a graph: it only enters the value target."""
        rewards = self.streams.evaluate(self._signal_batch(batch), sync) if self.streams.learned else batch.rewards[:, None] * self._strengths()
        # with memory: the first memory of each sequence (the actor's and V's stored ones, zeros for Q)
        length = self.sequence_length
        actor_mem = value_mem = q_mem = None
        if batch.memories is not None and batch.critic_memories is not None:
            actor_mem, value_mem = batch.memories[::length], batch.critic_memories[::length]
            q_mem = torch.zeros_like(value_mem)
        dist = self.network.distribution(batch.obs, batch.allowed, actor_mem)
        cont_sample = cont_log_probs = None
        if self.n_cont:
            cont_sample, cont_log_probs = dist.sample_continuous()
        disc_log_probs = torch.cat(dist.branch_log_probs(), dim=1) if self.branches else None
        q1_full = self.q1(batch.obs, batch.continuous, q_mem)
        q2_full = self.q2(batch.obs, batch.continuous, q_mem)
        if cont_sample is not None:
            with frozen(self._q1_params):  # the policy's gradient reaches the action, not Q1
                q1_policy = self.q1(batch.obs, cont_sample, q_mem)
            with torch.no_grad():
                q2_policy = self.q2(batch.obs, cont_sample, q_mem)
        else:  # without continuous actions, Q does not depend on the actor's sample
            q1_policy, q2_policy = q1_full.detach(), q2_full.detach()
        if self.branches:
            q1, q2 = condense_q(q1_full, batch.discrete, self.branches), condense_q(q2_full, batch.discrete, self.branches)
        else:
            q1, q2 = q1_full[..., 0], q2_full[..., 0]
        values = self.value_net(batch.obs, None, value_mem)[..., 0]
        with torch.no_grad():
            if value_mem is None:
                target_values = self.target_net(batch.next_obs)[..., 0]
            else:
                target_values = self._sequence_targets(batch, value_mem)
        dones = batch.dones
        if batch.mask is not None:  # padding leaves every loss: the losses over the real rows only
            keep = batch.mask > 0
            q1, q2, target_values, rewards, dones, values = (t[keep] for t in (q1, q2, target_values, rewards, dones, values))
            q1_policy, q2_policy = q1_policy[keep], q2_policy[keep]
            cont_log_probs = None if cont_log_probs is None else cont_log_probs[keep]
            disc_log_probs = None if disc_log_probs is None else disc_log_probs[keep]
        loss = sac_losses(
            q1, q2, target_values, rewards, dones, self.gammas, self.use_dones, values,
            q1_policy, q2_policy, cont_log_probs, disc_log_probs, self.branches,
            self.alphas.cont, self.alphas.disc, self.alphas.target_cont, self.alphas.target_disc,
        )
        for optimizer in self._optimizers:
            optimizer.zero_grad()
        torch.autograd.backward([loss.policy, loss.q1, loss.q2, loss.value, loss.entropy])
        if reduce is not None:  # the learner group's all-reduce of every gradient
            reduce([p for optimizer in self._optimizers for p in optimizer.params])
        Adam.step_all(self._optimizers)
        soft_update(self._value_params, self._target_params, self.hp.tau)
        with torch.no_grad():
            return torch.stack([loss.policy, loss.value, loss.q1, loss.q2, *self.alphas.stats()])

    def _sequence_targets(self, batch: ReplayBatch, value_mem: torch.Tensor) -> torch.Tensor:
        """[S * L, streams]: the target V of each row's next observation, the target running each
        sequence's first observation then its L next observations from V's stored memory before the
        first. (ML-Agents runs V itself over the first observation, then the target from there: the
        same at tau = 1; here the memory stays in one network, which learned tests/trainers/test_memory.py's
        memory task more reliably.)"""
        length = self.sequence_length
        seqs = value_mem.shape[0]
        extended = [
            torch.cat([o.reshape(seqs, length, *o.shape[1:])[:, :1], n.reshape(seqs, length, *n.shape[1:])], dim=1).reshape(-1, *o.shape[1:])
            for o, n in zip(batch.obs, batch.next_obs)
        ]
        out = self.target_net(extended, None, value_mem)[..., 0]
        return out.reshape(seqs, length + 1, -1)[:, 1:].reshape(seqs * length, -1)

    def _strengths(self) -> torch.Tensor:
        """The reward signals' strengths as a tensor (made again if the streams changed)."""
        if self._strengths_of is not self.streams.strengths:
            self._strengths_of = self.streams.strengths
            self._strengths_tensor = torch.as_tensor(self.streams.strengths, device=self.device)
        return self._strengths_tensor

    # ------------------------------------------------------------------ persistence
    def state(self) -> dict[str, Any]:
        return {
            "Policy": self.network.state_dict(),
            "Value": self.value_net.state_dict(),
            "TargetValue": self.target_net.state_dict(),
            "Q1": self.q1.state_dict(),
            "Q2": self.q2.state_dict(),
            "LogEntropyCoef": self.alphas.state(),
            "Optimizer": {
                "policy": self.policy_optimizer.state_dict(),
                "value": self.value_optimizer.state_dict(),
                "entropy": self.entropy_optimizer.state_dict(),
            },
            "global_step": self.step,
            "policy_version": self.policy_version,
            "update_steps": self.update_steps,
            "signal_update_steps": self.signal_update_steps,
            "RewardSignals": self.streams.state(),
            "BehavioralCloning": self.bc.state() if self.bc is not None else {},
        }

    def load_state(self, state: dict[str, Any], resume: bool) -> None:
        self.network.load_state_dict(state["Policy"])
        self.value_net.load_state_dict(state["Value"])
        self.target_net.load_state_dict(state["TargetValue"])
        self.q1.load_state_dict(state["Q1"])
        self.q2.load_state_dict(state["Q2"])
        self.streams.load_state(state.get("RewardSignals"))
        self.alphas.load_state(state["LogEntropyCoef"])
        if resume:
            optimizers = state["Optimizer"]
            self.policy_optimizer.load_state_dict(optimizers["policy"])
            self.value_optimizer.load_state_dict(optimizers["value"])
            self.entropy_optimizer.load_state_dict(optimizers["entropy"])
            self.step = int(state["global_step"])
            self.policy_version = int(state.get("policy_version", 0))
            self.update_steps = int(state.get("update_steps", 1))
            self.signal_update_steps = int(state.get("signal_update_steps", 1))
            if self.bc is not None:
                self.bc.load_state(state.get("BehavioralCloning"))

    def load(self, path: str, resume: bool) -> None:
        super().load(path, resume)
        if resume and self.hp.save_replay_buffer:
            buffer_path = os.path.join(os.path.dirname(path), REPLAY_BUFFER_FILE)
            if os.path.isfile(buffer_path):
                self.replay.load(buffer_path)
            else:
                logger.warning("%s: no saved replay buffer; it refills from new experience", buffer_path)

    def save_checkpoint(self, final: bool = False) -> Optional[str]:
        path = super().save_checkpoint(final)
        if path is not None and self.checkpoints is not None and self.hp.save_replay_buffer:
            self.replay.save(os.path.join(self.checkpoints.folder, REPLAY_BUFFER_FILE))
        return path

    def onnx_actor(self) -> ActorCritic:
        return self.network
