"""Checks and preparation of results/<run-id> (and of the --record-demo folder) before a run starts, and the run seed.
Kept free of torch so the CLI can do this (and start workers) while torch imports.

A run id is a name (settings.check_run_name), so <results-dir>/<run-id> is always one folder
inside the results folder. ``--force`` removes that folder only when arl-learn wrote it: its
run_logs/ holds ``RUN_MARKER`` (written when a run prepares its folder) or, for runs of older
versions, training_status.json or timers.json. A symbolic link, a file, or a folder of someone
else's is never removed: that is a one-line error.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import time
from typing import Optional

import numpy as np

from ml_arl.atomic_files import write_json
from ml_arl.exceptions import RunDirectoryError
from ml_arl.settings import LoadSettings, RunOptions

_STARTED = time.time()
RUN_MARKER = "arl-run.json"  # run_logs/arl-run.json: this folder is an arl-learn run
_OLDER_RUN_FILES = ("training_status.json", "timers.json", "phases.json")


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


def _fresh_player_logs(run_logs_dir: str) -> set[str]:
    """run_logs/Player-<i>.log written by the Unity builds of this process's run."""
    return {
        os.path.abspath(p) for p in glob.glob(os.path.join(run_logs_dir, "Player-*.log"))
        if os.path.getmtime(p) >= _STARTED - 1.0
    }


def _holds_only_this_runs_player_logs(write_path: str, run_logs_dir: str) -> bool:
    """The run folder was made by this run's Unity builds (their logs start before the checks end)."""
    keep = _fresh_player_logs(run_logs_dir)
    for root, _, files in os.walk(write_path):
        for name in files:
            if os.path.abspath(os.path.join(root, name)) not in keep:
                return False
    return True


def validate_run_directories(options: RunOptions) -> None:
    """ML-Agents' rules for results/<run-id> with --resume / --force / --initialize-from."""
    cp = options.checkpoint_settings
    path = cp.write_path
    if os.path.exists(cp.results_dir) and not os.path.isdir(cp.results_dir):
        raise RunDirectoryError(f"{cp.results_dir}: the results folder is a file; pass another --results-dir")
    if os.path.lexists(path) and not os.path.isdir(path):
        raise RunDirectoryError(f"{path}: exists and is not a folder; use another --run-id or remove it yourself")
    exists = os.path.isdir(path) and not _holds_only_this_runs_player_logs(cp.write_path, cp.run_logs_dir)
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
    """--force: remove the old run (only a run folder arl-learn wrote). Unity builds of this run
    already write their logs into run_logs/Player-<i>.log (they start before the old run may be
    removed); those are kept. Then the run marker, so that a later --force knows the folder."""
    validate_run_directories(options)
    cp = options.checkpoint_settings
    if cp.force and os.path.isdir(cp.write_path):
        _remove_old_run(cp.write_path, _fresh_player_logs(cp.run_logs_dir))
    write_run_marker(options)


def _remove_old_run(path: str, keep: set[str]) -> None:
    """Everything under ``path`` except the files in ``keep``."""
    if not keep:
        _check_force_target(path)  # checked again right before removing
        try:
            shutil.rmtree(path)
        except OSError as err:
            raise RunDirectoryError(f"{path}: --force could not remove the old run ({err.strerror or err})") from None
        return
    for root, dirs, files in os.walk(path, topdown=False):
        for name in files:
            file_path = os.path.abspath(os.path.join(root, name))
            if file_path not in keep:
                os.remove(file_path)
        for name in dirs:
            folder = os.path.join(root, name)
            if not os.listdir(folder):
                os.rmdir(folder)


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
