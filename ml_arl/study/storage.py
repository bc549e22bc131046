"""Where a study lives: its folder (results/<study>/), the lock that keeps a second arl-study off
it, and its Optuna storage (SQLite in the folder by default, or any SQLAlchemy URL for a study
shared between machines).

A study resumes from its storage (``--resume``): the trials a killed study left RUNNING are marked
failed (``interrupted``) and queued again with the same values; their runs continue from their
last checkpoint. Trials another machine is running in a shared storage are left alone: a trial
counts as abandoned there only once its heartbeat is older than ``HEARTBEAT_GRACE_S``.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import warnings
from typing import IO, Any, Optional

import optuna
from optuna.trial import TrialState

from ml_arl.core.exceptions import ArlError, RunDirectoryError
from ml_arl.study import STORAGE_FILE, storage_url
from ml_arl.study.plan import StudyPlan
from ml_arl.study.trial_files import FAIL_REASON_ATTR, INTERRUPTED_ATTR, RESUME_OF_ATTR, RUN_NAME_ATTR

LOCK_FILE = "study.lock"
MARKER_FILE = "arl-study.json"  # this folder is a study's (what --force may remove)
HEARTBEAT_S = 30  # a running trial's heartbeat, in a shared storage
HEARTBEAT_GRACE_S = 180  # a trial whose heartbeat is older is abandoned
FINGERPRINT_ATTR = "arl_study"  # study user attribute: what a resumed study must still search


class StudyStorageError(ArlError):
    """The study's folder or storage does not fit the request (one line)."""

    exit_code = 2


def fingerprint(plan: StudyPlan) -> dict[str, Any]:
    s = plan.settings
    return {
        "search": {k: v.model_dump() for k, v in s.search.items()},
        "seeds": list(s.seeds),
        "metric": s.metric.model_dump(),
        "sampler": s.sampler,
        "config": os.path.basename(plan.base_path),
        "phase": plan.phase,
        "behavior": plan.behavior,
    }


class StudyFolder:
    """results/<study>/, held (locked) by this process while it runs the study."""

    def __init__(self, results_dir: str, run_id: str):
        self.path = os.path.join(results_dir, run_id)
        self.run_id = run_id
        self._lock: Optional[IO[str]] = None

    def prepare(self, resume: bool, force: bool) -> None:
        exists = os.path.isdir(self.path) and bool(os.listdir(self.path))
        if os.path.lexists(self.path) and not os.path.isdir(self.path):
            raise RunDirectoryError(f"{self.path}: exists and is not a folder; use another --run-id")
        if resume and not exists:
            raise RunDirectoryError(f"{self.path}: no study to resume there; start it without --resume")
        if exists and not resume and not force:
            if os.path.isfile(os.path.join(self.path, MARKER_FILE)):  # a study that is running says so first
                self.lock()
                self.unlock()
            raise RunDirectoryError(
                f"{self.path}: a study with this run id exists; use --resume to continue it, --force to start over, "
                "or another --run-id"
            )
        if exists and force:
            if not os.path.isfile(os.path.join(self.path, MARKER_FILE)) or os.path.islink(self.path):
                raise RunDirectoryError(f"{self.path}: not a folder arl-study wrote; --force removes only those, remove it yourself")
            self.lock()  # not while another arl-study runs it
            shutil.rmtree(self.path)
            self.unlock()
        os.makedirs(self.path, exist_ok=True)
        self.lock()
        marker = os.path.join(self.path, MARKER_FILE)
        if not os.path.exists(marker):
            with open(marker, "w", encoding="utf-8") as f:
                json.dump({"study": self.run_id}, f)

    def lock(self) -> None:
        handle = open(os.path.join(self.path, LOCK_FILE), "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise StudyStorageError(
                f"{self.path}: the study is being run by another arl-study ({holder}); wait for it to end or stop it"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        self._lock = handle

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()  # closing releases the lock
            self._lock = None

    @property
    def default_storage(self) -> str:
        return storage_url(self.path)


def open_storage(url: str, shared: bool) -> optuna.storages.RDBStorage:
    """``shared``: other machines may run trials of the study, which then keep a heartbeat."""
    try:
        if not shared:
            return optuna.storages.RDBStorage(url)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S, grace_period=HEARTBEAT_GRACE_S)
    except Exception as err:  # noqa: BLE001 - SQLAlchemy and Optuna raise many kinds; each is one line
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise StudyStorageError(f"cannot open the study storage {url}: {type(err).__name__}: {first}") from None


