"""SAC's replay buffer: the newest ``capacity`` experiences as preallocated torch tensors (a
ring), sampled uniformly. It can be written next to a checkpoint and read back on --resume
(``save_replay_buffer``), as one .npz file replaced atomically.

With memory (``memory_size`` > 0) each step also keeps the actor's memory before it (as the worker
acted), the value network's memory before its sequence (recorded by the trainer when the
trajectory arrived; ML-Agents' critic memories), and its place in its trajectory. ``sample_sequences`` then draws whole sequences as
ML-Agents' SAC does: a sequence starts at a trajectory's first step or ``sequence_length`` steps
after a start (ML-Agents' sequence starts in its padded buffer), runs ``sequence_length`` steps
and never crosses into another trajectory: the steps past its trajectory's end are padding (the
trajectory's last step again) with mask 0. A trajectory whose oldest steps the ring overwrote
keeps its surviving sequences, each with its stored memories."""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ml_arl.core.atomic_files import atomic_write
from ml_arl.core.experience import Trajectory

logger = logging.getLogger(__name__)


@dataclass
class ReplayBatch:
    obs: list[torch.Tensor]
    next_obs: list[torch.Tensor]
    allowed: Optional[torch.Tensor]  # [B, sum(branches)] masks of obs; None without discrete actions
    continuous: torch.Tensor  # [B, n_cont] as stored (SAC: tanh-squashed)
    discrete: torch.Tensor  # [B, n_branches] int64
    rewards: torch.Tensor  # [B] the behavior's objective
    dones: torch.Tensor  # [B] 1.0 where the episode terminated after this step (not a max-step cut)
    # sequences (``sample_sequences``): B = S * sequence_length rows, row s * L + j step j of sequence s
    memories: Optional[torch.Tensor] = None  # [B, memory_size] the actor's memory before each step
    critic_memories: Optional[torch.Tensor] = None  # [B, memory_size] the value network's memory before each step's sequence
    mask: Optional[torch.Tensor] = None  # [B] 1.0 for a step, 0.0 for padding

    def __len__(self) -> int:
        return int(self.rewards.shape[0])


