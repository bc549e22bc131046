"""Embedded SQLite results store: one ``results/<run-id>/results.sqlite`` per run.

Rows are buffered in memory and written in one transaction per batch (``batch_size`` rows, ``flush()``
or ``close()``). ``--resume`` reopens the same file and appends. ``read_results`` is the read side
used by ``arl-report``.

A killed run loses at most the rows still buffered: the database is in WAL mode, and SQLite rolls
back an unfinished transaction the next time the file is opened (``--resume``, ``arl-report``).
A write that fails (disk full, read-only folder) raises StoreError, one line.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from ml_arl.core.exceptions import ArlError
from ml_arl.core.one_line import squeeze

logger = logging.getLogger("ml_arl")

STORE_FILENAME = "results.sqlite"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS episodes (
    id INTEGER PRIMARY KEY, run TEXT, phase TEXT, mode TEXT, behavior TEXT, agent TEXT, worker INTEGER,
    episode INTEGER, length INTEGER, env_reward REAL, objective REAL, elo REAL NULL, wall_time REAL,
    policy TEXT NULL);
CREATE INDEX IF NOT EXISTS episodes_run_phase_behavior ON episodes (run, phase, behavior);
CREATE TABLE IF NOT EXISTS steps (
    run TEXT, phase TEXT, behavior TEXT, agent TEXT, worker INTEGER, episode INTEGER, step INTEGER,
    env_reward REAL, objective REAL);
CREATE INDEX IF NOT EXISTS steps_run_phase_behavior ON steps (run, phase, behavior, episode);
CREATE TABLE IF NOT EXISTS phases (
    run TEXT, phase TEXT, idx INTEGER, mode TEXT, state TEXT, wall_time REAL, PRIMARY KEY (run, phase));
-- palaestrAI's store tables by their names, for queries written against palaestrAI (docs/palaestrai.md)
CREATE VIEW IF NOT EXISTS experiment_run_phases AS
    SELECT run AS experiment_run_uid, phase AS uid, idx AS number, mode, state FROM phases;
CREATE VIEW IF NOT EXISTS muscle_actions AS
    SELECT run AS experiment_run_uid, phase AS experiment_run_phase, behavior AS agent_name, agent AS rollout_worker_uid,
           episode, step, env_reward AS reward, objective FROM steps;
CREATE VIEW IF NOT EXISTS muscles_cumulative_objective AS
    SELECT run AS experiment_run_uid, phase AS experiment_run_phase, mode, behavior AS agent_name,
           agent AS rollout_worker_uid, episode, objective AS cumulative_objective, env_reward AS cumulative_reward,
           length FROM episodes;
"""
_INSERT_EPISODE = (
    "INSERT INTO episodes (run, phase, mode, behavior, agent, worker, episode, length, env_reward, objective, elo,"
    " wall_time, policy) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_STEP = "INSERT INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
_UPSERT_PHASE = (
    "INSERT INTO phases (run, phase, idx, mode, state, wall_time) VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (run, phase) DO UPDATE SET idx = excluded.idx, mode = excluded.mode, state = excluded.state,"
    " wall_time = excluded.wall_time"
)


class StoreError(ArlError):
    """The results database could not be opened or written (disk full, permissions, ...)."""

    exit_code = 1


class StoreReadError(StoreError):
    """The results database is missing, empty or not an ml_arl results database."""

    exit_code = 2



_WRITE_HINT = "check that the disk has space and the results folder is writable, then continue with --resume"


class ResultsStore:
    """Buffered writer for one run's results database. Use from one thread; ``close()`` is idempotent."""

    def __init__(self, path: str, run_id: str, batch_size: int = 256, record_steps: bool = False):
        self.path = path
        self.run_id = run_id
        self.batch_size = max(1, batch_size)
        self.steps_enabled = record_steps
        self._episodes: list[tuple[Any, ...]] = []
        self._steps: list[tuple[Any, ...]] = []
        self._phases: list[tuple[Any, ...]] = []
        self._lock = threading.RLock()
        self._closed = False
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._conn = sqlite3.connect(path, check_same_thread=False)
        except (OSError, sqlite3.Error) as err:
            raise StoreError(f"cannot open results database {path}: {squeeze(err)}; {_WRITE_HINT}") from err
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA busy_timeout=5000")
            with self._conn:
                self._conn.executescript(_SCHEMA)
                columns = {row[1] for row in self._conn.execute("PRAGMA table_info(episodes)")}
                if "policy" not in columns:  # a database written before fixed policies (--resume): the column is added
                    self._conn.execute("ALTER TABLE episodes ADD COLUMN policy TEXT NULL")
                self._conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.Error as err:
            self._conn.close()
            raise StoreError(f"cannot open results database {path}: {squeeze(err)}; {_WRITE_HINT}") from err
        if row is None or str(row[0]) != str(SCHEMA_VERSION):
            self._conn.close()
            raise StoreError(
                f"results database {path} has schema version {row and row[0]}, this ml_arl writes {SCHEMA_VERSION}; "
                "start a new run (--run-id) instead of --resume"
            )
        logger.debug("Results store %s opened (run %s)", path, run_id)

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
                with self._conn:  # one transaction; rolled back on any exception (Ctrl-C included)
                    if n_ep:
                        self._conn.executemany(_INSERT_EPISODE, self._episodes[:n_ep])
                    if n_st:
                        self._conn.executemany(_INSERT_STEP, self._steps[:n_st])
                    if n_ph:
                        self._conn.executemany(_UPSERT_PHASE, self._phases[:n_ph])
            except sqlite3.Error as err:
                # Drop the batch so that a flush/close in a ``finally`` does not fail on it a second time.
                self._clear(n_ep, n_st, n_ph)
                raise StoreError(
                    f"cannot write results to {self.path}: {squeeze(err)} ({n_ep + n_st + n_ph} rows lost); {_WRITE_HINT}"
                ) from err
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
                self._conn.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def episode_count(self, phase: Optional[str] = None, behavior: Optional[str] = None) -> int:
        """Episodes of this run recorded so far (written or still buffered), optionally filtered."""
        if self._closed:
            raise StoreError(f"results database {self.path} is closed")
        buffered = sum(
            1 for row in self._episodes if (phase is None or row[1] == phase) and (behavior is None or row[3] == behavior)
        )
        sql, args = "SELECT COUNT(*) FROM episodes WHERE run = ?", [self.run_id]
        if phase is not None:
            sql, args = sql + " AND phase = ?", [*args, phase]
        if behavior is not None:
            sql, args = sql + " AND behavior = ?", [*args, behavior]
        try:
            written = int(self._conn.execute(sql, args).fetchone()[0])
        except sqlite3.Error as err:
            raise StoreError(f"cannot read {self.path}: {squeeze(err)}") from err
        return written + buffered


# ---------------------------------------------------------------------------------------------- read side


@dataclass
class EpisodeSeries:
    """The episodes of one behavior in one phase, in the order they were recorded."""

    phase: str
    mode: str
    behavior: str
    length: list[int] = field(default_factory=list)
    env_reward: list[float] = field(default_factory=list)
    objective: list[float] = field(default_factory=list)
    elo: list[Optional[float]] = field(default_factory=list)
    wall_time: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.length)

    @property
    def final_elo(self) -> Optional[float]:
        return next((e for e in reversed(self.elo) if e is not None), None)


