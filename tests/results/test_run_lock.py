"""One run folder, one run: results/<run-id>/.lock, flock-ed by the live run that holds the folder.
Any other run on it (arl-learn, --force, --resume, --initialize-from, a second run in this process)
is one line naming the holder, exit code 2, and touches nothing; a dead run's lock is taken over;
a folder removed under a run is said as that, not as a full disk."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest

from ml_arl.core.atomic_files import write_json
from ml_arl.core.exceptions import ResultsWriteError, RunDirectoryError
from ml_arl.results import run_folder as rd
from ml_arl.settings import RunOptions, build_run_options
from tests.support.runs import ROOT, arl_learn_here, tiny_config, write_config

HOLD = """\
import sys
from ml_arl.results.run_folder import acquire_run_lock
acquire_run_lock(sys.argv[1])
print("held", flush=True)
sys.stdin.read()  # until the test closes it
"""


def options(results: Path, run_id: str = "x", **checkpoint: Any) -> RunOptions:
    overrides = {"checkpoint_settings": {"run_id": run_id, "results_dir": str(results), **checkpoint}}
    return build_run_options(tiny_config(), overrides, "test")


def finished_run(results: Path, run_id: str = "x") -> Path:
    """A run folder as a finished run leaves it."""
    folder = results / run_id
    (folder / "run_logs").mkdir(parents=True)
    (folder / "run_logs" / rd.RUN_MARKER).write_text("{}")
    (folder / "Reach").mkdir()
    (folder / "Reach" / "checkpoint.pt").write_bytes(b"weights")
    return folder


class Holder:
    """Another process holding a run folder as a live run does."""

    def __init__(self, folder: Path):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "held"
        self.pid = self.proc.pid

    def end(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Holder]:
    h = Holder(finished_run(tmp_path / "results"))
    yield h
    h.end()


@pytest.fixture(autouse=True)
def _release(tmp_path: Path) -> Iterator[None]:
    yield
    for key in list(rd._HELD):  # this process's locks of this test's folders
        if key.startswith(os.path.realpath(tmp_path)):
            rd.release_run_lock(key)


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The one line arl-learn said (as for every run-folder error: '[ERROR] ...' once the run's
    logging is set up, 'arl-learn: error: ...' for --check), without a traceback."""
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) == 1 and lines[0].startswith(("[ERROR] ", "arl-learn: error: ")), proc.stdout + proc.stderr
    return lines[0]


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_folder_held_by_a_live_run_is_refused_naming_its_pid(tmp_path: Path, holder: Holder) -> None:
    results = tmp_path / "results"
    before = tree(results / "x")
    checkpoints: list[dict[str, Any]] = [{"resume": True}, {"force": True}, {"inference": True, "resume": True}]
    for checkpoint in checkpoints:
        opts = options(results, "x", **checkpoint)
        for call in (rd.validate_run_directories, rd.prepare_results_dir):
            with pytest.raises(RunDirectoryError) as err:
                call(opts)
            assert err.value.exit_code == 2
            message = str(err.value)
            assert f"pid {holder.pid} " in message and "held by a live run" in message and "\n" not in message
    assert rd.run_lock_holder(str(results / "x")) is not None
    assert tree(results / "x") == before  # nothing touched, nothing deleted
    assert not rd._HELD


def test_force_on_a_held_folder_deletes_nothing(tmp_path: Path, holder: Holder) -> None:
    cfg = write_config(tmp_path / "reach.yaml", tiny_config())
    before = tree(tmp_path / "results" / "x")
    proc = arl_learn_here([str(cfg), "--run-id", "x", "--force"], cwd=tmp_path)
    assert proc.returncode == 2
    lines = one_line(proc)
    assert f"pid {holder.pid} " in lines and "--force removes nothing" in lines
    assert tree(tmp_path / "results" / "x") == before


def test_initialize_from_a_folder_being_written_is_one_line(tmp_path: Path, holder: Holder) -> None:
    cfg = write_config(tmp_path / "reach.yaml", tiny_config())
    proc = arl_learn_here([str(cfg), "--run-id", "y", "--initialize-from", "x"], cwd=tmp_path)
    assert proc.returncode == 2
    line = one_line(proc)
    assert "--initialize-from" in line and f"pid {holder.pid} " in line
    assert not (tmp_path / "results" / "y").exists()


