"""A results store that many runs and machines share: the tables and palaestrAI views of
``results.sqlite`` (ml_arl.results.sqlite_store) in one PostgreSQL database, through SQLAlchemy
(``--store postgresql://user@host:port/db`` or ``results_store.url``). Every row names its run, so
the runs of a study on a Ray cluster, each on its own machine, write into the same tables, and
``arl-report`` and ``arl-study`` read each run back by its id.

- The schema is created on first use, under a transaction-level advisory lock: runs that start
  at the same moment do not race to create it.
- A run id the store already holds is refused unless the run resumes (``--resume`` appends) or is
  replaced (``--force`` deletes its rows first), as a results folder is.
- Writes are batched as in SQLite: one transaction per batch, rolled back whole if it fails.
- Every wait has a deadline: connecting (``CONNECT_TIMEOUT_S``) and each statement
  (``STATEMENT_TIMEOUT_S``). A password never sits in the URL (settings refuse it): libpq takes it
  from PGPASSWORD or ~/.pgpass.

SQLAlchemy and psycopg2 are imported only here, so a run with the SQLite default never loads them.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from ml_arl.core.one_line import squeeze
from ml_arl.results.run_results import (
    EPISODE_COLUMNS,
    PHASE_COLUMNS,
    RunResults,
    StoreError,
    StoreReadError,
    group_episodes,
)
from ml_arl.results.store_buffer import BufferedStore, EpisodeRow, PhaseRow, StepRow

logger = logging.getLogger("ml_arl")

SCHEMA_VERSION = 1  # the same tables as results.sqlite's schema 1
CONNECT_TIMEOUT_S = 10
STATEMENT_TIMEOUT_S = 120
_SCHEMA_LOCK = 0x61726C73  # "arls": the advisory lock that serialises creating the schema

_VIEWS = (
    "CREATE OR REPLACE VIEW experiment_run_phases AS"
    " SELECT run AS experiment_run_uid, phase AS uid, idx AS number, mode, state FROM phases",
    "CREATE OR REPLACE VIEW muscle_actions AS"
    " SELECT run AS experiment_run_uid, phase AS experiment_run_phase, behavior AS agent_name,"
    " agent AS rollout_worker_uid, episode, step, env_reward AS reward, objective FROM steps",
    "CREATE OR REPLACE VIEW muscles_cumulative_objective AS"
    " SELECT run AS experiment_run_uid, phase AS experiment_run_phase, mode, behavior AS agent_name,"
    " agent AS rollout_worker_uid, episode, objective AS cumulative_objective, env_reward AS cumulative_reward,"
    " length FROM episodes",
)
_EPISODE_FIELDS = ("run", "phase", "mode", "behavior", "agent", "worker", "episode", "length", "env_reward", "objective",
                   "elo", "wall_time", "policy")
_STEP_FIELDS = ("run", "phase", "behavior", "agent", "worker", "episode", "step", "env_reward", "objective")
_PHASE_FIELDS = ("run", "phase", "idx", "mode", "state", "wall_time")


def shown(url: str) -> str:
    """``url`` for messages and logs: the password (if any) hidden."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: show nothing of its user part
        head, _, tail = url.partition("://")
        return f"{head}://{tail.rpartition('@')[2]}"


def _reason(err: BaseException) -> str:
    """The driver's own message (SQLAlchemy's wraps it with the SQL and a link), one line."""
    return squeeze(getattr(err, "orig", None) or err)


def _schema() -> Any:
    """The tables of results.sqlite, typed for PostgreSQL (REAL there is 4 bytes: DOUBLE PRECISION)."""
    import sqlalchemy as sa

    md = sa.MetaData()
    sa.Table("meta", md, sa.Column("key", sa.Text, primary_key=True), sa.Column("value", sa.Text))
    episodes = sa.Table(
        "episodes", md, sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("run", sa.Text), sa.Column("phase", sa.Text), sa.Column("mode", sa.Text), sa.Column("behavior", sa.Text),
        sa.Column("agent", sa.Text), sa.Column("worker", sa.Integer), sa.Column("episode", sa.BigInteger),
        sa.Column("length", sa.BigInteger), sa.Column("env_reward", sa.Double), sa.Column("objective", sa.Double),
        sa.Column("elo", sa.Double, nullable=True), sa.Column("wall_time", sa.Double),
        sa.Column("policy", sa.Text, nullable=True),
    )
    sa.Index("episodes_run_phase_behavior", episodes.c.run, episodes.c.phase, episodes.c.behavior)
    steps = sa.Table(
        "steps", md, sa.Column("run", sa.Text), sa.Column("phase", sa.Text), sa.Column("behavior", sa.Text),
        sa.Column("agent", sa.Text), sa.Column("worker", sa.Integer), sa.Column("episode", sa.BigInteger),
        sa.Column("step", sa.BigInteger), sa.Column("env_reward", sa.Double), sa.Column("objective", sa.Double),
    )
    sa.Index("steps_run_phase_behavior", steps.c.run, steps.c.phase, steps.c.behavior, steps.c.episode)
    sa.Table(
        "phases", md, sa.Column("run", sa.Text, primary_key=True), sa.Column("phase", sa.Text, primary_key=True),
        sa.Column("idx", sa.Integer), sa.Column("mode", sa.Text), sa.Column("state", sa.Text),
        sa.Column("wall_time", sa.Double),
    )
    return md