@dataclass
class PhaseInfo:
    phase: str
    index: Optional[int]  # None: the phase has episodes but no row in ``phases``
    mode: str
    state: str


@dataclass
class RunResults:
    path: str
    runs: list[str]
    phases: list[PhaseInfo]  # recorded order (idx), then order of first appearance
    series: list[EpisodeSeries]  # phase order, then behaviors in order of first appearance

    @property
    def behaviors(self) -> list[str]:
        return list(dict.fromkeys(s.behavior for s in self.series))

    @property
    def episode_count(self) -> int:
        return sum(len(s) for s in self.series)


def read_results(path: str) -> RunResults:
    """Read every episode of the database at ``path`` (read-only), grouped by (phase, behavior).

    Raises StoreReadError (exit code 2) when the file is missing, not SQLite or not a results database.
    """
    if not os.path.isfile(path):
        raise StoreReadError(f"{path}: no such file")
    try:
        with open(path, "rb") as f:
            header = f.read(16)
    except OSError as err:
        raise StoreReadError(f"cannot read {path}: {err.strerror or err}") from err
    if header != b"SQLite format 3\x00":
        raise StoreReadError(f"{path} is not a SQLite database; pass results/<run-id>/{STORE_FILENAME}")
    try:
        conn = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
    except sqlite3.Error as err:
        raise StoreReadError(f"cannot open {path}: {squeeze(err)}") from err
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"episodes", "phases"} <= tables:
            raise StoreReadError(f"{path} is a SQLite file but not an ml_arl results database (no episodes table)")
        phase_rows = conn.execute("SELECT phase, idx, mode, state FROM phases ORDER BY idx, wall_time").fetchall()
        rows = conn.execute(
            "SELECT run, phase, mode, behavior, length, env_reward, objective, elo, wall_time FROM episodes ORDER BY id"
        ).fetchall()
    except sqlite3.DatabaseError as err:
        raise StoreReadError(f"{path} is not a readable SQLite database ({squeeze(err)}); pass results/<run-id>/{STORE_FILENAME}") from err
    finally:
        conn.close()

    recorded = {p: PhaseInfo(p, idx, mode, state) for p, idx, mode, state in phase_rows}
    groups: dict[tuple[str, str], EpisodeSeries] = {}
    first_seen: dict[str, int] = {}
    runs: dict[str, None] = {}
    for i, (run, phase, mode, behavior, length, env_reward, objective, elo, wall_time) in enumerate(rows):
        runs[run] = None
        first_seen.setdefault(phase, i)
        series = groups.get((phase, behavior))
        if series is None:
            mode = recorded[phase].mode if phase in recorded else mode
            series = groups[(phase, behavior)] = EpisodeSeries(phase, mode, behavior)
        series.length.append(length)
        series.env_reward.append(env_reward)
        series.objective.append(objective)
        series.elo.append(elo)
        series.wall_time.append(wall_time)

    inf = len(rows) + len(recorded) + 1

    def order(phase: str) -> tuple[int, int]:
        info = recorded.get(phase)
        index = info.index if info is not None and info.index is not None else inf
        return (index, first_seen.get(phase, inf))

    phase_names = sorted(set(recorded) | set(first_seen), key=order)
    phases = [recorded.get(p) or PhaseInfo(p, None, _phase_mode(groups, p), "") for p in phase_names]
    rank = {p: i for i, p in enumerate(phase_names)}
    series_list = sorted(groups.values(), key=lambda s: rank[s.phase])  # stable: behaviors keep first appearance
    return RunResults(path=path, runs=list(runs), phases=phases, series=series_list)


def _phase_mode(groups: dict[tuple[str, str], EpisodeSeries], phase: str) -> str:
    return next((s.mode for (p, _), s in groups.items() if p == phase), "")
