"""The whole run killed: arl-learn SIGKILLed at random moments and resumed (the step never goes back,
every file in the run folder is whole, no worker outlives the run), a full disk and a read-only
results folder (one line, exit code 1, earlier checkpoints untouched), and --resume with a missing
or damaged checkpoint (the newest one that loads, with a warning; none: one line).

Full disk: RLIMIT_FSIZE in the arl-learn process (writes past the limit fail with EFBIG, as
ENOSPC would; works as root and needs no mount). Read-only folder: root ignores permissions and
mounts may be refused in CI, so creating a file under results/ fails with EROFS by a patch of
``tempfile.mkstemp`` while ``ml_arl.cli.learn.main`` runs in the test process.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import onnx
import pytest
import torch
import yaml
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

from tests.support.runs import ROOT, arl_learn_here, tiny_config, write_config
from tests.support.zygote import Forked, popen_arl_learn, run_arl_learn

RESUMED = re.compile(r"Resuming (\S+) from (\S+) at step (\d+)")


# What the kill and save tests train with: no learning is checked, so a small net and one epoch
# (the runs' cost is their steps and checkpoints, not what they learn).
LIGHT: dict[str, Any] = {
    "hyperparameters": {"batch_size": 64, "buffer_size": 256, "learning_rate": 3.0e-3, "num_epoch": 1},
    "network_settings": {"hidden_units": 16, "num_layers": 1},
}


def reach_config(**trainer: Any) -> dict[str, Any]:
    config = tiny_config("builtin:Reach", **trainer)
    config["behaviors"] = {"Reach": {}}
    return config


def run_cli(code: str, args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``code`` (a patch or a limit), then the real ``ml_arl.cli.learn.run()`` with ``args``, in a process
    of its own (forked by the zygote: tests/support/zygote.py)."""
    return run_arl_learn(args, cwd, timeout, code=code)


# ---------------------------------------------------------------------------------------------- checks


def event_file_whole(path: Path) -> bool:
    """Every record of a TensorBoard event file complete, with both CRCs right."""
    data, pos = path.read_bytes(), 0
    while pos < len(data):
        if pos + 12 > len(data):
            return False
        (length,) = struct.unpack("<Q", data[pos : pos + 8])
        if masked_crc32c(data[pos : pos + 8]) != struct.unpack("<I", data[pos + 8 : pos + 12])[0]:
            return False
        end = pos + 16 + length
        if end > len(data) or masked_crc32c(data[pos + 12 : end - 4]) != struct.unpack("<I", data[end - 4 : end])[0]:
            return False
        pos = end
    return True


def check_intact(run: Path, cwd: Path) -> dict[str, int]:
    """Every file of the run reads whole and the run status names only files that exist.
    Returns the newest listed checkpoint step per "<status folder>/<behavior>"."""
    for path in sorted(p for p in run.rglob("*") if p.is_file() and not p.name.startswith(".tmp-")):
        if path.suffix == ".pt":
            state = torch.load(path, weights_only=True)
            assert "global_step" in state, path
        elif path.suffix == ".onnx":
            onnx.load(str(path))
        elif path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix == ".yaml":
            assert isinstance(yaml.safe_load(path.read_text()), dict), path
        elif path.name == "results.sqlite":
            con = sqlite3.connect(path)
            try:
                assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok", path
            finally:
                con.close()
    newest: dict[str, int] = {}
    for status_file in run.rglob("training_status.json"):
        status = json.loads(status_file.read_text())
        for behavior, entry in status.items():
            if behavior == "metadata":
                continue
            for ckpt in entry.get("checkpoints", []):
                for listed in [ckpt["file_path"], *ckpt.get("auxillary_file_paths", [])]:
                    assert (cwd / listed).is_file(), f"{status_file} names {listed}, which does not exist"
                key = f"{status_file.parent.parent.relative_to(run)}/{behavior}"
                newest[key] = max(newest.get(key, 0), int(ckpt["steps"]))
    return newest


def check_finished_cleanly(run: Path) -> None:
    assert not [p for p in run.rglob("*") if ".tmp-" in p.name], "temporary files left behind"
    events = list(run.rglob("events.out.tfevents.*"))
    assert events
    for path in events:
        assert event_file_whole(path), f"{path}: a torn record"


# ---------------------------------------------------------------------------------------------- killing


