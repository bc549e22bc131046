"""Exceptions that carry a message meant for the user (printed as one line, no traceback)."""

from __future__ import annotations

from mlagents_envs.exception import (
    UnityCommunicationException,
    UnityCommunicatorStoppedException,
    UnityEnvironmentException,
    UnityTimeOutException,
)


class PalaestraiComponentError(Exception):
    """A palaestrAI environment, objective or muscle raised in a worker (ml_arl.palaestrai); the
    original exception is its ``__cause__``. Restartable, as a crashing Unity build is."""


# Failures of an environment that a fresh one may cure (as in ML-Agents); anything else stops the run.
RESTARTABLE_EXCEPTIONS: tuple[type[BaseException], ...] = (
    UnityCommunicationException,
    UnityTimeOutException,
    UnityEnvironmentException,
    UnityCommunicatorStoppedException,
    PalaestraiComponentError,
)


class ArlError(Exception):
    """Base class: an error whose message is complete on its own."""

    exit_code = 1


class ConfigError(ArlError):
    """The configuration (file or flags) is invalid. Every problem is in ``problems``."""

    exit_code = 2

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


class RunDirectoryError(ArlError):
    """The results directory does not fit the requested mode (--resume, --force, ...)."""

    exit_code = 2


class ResultsWriteError(ArlError):
    """A file of the run could not be written (disk full, read-only folder, ...); the files
    written before are intact (every write is atomic)."""

    exit_code = 1


class EnvironmentSourceError(ArlError):
    """An --env value could not be turned into an environment."""

    exit_code = 2


class WorkerError(ArlError):
    """A worker process failed. ``restartable`` tells whether a restart may fix it."""

    def __init__(self, worker_id: int, message: str, tb: str = "", restartable: bool = False):
        self.worker_id = worker_id
        self.worker_traceback = tb
        self.restartable = restartable
        super().__init__(message)


class WorkerUserError(WorkerError):
    """A worker failed with an ArlError (a bad build, the Editor never connected, ...): its message
    is complete on its own; never restarted."""


class EditorNotConnectedError(EnvironmentSourceError):
    """Editor mode: nothing connected to the Editor's port within --timeout-wait (exit code 2)."""


class RestartQuotaExceeded(ArlError):
    """A worker failed more often than max_lifetime_restarts / the rate limit allow."""


class LearnerError(ArlError):
    """A learner process of ``--num-learners`` failed or died (ml_arl.trainers.learner_group); the run stops."""


class TrainerThreadError(ArlError):
    """A trainer running in its own thread raised; the traceback is in ``thread_traceback``."""

    def __init__(self, behavior: str, message: str, tb: str):
        self.behavior = behavior
        self.thread_traceback = tb
        super().__init__(message)


class TrackerError(ArlError):
    """An experiment tracker could not start (not installed, its server not answering, a broken
    stats-writer plugin): one line, before training."""

    exit_code = 2
