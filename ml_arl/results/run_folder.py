"""Checks and preparation of results/<run-id> (and of the --record-demo folder) before a run starts, and the run seed.
Kept free of torch so the CLI can do this (and start workers) while torch imports.

A run id is a name (settings.check_run_name), so <results-dir>/<run-id> is always one folder
inside the results folder. ``--force`` removes that folder only when arl-learn wrote it: its
run_logs/ holds ``RUN_MARKER`` (written when a run prepares its folder) or, for runs of older
versions, training_status.json or timers.json. A symbolic link, a file, or a folder of someone
else's is never removed: that is a one-line error.

One run folder, one run: a run holds its folder through ``<run folder>/.lock`` (``LOCK_FILE``), an
``fcntl.flock`` on that file, which holds the pid and host of the run. A lock dies with its process,
so a dead run never keeps a folder: its stale file is simply taken over. Any other run (another
arl-learn, a study trial, a second ``TrainerController`` in a notebook) on a held folder, and an
``--initialize-from`` of a held folder (a run still writing it), is a RunDirectoryError (one line
naming the holder, exit code 2) raised before anything is touched: ``--force`` deletes nothing of a
held folder. The lock is taken by ``prepare_results_dir`` (``validate_run_directories`` only looks,
which is all ``--check`` does) and kept, in a registry of this process, until the process ends or
``release_run_lock(path)``. Within one process, a folder held by a run in another thread that is still
alive is refused too; a later run in the same thread (the earlier one has returned) takes it over.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import json
import os
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ml_arl.core.atomic_files import forget_watched, unwatch_folder, watch_folder, write_error, write_json
from ml_arl.core.exceptions import RunDirectoryError
from ml_arl.settings import LoadSettings, RunOptions

_STARTED = time.time()
RUN_MARKER = "arl-run.json"  # run_logs/arl-run.json: this folder is an arl-learn run
_OLDER_RUN_FILES = ("training_status.json", "timers.json", "phases.json")
LOCK_FILE = ".lock"  # <run folder>/.lock: flock-ed by the live run that holds the folder (its pid and host inside)
_LOCK_WAIT_S = 0.3  # a lock found taken is tried again this long (a --check or an --initialize-from may be looking)


# ---------------------------------------------------------------------------- the run lock
@dataclass
class _Held:
    path: str  # as the run named it (results/<run-id>)
    fd: int
    ident: tuple[int, int]  # (st_dev, st_ino) of the lock file
    thread: threading.Thread  # the thread whose run holds it


_HELD: dict[str, _Held] = {}  # realpath of the run folder -> its lock, for the life of the process
_GUARD = threading.Lock()


def _key(path: str) -> str:
    return os.path.realpath(path)


def _lock_path(path: str) -> str:
    return os.path.join(path, LOCK_FILE)


def _file_ident(path: str) -> Optional[tuple[int, int]]:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _still_there(held: _Held) -> bool:
    """The lock file this process holds is still the folder's (the folder was not removed or replaced)."""
    return _file_ident(_lock_path(_key(held.path))) == held.ident


def _drop(key: str) -> None:
    held = _HELD.pop(key, None)
    if held is not None:
        unwatch_folder(held.path)
        try:
            os.close(held.fd)  # closing releases the flock
        except OSError:
            pass


def _forget_in_child() -> None:
    """A forked child (a worker) does not keep its parent's folders: its copies are closed (the
    parent's lock stays, it is the parent's open file)."""
    global _GUARD
    _GUARD = threading.Lock()
    for held in _HELD.values():
        try:
            os.close(held.fd)
        except OSError:
            pass
    _HELD.clear()
    forget_watched()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def _holder_of(text: str) -> str:
    """'pid 123 on host' from a lock file's content (JSON written by ``acquire_run_lock``)."""
    try:
        data = json.loads(text)
        pid = int(data["pid"])
        host = str(data.get("host") or "")
    except (ValueError, TypeError, KeyError):
        return "another process"
    return f"pid {pid} on {host}" if host else f"pid {pid}"


