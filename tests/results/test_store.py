"""ResultsStore (batched SQLite writes, resume, phases upsert) and arl-report (table, PNG, errors)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ml_arl.cli.report import main as report_main
from ml_arl.results.sqlite_store import STORE_FILENAME, ResultsStore, StoreError
from tests.support.runs import ROOT


def episode(store: ResultsStore, i: int, phase: str = "train", behavior: str = "Defender", **kw: Any) -> None:
    values: dict[str, Any] = dict(
        phase=phase, mode="train", behavior=behavior, agent="a0", worker=0, episode=i, length=10 + i,
        env_reward=float(i), objective=float(i), elo=None, wall_time=1.0e9 + i,
    )
    values.update(kw)
    store.record_episode(**values)


def rows(path: Path, sql: str = "SELECT COUNT(*) FROM episodes") -> Any:
    with sqlite3.connect(path) as conn:  # a second connection sees committed rows only
        return conn.execute(sql).fetchall()


def count(path: Path, table: str = "episodes") -> int:
    return int(rows(path, f"SELECT COUNT(*) FROM {table}")[0][0])


def test_rows_are_written_in_batches_and_on_flush(tmp_path: Path) -> None:
    db = tmp_path / "run" / STORE_FILENAME
    store = ResultsStore(str(db), "run", batch_size=5)
    for i in range(4):
        episode(store, i)
    assert count(db) == 0 and store.pending == 4 and store.episode_count() == 4
    episode(store, 4)  # the 5th row completes a batch
    assert count(db) == 5 and store.pending == 0
    episode(store, 5)
    assert count(db) == 5
    store.flush()
    assert count(db) == 6
    assert rows(db, "PRAGMA journal_mode")[0][0] == "wal"
    store.close()


def test_close_flushes_and_is_idempotent(tmp_path: Path) -> None:
    db = tmp_path / STORE_FILENAME
    store = ResultsStore(str(db), "run", batch_size=100)
    episode(store, 0, elo=1210.5)
    store.close()
    store.close()
    assert rows(db, "SELECT run, phase, behavior, length, elo FROM episodes") == [("run", "train", "Defender", 10, 1210.5)]


def test_resume_appends_to_the_same_file(tmp_path: Path) -> None:
    db = str(tmp_path / STORE_FILENAME)
    with ResultsStore(db, "run") as store:
        for i in range(3):
            episode(store, i)
    with ResultsStore(db, "run") as store:
        episode(store, 3)
        assert store.episode_count() == 4
    assert rows(Path(db), "SELECT episode FROM episodes ORDER BY id") == [(0,), (1,), (2,), (3,)]
    assert rows(Path(db), "SELECT value FROM meta WHERE key = 'schema_version'") == [("1",)]


def test_record_steps_only_when_enabled(tmp_path: Path) -> None:
    steps: dict[str, Any] = dict(phase="train", behavior="Defender", agent="a0", worker=1, episode=7, first_step=20,
                                 env_rewards=[0.1, 0.2, 0.3], objectives=[1.0, 2.0, 3.0])
    off = tmp_path / "off.sqlite"
    with ResultsStore(str(off), "run") as store:
        store.record_steps(**steps)
    assert count(off, "steps") == 0
    on = tmp_path / "on.sqlite"
    with ResultsStore(str(on), "run", record_steps=True) as store:
        store.record_steps(**steps)
    assert rows(on, "SELECT worker, episode, step, objective FROM steps ORDER BY step") == [
        (1, 7, 20, 1.0), (1, 7, 21, 2.0), (1, 7, 22, 3.0)]


def test_phases_upsert_and_episode_count_filters(tmp_path: Path) -> None:
    db = tmp_path / STORE_FILENAME
    with ResultsStore(str(db), "run", batch_size=2) as store:
        store.record_phase(phase="train", index=0, mode="train", state="running", wall_time=1.0)
        store.record_phase(phase="train", index=0, mode="train", state="done", wall_time=2.0)
        store.record_phase(phase="test", index=1, mode="eval", state="running", wall_time=3.0)
        for i in range(3):
            episode(store, i, behavior="Defender")
        episode(store, 3, behavior="Attacker")
        episode(store, 4, phase="test", behavior="Attacker")
        assert store.episode_count() == 5
        assert store.episode_count(phase="train") == 4
        assert store.episode_count(behavior="Attacker") == 2
        assert store.episode_count(phase="test", behavior="Attacker") == 1
        assert store.episode_count(phase="test", behavior="Defender") == 0
    assert rows(db, "SELECT phase, idx, state, wall_time FROM phases ORDER BY idx") == [
        ("train", 0, "done", 2.0), ("test", 1, "running", 3.0)]


def test_write_failure_raises_one_line_store_error(tmp_path: Path) -> None:
    db = tmp_path / STORE_FILENAME
    store = ResultsStore(str(db), "run", batch_size=10_000)
    store._conn.execute("PRAGMA max_page_count = 8")  # a "full disk" of a few pages
    for i in range(2000):
        episode(store, i, agent="x" * 50)
    with pytest.raises(StoreError) as info:
        store.flush()
    assert str(db) in str(info.value) and "\n" not in str(info.value) and info.value.exit_code == 1
    store.close()  # the failed batch was dropped: close in a ``finally`` does not raise again
    store.close()


# ------------------------------------------------------------------------------------------------ arl-report


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """train (20 episodes each) then test (10 each); objective of Defender's train episode i is i."""
    folder = tmp_path / "results" / "duel"
    with ResultsStore(str(folder / STORE_FILENAME), "duel", batch_size=16) as store:
        store.record_phase(phase="train", index=0, mode="train", state="done", wall_time=1.0)
        store.record_phase(phase="test", index=1, mode="eval", state="done", wall_time=2.0)
        for phase, mode, n in (("train", "train", 20), ("test", "eval", 10)):
            for i in range(n):
                episode(store, i, phase=phase, mode=mode, behavior="Defender", elo=1200.0 + i)
                episode(store, i, phase=phase, mode=mode, behavior="Attacker", objective=-1.0, env_reward=2.0 * i)
    return folder


