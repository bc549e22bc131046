"""SAC's replay buffer: the newest ``capacity`` experiences as preallocated torch tensors (a
ring), sampled uniformly. It can be written next to a checkpoint and read back on --resume
(``save_replay_buffer``), as one .npz file replaced atomically."""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ml_arl.atomic_files import atomic_write
from ml_arl.messages import Trajectory

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

    def __len__(self) -> int:
        return int(self.rewards.shape[0])


class ReplayBuffer:
    def __init__(self, capacity: int, obs_shapes: list[tuple[int, ...]], n_cont: int, branches: tuple[int, ...], device: torch.device):
        self.capacity = capacity
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

    def __len__(self) -> int:
        return self.size

    def _fields(self) -> dict[str, torch.Tensor]:
        fields = {f"obs_{i}": o for i, o in enumerate(self.obs)}
        fields.update({f"next_obs_{i}": o for i, o in enumerate(self.next_obs)})
        if self.allowed is not None:
            fields["allowed"] = self.allowed
        fields.update(continuous=self.continuous, discrete=self.discrete, rewards=self.rewards, dones=self.dones)
        return fields

    def add(self, traj: Trajectory) -> None:
        """One trajectory's steps: s' of step t is the observation of t + 1 (``next_obs`` after the
        last); done only where the episode terminated (a max-step cut bootstraps, as ML-Agents)."""
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
        idx = torch.as_tensor(rng.integers(0, self.size, batch_size), device=self.device)
        return ReplayBatch(
            obs=[o[idx] for o in self.obs],
            next_obs=[o[idx] for o in self.next_obs],
            allowed=None if self.allowed is None else self.allowed[idx],
            continuous=self.continuous[idx],
            discrete=self.discrete[idx],
            rewards=self.rewards[idx],
            dones=self.dones[idx],
        )

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
        logger.info("Restored replay buffer (%d experiences, %.3g MB) from %s", n, self.nbytes() / 1e6, path)