def _read_holder(fd: int) -> str:
    try:
        return _holder_of(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
    except OSError:
        return "another process"


def _in_process_holder(key: str) -> Optional[str]:
    """Who in this process holds ``key``: None if nobody, or the calling thread (or a finished one:
    its run has ended), which may take it over. A lock whose file is gone is forgotten."""
    held = _HELD.get(key)
    if held is None:
        return None
    if not _still_there(held):
        _drop(key)
        return None
    if held.thread is threading.current_thread() or not held.thread.is_alive():
        return None
    return f"pid {os.getpid()} on {socket.gethostname()}: a run in this process, thread {held.thread.name!r}"


def held_message(path: str, holder: str, force: bool = False) -> str:
    what = ("--force removes nothing of a live run's folder: " if force else "") + (
        "wait for that run to end or stop it, or use another --run-id"
    )
    return f"{path}: this run folder is held by a live run ({holder}); {what}"


def run_lock_holder(path: str) -> Optional[str]:
    """Who holds the run folder ``path`` ('pid 123 on host'), or None when no live run does (no
    lock file, a stale one, or this thread's own). Only looks: takes nothing, writes nothing."""
    key = _key(path)
    with _GUARD:
        holder = _in_process_holder(key)
        if key in _HELD:  # this process holds it (only the lock of a file still there is kept)
            return holder
    try:
        fd = os.open(_lock_path(path), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None  # no lock file: no run of this version holds it
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd)
        except OSError:
            return None  # a file system without flock: nothing to tell
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def holds_run_lock(path: str) -> bool:
    """This process holds the run folder ``path`` (and its lock file is still there)."""
    key = _key(path)
    with _GUARD:
        held = _HELD.get(key)
        return held is not None and _still_there(held)


def acquire_run_lock(path: str, force: bool = False) -> None:
    """Hold the run folder ``path`` (an existing folder) for the life of this process, or until
    ``release_run_lock``: a RunDirectoryError naming the holder when a live run holds it. A stale
    lock file (its run is dead) is taken over."""
    key = _key(path)
    lock = _lock_path(path)
    me = threading.current_thread()
    with _GUARD:
        holder = _in_process_holder(key)
        if holder is not None:
            raise RunDirectoryError(held_message(path, holder, force))
        if key in _HELD:
            _HELD[key].thread = me  # this thread's earlier run (it has returned), or a finished thread's
            _HELD[key].path = path
            watch_folder(path, lock, _HELD[key].ident)
            return
        deadline = time.monotonic() + _LOCK_WAIT_S
        while True:
            try:
                fd = _open_lock(lock)
            except OSError as err:
                if err.errno == errno.ELOOP:
                    raise RunDirectoryError(f"{lock}: is a symbolic link, not the run's lock file; remove it") from None
                if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                    return  # a folder nobody can write: held by no one; the run's first write says so in one line
                raise write_error(lock, err) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raise RunDirectoryError(held_message(path, holder, force)) from None
            except OSError:
                pass  # a file system without flock: the folder cannot be held; run as before
            st = os.fstat(fd)
            ident = (st.st_dev, st.st_ino)
            if _file_ident(lock) != ident:  # removed or replaced while we opened it: try the new one
                os.close(fd)
                continue
            note = (json.dumps({"pid": os.getpid(), "host": socket.gethostname()}) + "\n").encode("utf-8")
            try:
                if os.pread(fd, 4096, 0) != note:  # this process's own note is left as it is
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, note, 0)
            except OSError:
                pass  # the lock holds without its note (a full disk, a read-only file): shown as 'another process'
            _HELD[key] = _Held(path, fd, ident, me)
            watch_folder(path, lock, ident)  # a write into it after it was removed is said as that
            return


def _open_lock(lock: str) -> int:
    """The lock file, made if missing; an existing one that cannot be written is locked read-only
    (flock needs no write access)."""
    try:
        return os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as err:
        if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS) or not os.path.isfile(lock):
            raise
        return os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)


def release_run_lock(path: str) -> bool:
    """Let go of the run folder ``path`` once its run has ended (a Python program that runs several
    trainings in one process, or lets another process have the folder next): True if it was held.
    A hold of a run in another thread that is still alive is kept (False). The lock file stays: a
    stale one is taken over."""
    key = _key(path)
    with _GUARD:
        held = _HELD.get(key)
        if held is None or (held.thread is not threading.current_thread() and held.thread.is_alive()):
            return False
        _drop(key)
        return True


def is_run_folder(path: str) -> bool:
    """``path`` is a real folder (not a link) whose run_logs/ says arl-learn wrote it."""
    run_logs = os.path.join(path, "run_logs")
    if os.path.islink(path) or not os.path.isdir(path) or os.path.islink(run_logs) or not os.path.isdir(run_logs):
        return False
    return any(os.path.isfile(os.path.join(run_logs, name)) for name in (RUN_MARKER, *_OLDER_RUN_FILES))


def _check_force_target(path: str) -> None:
    """--force may remove ``path`` only if it is a run folder this tool wrote."""
    if os.path.islink(path):
        raise RunDirectoryError(f"{path}: is a symbolic link; --force removes only run folders arl-learn wrote; remove the link yourself or use another --run-id")
    if not is_run_folder(path):
        raise RunDirectoryError(
            f"{path}: exists but is not a run folder written by arl-learn (no run_logs/{RUN_MARKER}); "
            "--force will not remove it: use another --run-id or --results-dir, or remove it yourself"
        )