def load_or_create(
    storage: optuna.storages.RDBStorage, plan: StudyPlan, name: str, resume: bool, shared: bool,
    sampler: optuna.samplers.BaseSampler, pruner: optuna.pruners.BasePruner,
) -> optuna.Study:
    """The study named ``name`` in ``storage``: created, or (``resume``) loaded and checked
    against the study file."""
    names = optuna.study.get_all_study_names(storage)
    direction = plan.settings.metric.direction
    if name in names and not resume:
        raise StudyStorageError(f"the storage already holds a study named {name!r}; use --resume to continue it or another --run-id")
    if name not in names:
        if names and not shared:
            raise StudyStorageError(f"{STORAGE_FILE} holds the study {names[0]!r}, not {name!r}: it belongs to another study")
        if resume and names:
            raise StudyStorageError(f"the storage holds no study named {name!r} (it has {', '.join(names)})")
        study = optuna.create_study(storage=storage, study_name=name, direction=direction, sampler=sampler, pruner=pruner)
        study.set_user_attr(FINGERPRINT_ATTR, fingerprint(plan))
        return study
    study = optuna.load_study(storage=storage, study_name=name, sampler=sampler, pruner=pruner)
    check_unchanged(study, plan, name)
    return study


def check_unchanged(study: optuna.Study, plan: StudyPlan, name: str) -> None:
    """A study resumes only with what it searches, its seeds, metric and sampler unchanged."""
    stored = study.user_attrs.get(FINGERPRINT_ATTR)
    if stored != fingerprint(plan):
        changed = [k for k in fingerprint(plan) if (stored or {}).get(k) != fingerprint(plan)[k]]
        raise StudyStorageError(
            f"the study {name!r} in the storage was started with other settings ({', '.join(changed) or 'the study file'} changed); "
            "a study keeps what it searches: start another --run-id"
        )
    if study.direction.name.lower() != plan.settings.metric.direction:
        raise StudyStorageError(f"the study {name!r} was started to {study.direction.name.lower()}; metric.direction cannot change")


def check_resume(folder: StudyFolder, url: Optional[str], plan: StudyPlan) -> None:
    """What ``--resume`` would refuse, for ``--check``: reads the storage, writes nothing."""
    if not os.path.isdir(folder.path):
        raise RunDirectoryError(f"{folder.path}: no study to resume there; start it without --resume")
    if url is None and not os.path.isfile(os.path.join(folder.path, STORAGE_FILE)):
        raise RunDirectoryError(f"{folder.path}: holds no {STORAGE_FILE}; no study to resume there")
    storage = open_storage(url or folder.default_storage, shared=False)
    if folder.run_id not in optuna.study.get_all_study_names(storage):
        raise StudyStorageError(f"the storage holds no study named {folder.run_id!r}")
    check_unchanged(optuna.load_study(storage=storage, study_name=folder.run_id), plan, folder.run_id)


def requeue_interrupted(study: optuna.Study, storage: optuna.storages.RDBStorage, shared: bool) -> int:
    """Mark the trials a stopped study left RUNNING as failed (interrupted) and queue every
    interrupted trial not queued yet again, with its values and run folder. Returns how many."""
    if shared:
        optuna.storages.fail_stale_trials(study)
    else:  # the lock is ours: nothing else runs these trials
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            storage.set_trial_user_attr(trial._trial_id, INTERRUPTED_ATTR, True)
            storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
    trials = study.get_trials(deepcopy=False)
    queued = {t.user_attrs.get(RESUME_OF_ATTR) for t in trials}
    count = 0
    for trial in trials:
        stale = trial.state == TrialState.FAIL and (trial.user_attrs.get(INTERRUPTED_ATTR) or FAIL_REASON_ATTR not in trial.user_attrs)
        if stale and trial.number not in queued:
            study.enqueue_trial(
                trial.params, user_attrs={RESUME_OF_ATTR: trial.number, RUN_NAME_ATTR: trial.user_attrs.get(RUN_NAME_ATTR)},
                skip_if_exists=False,
            )
            count += 1
    return count