class ReplayBuffer:
    def __init__(
        self, capacity: int, obs_shapes: list[tuple[int, ...]], n_cont: int, branches: tuple[int, ...], device: torch.device,
        memory_size: int = 0, sequence_length: int = 1,
    ):
        self.capacity = capacity
        self.sequence_length = sequence_length
        self.device = device
        self.size = 0
        self.next = 0  # where the next experience goes
        self.obs = [torch.zeros((capacity, *shape), dtype=torch.float32, device=device) for shape in obs_shapes]
        self.next_obs = [torch.zeros((capacity, *shape), dtype=torch.float32, device=device) for shape in obs_shapes]
        self.allowed = torch.ones((capacity, sum(branches)), dtype=torch.bool, device=device) if branches else None
        self.continuous = torch.zeros((capacity, n_cont), dtype=torch.float32, device=device)
        self.discrete = torch.zeros((capacity, len(branches)), dtype=torch.int64, device=device)
        self.rewards = torch.zeros(capacity, dtype=torch.float32, device=device)
        self.dones = torch.zeros(capacity, dtype=torch.float32, device=device)
        self.memories: Optional[torch.Tensor] = None
        self.critic_memories: Optional[torch.Tensor] = None
        self.place = torch.zeros(0, dtype=torch.int64, device=device)
        self.left = torch.zeros(0, dtype=torch.int64, device=device)
        if memory_size:
            self.memories = torch.zeros((capacity, memory_size), dtype=torch.float32, device=device)
            self.critic_memories = torch.zeros((capacity, memory_size), dtype=torch.float32, device=device)
            self.place = torch.zeros(capacity, dtype=torch.int64, device=device)  # the step's index in its trajectory
            self.left = torch.zeros(capacity, dtype=torch.int64, device=device)  # steps from it to its trajectory's end, itself included
        self._starts: Optional[torch.Tensor] = None  # the stored sequence starts (made again after an add)

    def __len__(self) -> int:
        return self.size

    def _fields(self) -> dict[str, torch.Tensor]:
        fields = {f"obs_{i}": o for i, o in enumerate(self.obs)}
        fields.update({f"next_obs_{i}": o for i, o in enumerate(self.next_obs)})
        if self.allowed is not None:
            fields["allowed"] = self.allowed
        fields.update(continuous=self.continuous, discrete=self.discrete, rewards=self.rewards, dones=self.dones)
        if self.memories is not None and self.critic_memories is not None:
            fields.update(memories=self.memories, critic_memories=self.critic_memories, place=self.place, left=self.left)
        return fields

    def add(self, traj: Trajectory, critic_memories: Optional[np.ndarray] = None) -> None:
        """One trajectory's steps: s' of step t is the observation of t + 1 (``next_obs`` after the
        last); done only where the episode terminated: a max-step cut bootstraps from the episode's
        last observation (ML-Agents 1.1.0's SAC bootstraps it too, from the step's own observation,
        which it copies over s'; the true last observation is the right one).
        With memory: ``traj.memories`` and ``critic_memories`` [T, memory_size], the value network's
        memory before each step's sequence."""
        n = len(traj)
        if n == 0:
            return
        terminal = traj.done and not traj.interrupted
        next_obs = [np.concatenate([o[1:], nxt[None]]) for o, nxt in zip(traj.obs, traj.next_obs)]
        dones = np.zeros(n, np.float32)
        dones[-1] = 1.0 if terminal else 0.0
        rows: dict[str, np.ndarray] = {f"obs_{i}": o for i, o in enumerate(traj.obs)}
        rows.update({f"next_obs_{i}": o for i, o in enumerate(next_obs)})
        if self.allowed is not None and traj.allowed is not None:
            rows["allowed"] = traj.allowed
        rows.update(continuous=traj.continuous, discrete=traj.discrete, rewards=traj.rewards, dones=dones)
        if self.memories is not None:
            if traj.memories is None or critic_memories is None:
                raise ValueError("a replay buffer with memory needs the trajectory's memories and the critic's")
            rows.update(memories=traj.memories, critic_memories=critic_memories, place=np.arange(n), left=n - np.arange(n))
        self._starts = None
        if n > self.capacity:  # only the newest fit
            rows = {k: v[-self.capacity :] for k, v in rows.items()}
            n = self.capacity
        idx = (self.next + torch.arange(n)) % self.capacity
        fields = self._fields()
        for key, values in rows.items():
            target = fields[key]
            fields[key][idx] = torch.as_tensor(np.asarray(values), device=self.device).to(target.dtype)
        self.next = (self.next + n) % self.capacity
        self.size = min(self.capacity, self.size + n)

    def sample(self, batch_size: int, rng: np.random.Generator) -> ReplayBatch:
        """``batch_size`` steps drawn uniformly."""
        return self._rows(torch.as_tensor(rng.integers(0, self.size, batch_size), device=self.device))

    def _rows(self, idx: torch.Tensor) -> ReplayBatch:
        return ReplayBatch(
            obs=[o[idx] for o in self.obs],
            next_obs=[o[idx] for o in self.next_obs],
            allowed=None if self.allowed is None else self.allowed[idx],
            continuous=self.continuous[idx],
            discrete=self.discrete[idx],
            rewards=self.rewards[idx],
            dones=self.dones[idx],
        )

    def sequence_starts(self) -> torch.Tensor:
        """The rows where a sequence may start: a trajectory's step whose place in it is a multiple of ``sequence_length``."""
        if self._starts is None:
            self._starts = torch.nonzero(self.place[: self.size] % self.sequence_length == 0).flatten()
        return self._starts

    def sequence_rows(self, starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """For sequences starting at rows ``starts`` [S]: the row of each of their steps [S * L]
        (padding repeats the trajectory's last stored step) and the mask [S * L] (1.0 for a step)."""
        steps = torch.arange(self.sequence_length, device=self.device)
        left = self.left[starts][:, None]
        mask = steps[None, :] < left
        rows = (starts[:, None] + torch.minimum(steps[None, :], left - 1)) % self.capacity
        return rows.reshape(-1), mask.reshape(-1).float()

    def sample_sequences(self, n_sequences: int, rng: np.random.Generator) -> ReplayBatch:
        """``n_sequences`` sequences drawn uniformly from the stored sequence starts (see the module)."""
        assert self.memories is not None and self.critic_memories is not None, "sequences need a buffer with memory"
        starts = self.sequence_starts()
        picks = starts[torch.as_tensor(rng.integers(0, len(starts), n_sequences), device=self.device)]
        idx, mask = self.sequence_rows(picks)
        batch = self._rows(idx)
        batch.memories, batch.critic_memories, batch.mask = self.memories[idx], self.critic_memories[idx], mask
        return batch

    # ------------------------------------------------------------------ persistence
    def nbytes(self) -> int:
        return sum(t[: self.size].numel() * t.element_size() for t in self._fields().values())

    def save(self, path: str) -> None:
        """The stored experiences, oldest first, as one .npz (temp file, then rename)."""
        order = (torch.arange(self.size) + (self.next if self.size == self.capacity else 0)) % self.capacity
        arrays = {k: v[order].cpu().numpy() for k, v in self._fields().items()}

        def write(f: io.BufferedWriter) -> None:
            np.savez(f, allow_pickle=False, **arrays)

        atomic_write(path, write)
        logger.info("Saved replay buffer (%d experiences, %.3g MB) to %s", self.size, self.nbytes() / 1e6, path)

    def load(self, path: str) -> None:
        """Read ``save``'s file; a missing, damaged or mismatched file leaves the buffer empty, with a warning."""
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except Exception as err:  # noqa: BLE001 - numpy and zipfile raise many kinds for damaged bytes; all mean "unreadable"
            logger.warning("%s: replay buffer not restored (%s: %s); it refills from new experience", path, type(err).__name__, err)
            return
        try:
            fields = self._fields()
            if set(arrays) != set(fields):
                raise ValueError(f"it holds {sorted(arrays)}, this behavior needs {sorted(fields)}")
            rows = {int(a.shape[0]) if a.ndim else -1 for a in arrays.values()}
            if len(rows) != 1 or -1 in rows:
                raise ValueError("its arrays differ in length")
            n = min(rows.pop(), self.capacity)
            newest = {key: values[-n:] if n else values[:0] for key, values in arrays.items()}
            for key, target in fields.items():
                values = newest[key]
                if values.dtype.kind not in "biuf":
                    raise ValueError(f"{key} holds {values.dtype} values, not numbers")
                if tuple(values.shape[1:]) != tuple(target.shape[1:]):
                    raise ValueError(f"{key} has shape {values.shape[1:]}, this behavior needs {tuple(target.shape[1:])}")
            for key, target in fields.items():  # checked whole before any is copied
                target[:n] = torch.as_tensor(newest[key], device=self.device).to(target.dtype)
        except ValueError as err:
            logger.warning("%s: replay buffer not restored (%s); it refills from new experience", path, err)
            return
        self.size = n
        self.next = n % self.capacity
        self._starts = None
        logger.info("Restored replay buffer (%d experiences, %.3g MB) from %s", n, self.nbytes() / 1e6, path)