def write_run_marker(options: RunOptions) -> None:
    """run_logs/arl-run.json (atomic): marks the folder as this tool's, for a later --force. A
    folder that cannot be written is a ResultsWriteError (one line)."""
    cp = options.checkpoint_settings
    target = os.path.join(cp.run_logs_dir, RUN_MARKER)
    if os.path.isfile(target):
        return
    write_json(target, {"run_id": cp.run_id, "written_by": "arl-learn", "created": time.time()})


def _this_runs_files(write_path: str, run_logs_dir: str) -> set[str]:
    """Files in the run folder that are this run's already: its lock file (or a dead run's, taken
    over) and the logs of its Unity builds."""
    return _fresh_player_logs(run_logs_dir) | {os.path.abspath(_lock_path(write_path))}


def _fresh_player_logs(run_logs_dir: str) -> set[str]:
    """run_logs/Player-<i>.log written by the Unity builds of this process's run."""
    return {
        os.path.abspath(p) for p in glob.glob(os.path.join(run_logs_dir, "Player-*.log"))
        if os.path.getmtime(p) >= _STARTED - 1.0
    }


def _holds_only_this_runs_files(write_path: str, run_logs_dir: str) -> bool:
    """The run folder holds nothing but this run's files (its lock, the logs of its Unity builds:
    they start before the checks end)."""
    return _holds_only(write_path, _this_runs_files(write_path, run_logs_dir))


def validate_run_directories(options: RunOptions, lock: bool = False) -> None:
    """ML-Agents' rules for results/<run-id> with --resume / --force / --initialize-from, and no
    live run holding the folder (nor the one --initialize-from reads). With ``lock``, an existing
    folder that passes is held by this process from then on (``prepare_results_dir``); without, it is
    only looked at (arl-learn before it starts anything, --check)."""
    cp = options.checkpoint_settings
    path = cp.write_path
    if os.path.exists(cp.results_dir) and not os.path.isdir(cp.results_dir):
        raise RunDirectoryError(f"{cp.results_dir}: the results folder is a file; pass another --results-dir")
    if os.path.lexists(path) and not os.path.isdir(path):
        raise RunDirectoryError(f"{path}: exists and is not a folder; use another --run-id or remove it yourself")
    if os.path.isdir(path):  # first: a live run's folder is that, whatever else is asked of it
        holder = run_lock_holder(path)
        if holder is not None:
            raise RunDirectoryError(held_message(path, holder, cp.force))
    exists = os.path.isdir(path) and not _holds_only_this_runs_files(cp.write_path, cp.run_logs_dir)
    if cp.resume and not exists:
        raise RunDirectoryError(
            f"{path}: previous data from this run ID was not found; train a new run by removing --resume"
        )
    if exists and not cp.resume and not cp.force and not cp.inference:
        raise RunDirectoryError(
            f"{path}: previous data from this run ID was found; use a new --run-id, --resume to continue "
            "this run, or --force to overwrite it"
        )
    if exists and cp.force:
        _check_force_target(path)
    validate_phase_loads(options)
    if cp.record_demo is not None:
        problem = record_demo_problem(cp.record_demo)
        if problem is not None:
            raise RunDirectoryError(problem)
    if cp.initialize_from is not None:
        init_dir = os.path.join(cp.results_dir, cp.initialize_from)
        if not os.path.isdir(init_dir):
            raise RunDirectoryError(
                f"{init_dir}: could not initialize from run '{cp.initialize_from}'; make sure models "
                "have been saved with that run ID"
            )
        holder = run_lock_holder(init_dir)
        if holder is not None:
            raise RunDirectoryError(
                f"{init_dir}: --initialize-from reads a run that a live run ({holder}) is still writing; "
                "wait for it to end or stop it, or initialize from a finished run"
            )
    if lock and os.path.isdir(path):
        acquire_run_lock(path, cp.force)


def record_demo_problem(folder: str) -> Optional[str]:
    """Why ``folder`` cannot take demonstrations (a file, under a file, not writable), or None.
    A folder that does not exist yet is fine: it is created."""
    if os.path.lexists(folder) and not os.path.isdir(folder):
        return f"--record-demo {folder}: exists and is not a folder; pass a folder (it is created if missing)"
    existing = os.path.abspath(folder)
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return f"--record-demo {folder}: {existing} is a file, so the folder cannot be created; pass another folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "folder" if existing == os.path.abspath(folder) else f"folder is under {existing}, which"
        return f"--record-demo {folder}: the {what} is not writable; pass a folder you can write to"
    return None