def _engine(url: str) -> Any:
    """An engine for ``url`` with deadlines on connecting and on every statement."""
    try:
        import sqlalchemy as sa
    except ImportError as err:
        raise StoreError(
            f"--store {shown(url)} needs SQLAlchemy and psycopg2 ({err.name} is not installed); "
            "pip install 'ml_arl[postgresql]'"
        ) from None
    connect_args = {"connect_timeout": CONNECT_TIMEOUT_S, "options": f"-c statement_timeout={STATEMENT_TIMEOUT_S * 1000}"}
    try:
        return sa.create_engine(url, connect_args=connect_args, pool_pre_ping=True)
    except ImportError as err:
        raise StoreError(
            f"--store {shown(url)} needs the PostgreSQL driver ({err.name} is not installed); pip install 'ml_arl[postgresql]'"
        ) from None
    except (sa.exc.ArgumentError, ValueError) as err:
        raise StoreError(f"--store {shown(url)} is not a database URL SQLAlchemy reads ({_reason(err)}); "
                         "use postgresql://user@host:port/database") from None


def _connect_error(url: str, err: BaseException) -> StoreError:
    return StoreError(
        f"cannot reach the results store {shown(url)}: {_reason(err)}; start the server, or fix --store "
        "(results_store.url)"
    )


class ServerStore(BufferedStore):
    """Buffered writer for one run's rows in a shared PostgreSQL database.

    ``existing``: what to do when the store already holds rows of ``run_id``: "refuse" (a new run,
    StoreError naming --resume and --force), "append" (--resume), "replace" (--force: its rows go first).
    """

    hint = "check that the PostgreSQL server is up and accepts writes, then continue with --resume"

    def __init__(self, url: str, run_id: str, batch_size: int = 256, record_steps: bool = False, existing: str = "refuse"):
        super().__init__(run_id, batch_size, record_steps)
        self.url = url
        self.where = shown(url)
        self._engine = _engine(url)
        import sqlalchemy as sa
        self._md = _schema()
        try:
            with self._engine.begin() as conn:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK})
                self._md.create_all(conn)
                for view in _VIEWS:
                    conn.execute(sa.text(view))
                conn.execute(sa.text("INSERT INTO meta VALUES ('schema_version', :v) ON CONFLICT (key) DO NOTHING"),
                             {"v": str(SCHEMA_VERSION)})
                version = conn.execute(sa.text("SELECT value FROM meta WHERE key = 'schema_version'")).scalar()
                if str(version) != str(SCHEMA_VERSION):
                    raise StoreError(f"results store {self.where} has schema version {version}, this ml_arl writes "
                                     f"{SCHEMA_VERSION}; use another database")
                held = _holds_run(conn, run_id)
                if held and existing == "refuse":
                    raise StoreError(f"results store {self.where} already holds run '{run_id}'; pass --resume to "
                                     "continue it, --force to replace it, or another --run-id")
                if held and existing == "replace":
                    for table in ("episodes", "steps", "phases"):
                        conn.execute(sa.text(f"DELETE FROM {table} WHERE run = :run"), {"run": run_id})
                    logger.info("Removed run '%s' from the results store %s (--force)", run_id, self.where)
        except StoreError:
            self._engine.dispose()
            raise
        except sa.exc.SQLAlchemyError as err:
            self._engine.dispose()
            raise _connect_error(url, err) from None
        logger.info("Results go to the store %s (run %s)", self.where, run_id)

    def _write(self, episodes: list[EpisodeRow], steps: list[StepRow], phases: list[PhaseRow]) -> None:
        import sqlalchemy as sa
        from sqlalchemy.dialects.postgresql import insert

        tables = self._md.tables
        latest = {(row[0], row[1]): row for row in phases}  # one row per (run, phase) and statement: the last
        try:
            with self._engine.begin() as conn:
                if episodes:
                    conn.execute(sa.insert(tables["episodes"]), [dict(zip(_EPISODE_FIELDS, r)) for r in episodes])
                if steps:
                    conn.execute(sa.insert(tables["steps"]), [dict(zip(_STEP_FIELDS, r)) for r in steps])
                if latest:
                    upsert = insert(tables["phases"])
                    upsert = upsert.on_conflict_do_update(
                        index_elements=["run", "phase"],
                        set_={c: upsert.excluded[c] for c in ("idx", "mode", "state", "wall_time")},
                    )
                    conn.execute(upsert, [dict(zip(_PHASE_FIELDS, r)) for r in latest.values()])
        except sa.exc.SQLAlchemyError as err:
            raise StoreError(f"cannot write results to {self.where}: {_reason(err)}") from None

    def _written(self, phase: Optional[str], behavior: Optional[str]) -> int:
        import sqlalchemy as sa

        sql, args = "SELECT COUNT(*) FROM episodes WHERE run = :run", {"run": self.run_id}
        if phase is not None:
            sql, args = sql + " AND phase = :phase", {**args, "phase": phase}
        if behavior is not None:
            sql, args = sql + " AND behavior = :behavior", {**args, "behavior": behavior}
        try:
            with self._engine.connect() as conn:
                return int(conn.execute(sa.text(sql), args).scalar() or 0)
        except sa.exc.SQLAlchemyError as err:
            raise StoreError(f"cannot read {self.where}: {_reason(err)}") from None

    def _disconnect(self) -> None:
        self._engine.dispose()