def test_check_reports_a_held_folder_and_holds_nothing(tmp_path: Path, holder: Holder) -> None:
    cfg = write_config(tmp_path / "reach.yaml", tiny_config())
    proc = arl_learn_here([str(cfg), "--run-id", "x", "--resume", "--check"], cwd=tmp_path)
    assert proc.returncode == 2 and f"pid {holder.pid} " in one_line(proc)
    holder.end()
    proc = arl_learn_here([str(cfg), "--run-id", "x", "--resume", "--check"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not rd._HELD and rd.run_lock_holder(str(tmp_path / "results" / "x")) is None  # --check only looked


def test_a_dead_runs_lock_is_taken_over(tmp_path: Path) -> None:
    results = tmp_path / "results"
    folder = finished_run(results)
    dead = Holder(folder)
    dead.proc.kill()  # killed: its lock dies with it, its file stays
    dead.proc.wait(10)
    lock = folder / rd.LOCK_FILE
    assert json.loads(lock.read_text())["pid"] == dead.pid
    assert rd.run_lock_holder(str(folder)) is None
    rd.prepare_results_dir(options(results, resume=True))
    assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert rd.holds_run_lock(str(folder))
    assert "pid" in str(_refused_by_another_process(folder))


def _refused_by_another_process(folder: Path) -> Optional[str]:
    """What another process is told about ``folder``."""
    code = "import sys; from ml_arl.results.run_folder import run_lock_holder; print(run_lock_holder(sys.argv[1]))"
    out = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return out.stdout.strip()


def test_force_on_a_finished_run_keeps_only_the_lock(tmp_path: Path) -> None:
    results = tmp_path / "results"
    folder = finished_run(results)
    (folder / "Reach" / "link").symlink_to(tmp_path)  # a link is removed, not followed
    (folder / rd.LOCK_FILE).write_text("not json")  # an older or torn lock file: taken over
    rd.prepare_results_dir(options(results, force=True))
    assert sorted(p.name for p in folder.iterdir()) == [rd.LOCK_FILE, "run_logs"]
    assert os.listdir(folder / "run_logs") == [rd.RUN_MARKER]
    assert tmp_path.is_dir() and (results / "x").is_dir()
    rd.validate_run_directories(options(results, resume=True))  # our own lock, this thread: not refused


def test_a_new_run_holds_its_folder_and_a_lock_file_alone_is_no_previous_run(tmp_path: Path) -> None:
    results = tmp_path / "results"
    (results / "x").mkdir(parents=True)
    (results / "x" / rd.LOCK_FILE).write_text('{"pid": 1}')  # a run killed right after taking its lock
    rd.validate_run_directories(options(results))  # no "previous data" with only a lock file
    rd.prepare_results_dir(options(results))
    assert rd.holds_run_lock(str(results / "x")) and (results / "x" / "run_logs" / rd.RUN_MARKER).is_file()
    assert f"pid {os.getpid()} " in str(_refused_by_another_process(results / "x"))


def test_in_process_a_run_in_another_live_thread_is_refused(tmp_path: Path) -> None:
    results = tmp_path / "results"
    finished_run(results)
    opts = options(results, resume=True)
    started, stop = threading.Event(), threading.Event()

    def train() -> None:
        rd.prepare_results_dir(opts)
        started.set()
        stop.wait(10)

    thread = threading.Thread(target=train, name="first-run")
    thread.start()
    try:
        assert started.wait(10)
        for call in (rd.validate_run_directories, rd.prepare_results_dir):
            with pytest.raises(RunDirectoryError, match=rf"pid {os.getpid()} .*'first-run'"):
                call(opts)
        with pytest.raises(RunDirectoryError, match="--initialize-from"):
            rd.validate_run_directories(options(results, run_id="y", initialize_from="x"))
        assert not rd.release_run_lock(str(results / "x"))  # not another live thread's run's
    finally:
        stop.set()
        thread.join(10)
    rd.prepare_results_dir(opts)  # its thread has ended: taken over
    rd.prepare_results_dir(opts)  # and again, in this thread: the earlier run has returned
    assert rd.release_run_lock(str(results / "x"))
    assert not rd.holds_run_lock(str(results / "x")) and rd.run_lock_holder(str(results / "x")) is None


def test_a_run_folder_removed_under_the_run_is_not_a_full_disk(tmp_path: Path) -> None:
    results = tmp_path / "results"
    rd.prepare_results_dir(options(results))
    shutil.rmtree(results / "x")
    target = results / "x" / "Reach" / "checkpoint.json"
    with pytest.raises(ResultsWriteError) as err:
        write_json(str(target), {})
    message = str(err.value)
    assert f"the run folder {results / 'x'} was removed while the run was writing to it" in message
    assert "disk" not in message and not (results / "x").exists()  # not made again
    rd.release_run_lock(str(results / "x"))
    from ml_arl.core.atomic_files import write_error

    gone = write_error(str(tmp_path / "gone" / "a" / "f.json"), FileNotFoundError(2, "No such file or directory"))
    assert "was removed while the run was writing to it" in str(gone) and "disk" not in str(gone)
