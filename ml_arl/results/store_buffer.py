"""The write side both results stores share: rows buffered in memory and written in one
transaction per batch (``batch_size`` rows, ``flush()`` or ``close()``).

A backend (``ml_arl.results.sqlite_store.ResultsStore``, ``ml_arl.results.server_store.ServerStore``)
writes a batch in ``_write`` (one transaction, rolled back whole on any error, raising StoreError
with the cause), counts written rows in ``_written`` and lets go of its connection in ``_disconnect``.
A batch that fails is dropped, so that a flush or close in a ``finally`` does not fail on it again.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Optional

from ml_arl.results.run_results import StoreError

EpisodeRow = tuple[Any, ...]  # run, phase, mode, behavior, agent, worker, episode, length, env_reward, objective, elo, wall_time, policy
StepRow = tuple[Any, ...]  # run, phase, behavior, agent, worker, episode, step, env_reward, objective
PhaseRow = tuple[Any, ...]  # run, phase, idx, mode, state, wall_time

WRITE_HINT = "check that the disk has space and the results folder is writable, then continue with --resume"


class BufferedStore:
    """Buffered writer for one run's results. Use from one thread; ``close()`` is idempotent."""

    where = ""  # the database, for messages (a path, or a URL with its password hidden)
    hint = WRITE_HINT  # what to do when a write fails

    def __init__(self, run_id: str, batch_size: int, record_steps: bool):
        self.run_id = run_id
        self.batch_size = max(1, batch_size)
        self.steps_enabled = record_steps
        self._episodes: list[EpisodeRow] = []
        self._steps: list[StepRow] = []
        self._phases: list[PhaseRow] = []
        self._lock = threading.RLock()
        self._closed = False

    # ------------------------------------------------------------------ what a backend does
    def _write(self, episodes: list[EpisodeRow], steps: list[StepRow], phases: list[PhaseRow]) -> None:
        raise NotImplementedError

    def _written(self, phase: Optional[str], behavior: Optional[str]) -> int:
        raise NotImplementedError

    def _disconnect(self) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ rows
    @property
    def pending(self) -> int:
        """Rows buffered in memory, not yet in the database."""
        return len(self._episodes) + len(self._steps) + len(self._phases)

    def record_episode(
        self, *, phase: str, mode: str, behavior: str, agent: str, worker: int, episode: int, length: int,
        env_reward: float, objective: float, elo: Optional[float], wall_time: float, policy: Optional[str] = None,
    ) -> None:
        """One finished episode; ``policy``: the fixed policy that played it (None: the behavior's own brain)."""
        self._episodes.append((
            self.run_id, phase, mode, behavior, agent, int(worker), int(episode), int(length), float(env_reward),
            float(objective), None if elo is None else float(elo), float(wall_time), policy,
        ))
        self._maybe_flush()

    def record_steps(
        self, *, phase: str, behavior: str, agent: str, worker: int, episode: int, first_step: int,
        env_rewards: Sequence[float], objectives: Sequence[float],
    ) -> None:
        """Per-step rewards of one agent; a no-op unless the store was opened with ``record_steps=True``."""
        if not self.steps_enabled:
            return
        if len(env_rewards) != len(objectives):
            raise ValueError(f"record_steps: {len(env_rewards)} env rewards but {len(objectives)} objectives")
        head = (self.run_id, phase, behavior, agent, int(worker), int(episode))
        self._steps.extend(
            (*head, first_step + i, float(r), float(o)) for i, (r, o) in enumerate(zip(env_rewards, objectives))
        )
        self._maybe_flush()

    def record_phase(self, *, phase: str, index: int, mode: str, state: str, wall_time: float) -> None:
        """Insert or update the row of ``phase`` (one per run and phase)."""
        self._phases.append((self.run_id, phase, int(index), mode, state, float(wall_time)))
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if self.pending >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows in one transaction. A failed batch is dropped and raises StoreError."""
        with self._lock:
            if self._closed or not self.pending:
                return
            n_ep, n_st, n_ph = len(self._episodes), len(self._steps), len(self._phases)
            try:
                self._write(self._episodes[:n_ep], self._steps[:n_st], self._phases[:n_ph])
            except StoreError as err:
                self._clear(n_ep, n_st, n_ph)
                raise StoreError(f"{err} ({n_ep + n_st + n_ph} rows lost); {self.hint}") from err
            self._clear(n_ep, n_st, n_ph)  # only now: an interrupted batch stays buffered for close()

    def _clear(self, n_ep: int, n_st: int, n_ph: int) -> None:
        del self._episodes[:n_ep], self._steps[:n_st], self._phases[:n_ph]

    def close(self) -> None:
        """Flush and close; safe to call more than once and from a ``finally``."""
        with self._lock:
            if self._closed:
                return
            try:
                self.flush()
            finally:
                self._closed = True
                self._disconnect()

    def __enter__(self) -> BufferedStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def episode_count(self, phase: Optional[str] = None, behavior: Optional[str] = None) -> int:
        """Episodes of this run recorded so far (written or still buffered), optionally filtered."""
        if self._closed:
            raise StoreError(f"results database {self.where} is closed")
        buffered = sum(
            1 for row in self._episodes if (phase is None or row[1] == phase) and (behavior is None or row[3] == behavior)
        )
        return self._written(phase, behavior) + buffered
