"""Embedded SQLite results store: one ``results/<run-id>/results.sqlite`` per run, the default.

Rows are buffered (``ml_arl.results.store_buffer``) and written in one transaction per batch.
``--resume`` reopens the same file and appends. ``read_results`` is the read side used by
``arl-report``. For a store that many runs and machines share, see ``ml_arl.results.server_store``.

A killed run loses at most the rows still buffered: the database is in WAL mode, and SQLite rolls
back an unfinished transaction the next time the file is opened (``--resume``, ``arl-report``).
A write that fails (disk full, read-only folder) raises StoreError, one line.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from typing import Optional

from ml_arl.core.one_line import squeeze
from ml_arl.results.run_results import (
    EPISODE_COLUMNS,
    PHASE_COLUMNS,
    RunResults,
    StoreError,
    StoreReadError,
    group_episodes,
)
from ml_arl.results.store_buffer import WRITE_HINT, BufferedStore, EpisodeRow, PhaseRow, StepRow

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
_SELECT_PHASES = f"SELECT {', '.join(PHASE_COLUMNS)} FROM phases ORDER BY idx, wall_time"
_SELECT_EPISODES = f"SELECT {', '.join(EPISODE_COLUMNS)} FROM episodes ORDER BY id"

__all__ = ["STORE_FILENAME", "ResultsStore", "StoreError", "StoreReadError", "read_results"]


class ResultsStore(BufferedStore):
    """Buffered writer for one run's ``results.sqlite``."""

    def __init__(self, path: str, run_id: str, batch_size: int = 256, record_steps: bool = False):
        super().__init__(run_id, batch_size, record_steps)
        self.path = self.where = path
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._conn = sqlite3.connect(path, check_same_thread=False)
        except (OSError, sqlite3.Error) as err:
            raise StoreError(f"cannot open results database {path}: {squeeze(err)}; {WRITE_HINT}") from err
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
            raise StoreError(f"cannot open results database {path}: {squeeze(err)}; {WRITE_HINT}") from err
        if row is None or str(row[0]) != str(SCHEMA_VERSION):
            self._conn.close()
            raise StoreError(
                f"results database {path} has schema version {row and row[0]}, this ml_arl writes {SCHEMA_VERSION}; "
                "start a new run (--run-id) instead of --resume"
            )
        logger.debug("Results store %s opened (run %s)", path, run_id)

    def _write(self, episodes: list[EpisodeRow], steps: list[StepRow], phases: list[PhaseRow]) -> None:
        try:
            with self._conn:  # one transaction; rolled back on any exception (Ctrl-C included)
                if episodes:
                    self._conn.executemany(_INSERT_EPISODE, episodes)
                if steps:
                    self._conn.executemany(_INSERT_STEP, steps)
                if phases:
                    self._conn.executemany(_UPSERT_PHASE, phases)
        except sqlite3.Error as err:
            raise StoreError(f"cannot write results to {self.path}: {squeeze(err)}") from err

    def _written(self, phase: Optional[str], behavior: Optional[str]) -> int:
        sql, args = "SELECT COUNT(*) FROM episodes WHERE run = ?", [self.run_id]
        if phase is not None:
            sql, args = sql + " AND phase = ?", [*args, phase]
        if behavior is not None:
            sql, args = sql + " AND behavior = ?", [*args, behavior]
        try:
            return int(self._conn.execute(sql, args).fetchone()[0])
        except sqlite3.Error as err:
            raise StoreError(f"cannot read {self.path}: {squeeze(err)}") from err

    def _disconnect(self) -> None:
        self._conn.close()


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
        phase_rows = conn.execute(_SELECT_PHASES).fetchall()
        rows = conn.execute(_SELECT_EPISODES).fetchall()
    except sqlite3.DatabaseError as err:
        raise StoreReadError(f"{path} is not a readable SQLite database ({squeeze(err)}); pass results/<run-id>/{STORE_FILENAME}") from err
    finally:
        conn.close()
    return group_episodes(path, phase_rows, rows)