def start(args: list[str], cwd: Path, log: Path, fresh: bool) -> Session:
    """``arl-learn ARGS``, its console in ``log``: the command itself (a fresh ``python -m
    ml_arl.cli.learn``: a kill may land in its imports) or, not ``fresh``, forked by the zygote (a
    process of its own that is already past the imports; tests/support/zygote.py)."""
    with open(log, "wb") as out:
        return popen_arl_learn(args, cwd, stdout=out, stderr=subprocess.STDOUT, fresh=fresh)


Session = Union["subprocess.Popen[bytes]", Forked]


def wait_for(log: Path, text: str, count: int, proc: Session, deadline_s: float) -> None:
    """Until ``text`` is ``count`` times in the log, or the process ended."""
    end = time.monotonic() + deadline_s
    while log.read_text(errors="replace").count(text) < count and proc.poll() is None:
        assert time.monotonic() < end, f"no {text!r} within {deadline_s} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.02)


def _stat(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields:
                children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def running(pid: int) -> bool:
    fields = _stat(pid)
    return bool(fields) and fields[0] not in ("Z", "X")  # a zombie has exited; reaping it is init's job


def kill_run(proc: Session) -> None:
    """SIGKILL the arl-learn process; its workers and the forkserver must go by themselves."""
    tree = descendants(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    end = time.monotonic() + 20
    while any(running(p) for p in tree):
        assert time.monotonic() < end, f"processes outlived the killed run: {[p for p in tree if running(p)]}"
        time.sleep(0.1)


def has_files(run: Path) -> bool:
    return run.is_dir() and any(p.is_file() for p in run.rglob("*"))


@dataclass(frozen=True)
class Kill:
    """When a session is SIGKILLed: once ``text`` is ``count`` times in its console (at once when
    ``text`` is empty: the command is still in its imports). ``fresh``: the session is the command
    itself (``python -m ml_arl.cli.learn``), not a child of the zygote that is already past the imports."""

    text: str
    count: int = 1
    fresh: bool = False


SAVED = "Saved checkpoint"


def kill_and_resume(tmp: Path, cfg: Path, run_id: str, kills: list[Kill]) -> tuple[dict[str, int], dict[str, int]]:
    """Start (or resume) the run and SIGKILL each session at the state its ``Kill`` names (a line
    of its console, never a number of seconds, so the kills land in the same states on a fast
    or a loaded machine). After each kill: every file whole, the status names only existing
    files, no process left; each session resumes at or after the newest listed checkpoint.
    Returns the newest listed steps and the step each behavior last resumed from."""
    run = tmp / "results" / run_id
    newest: dict[str, int] = {}
    resumed: dict[str, int] = {}
    for i, kill in enumerate(kills):
        args = [str(cfg), "--run-id", run_id, "--seed", "5", "--debug", *(["--resume"] if has_files(run) else [])]
        log = tmp / f"{run_id}-{i}.log"
        proc = start(args, tmp, log, fresh=kill.fresh)
        if kill.text:
            wait_for(log, kill.text, kill.count, proc, 120)
        assert proc.poll() is None, f"session {i} ended before {kill}:\n{log.read_text()[-3000:]}"
        kill_run(proc)
        out = log.read_text(errors="replace")
        assert "Traceback" not in out, out
        for behavior in re.findall(r"no checkpoint for (\S+); it starts from scratch", out):
            assert not any(key.endswith("/" + behavior) for key in newest), f"session {i}: {behavior} lost its checkpoints:\n{out}"
        for behavior, _, step in RESUMED.findall(out):
            assert int(step) >= resumed.get(behavior, 0), f"session {i}: {behavior} went back to step {step}:\n{out}"
            resumed[behavior] = int(step)
            listed = [s for key, s in newest.items() if key.endswith("/" + behavior)]
            assert int(step) >= max(listed, default=0), f"session {i}: {behavior} resumed at {step}, before {newest}"
        if run.is_dir():
            now = check_intact(run, tmp)
            for key, step in newest.items():
                assert now.get(key, -1) >= step, f"session {i}: the checkpoints of {key} went back: {newest} -> {now}"
            newest = now
    return newest, resumed


@pytest.mark.slow
def test_killed_in_five_sessions_resumes_from_the_last_checkpoint(tmp_path: Path) -> None:
    """Five sessions, each SIGKILLed: three once they saved (one, two and one checkpoints), two
    (the second and the fourth, both resuming a run with checkpoints) in their start-up: once its
    workers were launched (the forkserver and workers must go with it) and in its imports (at
    once). Those two are the command (``python -m ml_arl.cli.learn``), the others children of the
    zygote. Every session after the first resumes what the kills left."""
    config = reach_config(max_steps=10**6, summary_freq=150, checkpoint_interval=300, keep_checkpoints=2, **LIGHT)
    cfg = write_config(tmp_path / "reach.yaml", config)
    kills = [Kill(SAVED), Kill("environment worker(s); importing torch", fresh=True), Kill(SAVED, 2), Kill("", fresh=True), Kill(SAVED)]
    newest, resumed = kill_and_resume(tmp_path, cfg, "k", kills)
    assert resumed.get("Reach", 0) > 0 and newest, (newest, resumed)  # the kills did land while it trained
    last = max(newest.values())
    config["default_settings"]["max_steps"] = last + 400
    write_config(cfg, config)
    proc = arl_learn_here([str(cfg), "--run-id", "k", "--seed", "5", "--resume"], cwd=tmp_path)  # main() in this process
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Traceback" not in out, out
    match = RESUMED.search(proc.stdout)
    assert match and int(match.group(3)) >= last, out
    run = tmp_path / "results" / "k"
    check_intact(run, tmp_path)
    check_finished_cleanly(run)
    status = json.loads((run / "run_logs" / "training_status.json").read_text())
    assert status["Reach"]["final_checkpoint"]["steps"] >= last + 400
    assert len(list((run / "Reach").glob("Reach-*.pt"))) == 2, "keep_checkpoints: files of interrupted saves stay"


@pytest.mark.slow
def test_killed_phased_run_resumes_in_its_phase(tmp_path: Path) -> None:
    config = {
        "env_settings": {"env_path": "builtin:GridDefense", "num_envs": 1, "num_areas": 2},
        "default_settings": {
            "trainer_type": "ppo",
            "hyperparameters": {"batch_size": 64, "buffer_size": 256, "learning_rate": 3.0e-3, "num_epoch": 1},
            "network_settings": {"hidden_units": 32, "num_layers": 1},
            "max_steps": 100000, "time_horizon": 24, "summary_freq": 200, "checkpoint_interval": 200,
            "keep_checkpoints": 2,
        },
        "behaviors": {"Defender": {"role": "defender"}, "Attacker": {"role": "attacker"}},
        "phases": [
            {"name": "defend", "mode": "train", "learn": ["Defender"], "max_steps": 600},
            {"name": "attack", "mode": "train", "learn": ["Attacker"], "max_steps": 600},
            {"name": "test", "mode": "test", "episodes": 8, "deterministic": True},
        ],
    }
    cfg = write_config(tmp_path / "grid.yaml", config)
    # four sessions killed: after a checkpoint of the first phase, as the second begins, after a
    # checkpoint of the second, as the test phase begins
    kills = [Kill(SAVED), Kill("Phase attack (train"), Kill(SAVED), Kill("Phase test (test")]
    kill_and_resume(tmp_path, cfg, "g", kills)
    proc = arl_learn_here([str(cfg), "--run-id", "g", "--seed", "5", "--resume"], cwd=tmp_path)  # main() in this process
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in out, out
    run = tmp_path / "results" / "g"
    check_intact(run, tmp_path)
    check_finished_cleanly(run)
    phases = json.loads((run / "run_logs" / "phases.json").read_text())["phases"]
    assert {name: p["state"] for name, p in phases.items()} == {"defend": "done", "attack": "done", "test": "done"}
    for phase, brain in (("defend", "Defender"), ("attack", "Attacker")):
        status = json.loads((run / phase / "run_logs" / "training_status.json").read_text())
        assert status[brain]["final_checkpoint"]["steps"] >= 600, status


KILL_AT = """\
import os, re, signal, sys
_remove, _replace, _seen = os.remove, os.replace, []
def remove(path, *args, **kwargs):  # the moment an old checkpoint is gone
    _remove(path, *args, **kwargs)
    if POINT == "remove" and re.fullmatch(r"Reach-\\d+\\.pt", os.path.basename(path)):
        os.kill(os.getpid(), signal.SIGKILL)
def replace(src, dst, *args, **kwargs):  # the third checkpoint.pt written to its temporary file, not in place yet
    if POINT == "replace" and os.path.basename(dst) == "checkpoint.pt":
        _seen.append(dst)
        if len(_seen) == 3:
            os.kill(os.getpid(), signal.SIGKILL)
    _replace(src, dst, *args, **kwargs)
os.remove, os.replace = remove, replace
"""


@pytest.mark.parametrize("point", ["remove", "replace"])
def test_killed_at_the_worst_moment_of_a_save(tmp_path: Path, point: str) -> None:
    """Deterministic kill points: right after an old checkpoint was removed (the run status must
    not name it), and between writing checkpoint.pt's temporary file and putting it in place."""
    config = reach_config(max_steps=100000, summary_freq=200, checkpoint_interval=200, keep_checkpoints=2, **LIGHT)
    cfg = write_config(tmp_path / "reach.yaml", config)
    proc = run_cli(f"POINT = {point!r}\n{KILL_AT}", [str(cfg), "--run-id", "w", "--seed", "3"], tmp_path)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    run = tmp_path / "results" / "w"
    newest = check_intact(run, tmp_path)["./Reach"]
    if point == "replace":
        assert list((run / "Reach").glob(".tmp-*")), "the kill point was not inside a write"
    config["default_settings"]["max_steps"] = 1000
    write_config(cfg, config)
    again = arl_learn_here([str(cfg), "--run-id", "w", "--seed", "3", "--resume"], cwd=tmp_path)  # main() in this process
    out = again.stdout + again.stderr
    assert again.returncode == 0 and "Traceback" not in out, out
    match = RESUMED.search(out)
    assert match and match.group(2).endswith("checkpoint.pt") and int(match.group(3)) >= newest, out
    check_intact(run, tmp_path)
    check_finished_cleanly(run)
    assert len(list((run / "Reach").glob("Reach-*.pt"))) == 2


# ---------------------------------------------------------------------------------------------- full / read-only


def snapshot(folder: Path, suffixes: tuple[str, ...] = ()) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
        if p.is_file() and (not suffixes or p.suffix in suffixes)
    }


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out
    errors = [line for line in out.splitlines() if line.startswith(("[ERROR]", "arl-learn: error:"))]
    assert len(errors) == 1, out
    return errors[0]


def test_full_disk_during_a_save_is_one_line_and_keeps_earlier_checkpoints(tmp_path: Path) -> None:
    config = reach_config(max_steps=1000, summary_freq=500, checkpoint_interval=500, network_settings={"hidden_units": 128, "num_layers": 2})
    cfg = write_config(tmp_path / "reach.yaml", config)
    first = arl_learn_here([str(cfg), "--run-id", "d", "--seed", "3"], cwd=tmp_path)  # main() in this process
    assert first.returncode == 0, first.stdout + first.stderr
    run = tmp_path / "results" / "d"
    before = snapshot(run, (".pt", ".onnx"))
    limit = (run / "Reach" / "checkpoint.pt").stat().st_size // 2  # the next checkpoint does not fit
    config["default_settings"]["max_steps"] = 1500  # the save at 1500 is the first one that does not fit
    write_config(cfg, config)
    limit_code = f"import resource, sys\nresource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))"
    proc = run_cli(limit_code, [str(cfg), "--run-id", "d", "--seed", "3", "--resume"], tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = one_error_line(proc)
    assert re.search(r"results/d/Reach/Reach-\d+\.pt: cannot write \(File too large\)", line), line
    assert "--resume" in line, line
    assert snapshot(run, (".pt", ".onnx")) == before, "a checkpoint written before the full disk changed"
    check_intact(run, tmp_path)
    assert not list(run.rglob(".tmp-*")), "a failed write left its temporary file"
    # space again: the run goes on from the last checkpoint that was saved
    again = arl_learn_here([str(cfg), "--run-id", "d", "--seed", "3", "--resume"], cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads((run / "run_logs" / "training_status.json").read_text())["Reach"]["final_checkpoint"]["steps"] >= 1500


EVENTS_FULL = """\
import os, resource
from ml_arl.core.exceptions import ResultsWriteError
from ml_arl.results.summary_writers import StatsSummary, TensorboardWriter
writer = TensorboardWriter("out", clear_past_data=True)
writer.write_stats("B", {"x": StatsSummary(1.0, 0.0, 1)}, 1)
size = sum(os.path.getsize(os.path.join("out", "B", f)) for f in os.listdir(os.path.join("out", "B")))
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 10, resource.RLIM_INFINITY))
try:
    writer.write_stats("B", {"x": StatsSummary(2.0, 0.0, 1)}, 2)
except ResultsWriteError as err:
    print("ResultsWriteError:", err)
writer.close()
"""


def test_event_file_that_cannot_grow_is_one_line_without_a_thread_traceback(tmp_path: Path) -> None:
    """TensorBoard writes from its own thread; when that write fails, no thread traceback shows."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", EVENTS_FULL], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert re.search(r"ResultsWriteError: out/B: cannot write \(File too large\)", proc.stdout), proc.stdout


def test_resume_into_a_read_only_results_folder_is_one_line_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """main() in this process, both runs (a failed write through the command: the full disk above)."""
    import errno
    import tempfile

    cfg = write_config(tmp_path / "reach.yaml", reach_config(max_steps=1000, summary_freq=500, checkpoint_interval=500))
    first = arl_learn_here([str(cfg), "--run-id", "ro", "--seed", "3"], cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    run = tmp_path / "results" / "ro"
    before = snapshot(run)
    results, mkstemp = str(tmp_path / "results"), tempfile.mkstemp

    def read_only(*args: Any, **kwargs: Any) -> Any:  # every file arl-learn writes starts as a temporary file
        folder = os.path.abspath(kwargs.get("dir") or ".")
        if folder == results or folder.startswith(results + os.sep):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), folder)
        return mkstemp(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    proc = arl_learn_here([str(cfg), "--run-id", "ro", "--seed", "3", "--resume"], cwd=tmp_path)
    monkeypatch.undo()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = one_error_line(proc)
    assert "results/ro/configuration.yaml: cannot write (Read-only file system)" in line, line
    assert "writable" in line, line
    assert snapshot(run) == before, "a file of the read-only run changed"


# ---------------------------------------------------------------------------------------------- damaged checkpoints


def test_resume_skips_missing_and_damaged_checkpoints_and_tidies_a_killed_run(tmp_path: Path) -> None:
    config = reach_config(max_steps=1500, summary_freq=500, checkpoint_interval=500, keep_checkpoints=3)
    cfg = write_config(tmp_path / "reach.yaml", config)
    first = arl_learn_here([str(cfg), "--run-id", "c", "--seed", "3"], cwd=tmp_path)  # main() in this process
    assert first.returncode == 0, first.stdout + first.stderr
    run = tmp_path / "results" / "c"
    listed = json.loads((run / "run_logs" / "training_status.json").read_text())["Reach"]["checkpoints"]
    steps = [c["steps"] for c in listed]
    assert len(steps) == 3, listed
    # what a kill, a full disk or a person may leave: a damaged checkpoint.pt, a listed file
    # gone, temporary files of unfinished writes, a torn last TensorBoard record
    latest = run / "Reach" / "checkpoint.pt"
    latest.write_bytes(latest.read_bytes()[: latest.stat().st_size // 2])
    (tmp_path / listed[-1]["file_path"]).unlink()
    (run / "Reach" / ".tmp-k1ll3d").write_bytes(b"PK\x03\x04 half a checkpoint")
    (run / "run_logs" / ".tmp-x9").write_text('{"Reach": {"checkpo')
    event = next((run / "Reach").glob("events.out.tfevents.*"))
    whole = event.read_bytes()
    header = struct.pack("<Q", 100)
    event.write_bytes(whole + header + struct.pack("<I", masked_crc32c(header)) + b"only part of the data")
    config["default_settings"]["max_steps"] = 2500
    write_config(cfg, config)
    proc = arl_learn_here([str(cfg), "--run-id", "c", "--seed", "3", "--resume"], cwd=tmp_path)  # killed runs resume through the command above
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in out, out
    assert re.search(r"WARNING\] --resume: \S*results/c/Reach/checkpoint.pt cannot be read .*trying an older checkpoint", out), out
    assert re.search(rf"WARNING\] \S*training_status.json lists the checkpoint \S*Reach-{steps[-1]}\.pt, which does not exist", out), out
    match = RESUMED.search(out)
    assert match and match.group(2).endswith(f"Reach-{steps[-2]}.pt") and int(match.group(3)) == steps[-2], out
    assert event.read_bytes()[: len(whole)] == whole and event_file_whole(event), "the torn record was not cut off"
    check_intact(run, tmp_path)
    check_finished_cleanly(run)
    # nothing readable: one line, exit code 2 (nothing started)
    damaged = list((run / "Reach").glob("*.pt"))
    for path in damaged:
        path.write_bytes(b"not a checkpoint")
    proc = arl_learn_here([str(cfg), "--run-id", "c", "--seed", "3", "--resume"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = one_error_line(proc)
    assert f"no checkpoint of behavior 'Reach' can be read ({len(damaged)} tried)" in line, line