def _holds_run(conn: Any, run_id: str) -> bool:
    import sqlalchemy as sa

    query = "SELECT EXISTS (SELECT 1 FROM episodes WHERE run = :run) OR EXISTS (SELECT 1 FROM phases WHERE run = :run)"
    return bool(conn.execute(sa.text(query), {"run": run_id}).scalar())


def _reading(url: str) -> Any:
    """A connection for reading ``url``, or StoreReadError when it is not a results store."""
    engine = _engine(url)
    import sqlalchemy as sa

    try:
        conn = engine.connect()
        tables = set(sa.inspect(conn).get_table_names())
    except sa.exc.SQLAlchemyError as err:
        engine.dispose()
        raise StoreReadError(str(_connect_error(url, err))) from None
    if not {"episodes", "phases"} <= tables:
        conn.close()
        engine.dispose()
        raise StoreReadError(f"{shown(url)} is a database but not an ml_arl results store (no episodes table); "
                             "pass the --store URL of a run")
    return engine, conn


def list_runs(url: str) -> list[str]:
    """The run ids the store holds, in the order their first episode or phase was written."""
    import sqlalchemy as sa

    engine, conn = _reading(url)
    try:
        rows = conn.execute(sa.text(
            "SELECT run FROM (SELECT run, MIN(id) AS first FROM episodes GROUP BY run"
            " UNION ALL SELECT run, NULL FROM phases) AS r GROUP BY run ORDER BY MIN(first) NULLS LAST, run"
        )).fetchall()
    except sa.exc.SQLAlchemyError as err:
        raise StoreReadError(f"cannot read {shown(url)}: {_reason(err)}") from None
    finally:
        conn.close()
        engine.dispose()
    return [r[0] for r in rows]


def read_run(url: str, run_id: str) -> RunResults:
    """Every episode of run ``run_id`` in the store at ``url``, grouped as ``read_results`` groups a
    results.sqlite. StoreReadError (exit code 2) when the store does not hold the run."""
    import sqlalchemy as sa

    engine, conn = _reading(url)
    where = f"{shown(url)} (run {run_id})"
    try:
        phase_rows = conn.execute(sa.text(
            f"SELECT {', '.join(PHASE_COLUMNS)} FROM phases WHERE run = :run ORDER BY idx, wall_time"), {"run": run_id}
        ).fetchall()
        rows = conn.execute(sa.text(
            f"SELECT {', '.join(EPISODE_COLUMNS)} FROM episodes WHERE run = :run ORDER BY id"), {"run": run_id}
        ).fetchall()
    except sa.exc.SQLAlchemyError as err:
        raise StoreReadError(f"cannot read {where}: {_reason(err)}") from None
    finally:
        conn.close()
        engine.dispose()
    if not phase_rows and not rows:
        runs = list_runs(url)
        listed = ", ".join(runs[:10]) + (" ..." if len(runs) > 10 else "") if runs else "none yet"
        raise StoreReadError(f"the results store {shown(url)} holds no run '{run_id}' (runs there: {listed})")
    return group_episodes(where, phase_rows, [tuple(r) for r in rows])