def prepare_results_dir(options: RunOptions) -> None:
    """Hold the run folder (made now for a new run; a live run's is a one-line error, before
    anything is touched), then --force: remove the old run (only a run folder arl-learn wrote).
    Unity builds of this run already write their logs into run_logs/Player-<i>.log (they start
    before the old run may be removed); those are kept, and so is the lock file. Then the run
    marker, so that a later --force knows the folder."""
    cp = options.checkpoint_settings
    validate_run_directories(options, lock=True)  # an existing folder is held from here on
    if not holds_run_lock(cp.write_path):  # a new run: its folder is made and held now
        try:
            os.makedirs(cp.write_path, exist_ok=True)
        except OSError as err:
            raise write_error(cp.write_path, err) from None
        acquire_run_lock(cp.write_path, cp.force)
        validate_run_directories(options, lock=True)  # again: no other run wrote there before we held it
    if cp.force and os.path.isdir(cp.write_path):
        _remove_old_run(cp.write_path, _this_runs_files(cp.write_path, cp.run_logs_dir))
    write_run_marker(options)


def _remove_old_run(path: str, keep: set[str]) -> None:
    """Everything under ``path`` except the files in ``keep`` (and the folders holding them);
    nothing at all when ``path`` holds only those."""
    if _holds_only(path, keep):
        return
    _check_force_target(path)  # checked again right before removing
    try:
        _remove_all_but(path, keep)
    except OSError as err:
        raise RunDirectoryError(f"{path}: --force could not remove the old run ({err.strerror or err})") from None


def _holds_only(path: str, keep: set[str]) -> bool:
    for root, _, files in os.walk(path):
        for name in files:
            if os.path.abspath(os.path.join(root, name)) not in keep:
                return False
    return True


def _remove_all_but(folder: str, keep: set[str]) -> None:
    with os.scandir(folder) as entries:
        for entry in list(entries):
            full = os.path.abspath(entry.path)
            if full in keep:
                continue
            if entry.is_dir(follow_symlinks=False):
                if any(k.startswith(full + os.sep) for k in keep):
                    _remove_all_but(full, keep)
                else:
                    shutil.rmtree(full)
            else:
                os.remove(full)


def resolve_seed(options: RunOptions) -> int:
    """--seed -1 (the default) means a random seed in [0, 10000), as in ML-Agents."""
    seed = options.env_settings.seed
    return seed if seed != -1 else int(np.random.randint(0, 10000))


def resolve_load_path(options: RunOptions, load: LoadSettings, brain: str, phase_index: int) -> str:
    """results/<run>/<phase>/<behavior>/checkpoint.pt of a phase's ``load``; a missing one is a RunDirectoryError."""
    cp = options.checkpoint_settings
    run = load.run or cp.run_id
    behavior = load.behavior or brain
    run_dir = os.path.join(cp.results_dir, run)
    if not os.path.isdir(run_dir):
        raise RunDirectoryError(f"{run_dir}: no run '{run}' to load behavior '{behavior}' from; check load.run")
    if load.phase is not None:
        phase_dir = os.path.join(run_dir, load.phase)
        if not os.path.isdir(phase_dir):
            raise RunDirectoryError(f"{phase_dir}: run '{run}' has no phase '{load.phase}'; check load.phase")
        candidates = [os.path.join(phase_dir, behavior, "checkpoint.pt")]
    else:
        candidates = [os.path.join(run_dir, behavior, "checkpoint.pt")]
        phases_file = os.path.join(run_dir, "run_logs", "phases.json")
        if os.path.isfile(phases_file):
            with open(phases_file, encoding="utf-8") as f:
                names = list(json.load(f).get("phases", {}))
            candidates = [os.path.join(run_dir, n, behavior, "checkpoint.pt") for n in reversed(names)] + candidates
    for path in candidates:
        if os.path.isfile(path):
            return path
    where = f"phase '{load.phase}' of run '{run}'" if load.phase else f"run '{run}'"
    raise RunDirectoryError(f"{candidates[0]}: {where} saved no behavior '{behavior}'; check load.behavior")


def validate_phase_loads(options: RunOptions) -> None:
    """Every phase ``load`` from another run must name a saved brain: checked before anything starts."""
    run_id = options.checkpoint_settings.run_id
    for index, phase in enumerate(options.phases or []):
        for brain, load in phase.load.items():
            if load.run is not None and load.run != run_id:
                try:
                    resolve_load_path(options, load, brain, index)
                except RunDirectoryError as err:
                    raise RunDirectoryError(f"phases.{phase.name}.load.{brain}: {err}") from None