def table_rows(out: str) -> dict[tuple[str, str], list[str]]:
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["phase", "mode", "behavior"] and set(lines[1]) <= {"-", " "}
    return {(c[0], c[2]): c for c in (line.split() for line in lines[2:]) if len(c) == 9}


def test_report_table_and_png(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report_main([str(run_dir)]) == 0
    out, err = capsys.readouterr()
    table = table_rows(out)
    assert list(table) == [("train", "Defender"), ("train", "Attacker"), ("test", "Defender"), ("test", "Attacker")]
    # phase mode behavior episodes mean-len mean-env-reward mean-objective obj-last10% final-ELO
    assert table[("train", "Defender")] == ["train", "train", "Defender", "20", "19.5", "9.500", "9.500", "18.500", "1219.0"]
    assert table[("test", "Attacker")] == ["test", "eval", "Attacker", "10", "14.5", "9.000", "-1.000", "-1.000", "-"]
    png = run_dir / "report.png"
    assert out.splitlines()[-1] == str(png)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and 10_000 < len(data) < 2_000_000
    assert not [p for p in os.listdir(run_dir) if p.startswith(".report-")]  # no temp file left behind


def test_report_no_plot_and_sqlite_path(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report_main([str(run_dir / STORE_FILENAME), "--no-plot"]) == 0
    out, _ = capsys.readouterr()
    assert len(table_rows(out)) == 4 and "report.png" not in out
    assert not (run_dir / "report.png").exists()


@pytest.mark.parametrize("case", ["missing", "no-db", "not-sqlite", "empty", "bad-output"])
def test_report_errors_are_one_line_exit_2(tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = [str(tmp_path / "nope")]
    if case == "no-db":
        args = [str(tmp_path)]
    elif case == "not-sqlite":
        (tmp_path / STORE_FILENAME).write_text("hello, not a database\n" * 10)
        args = [str(tmp_path)]
    elif case == "empty":
        ResultsStore(str(tmp_path / STORE_FILENAME), "run").close()
        args = [str(tmp_path)]
    elif case == "bad-output":
        with ResultsStore(str(tmp_path / STORE_FILENAME), "run") as store:
            episode(store, 0)
        args = [str(tmp_path), "--output", str(tmp_path / "no" / "such" / "dir.png")]
    assert report_main(args) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("arl-report: error: ") and "Traceback" not in err
    assert str(tmp_path) in err


def test_report_subprocess(run_dir: Path, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    png = tmp_path / "curves.png"
    ok = subprocess.run([sys.executable, "-m", "ml_arl.cli.report", str(run_dir), "--output", str(png)],
                        capture_output=True, text=True, env=env, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[-1] == str(png) and png.read_bytes()[:4] == b"\x89PNG"
    bad = subprocess.run([sys.executable, "-m", "ml_arl.cli.report", str(tmp_path / "missing")],
                         capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1 and "Traceback" not in bad.stderr
    assert bad.stdout == ""
