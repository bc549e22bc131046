"""Trainer threads (``threaded: true``): one per brain that learns, advancing its trainer until
asked to stop. An exception in a thread is kept with its traceback and raised in the main thread
at the next check; the stop is asked (an Event), then each thread is waited for with a deadline.
"""

from __future__ import annotations

import logging
import threading
import traceback

from ml_arl.core.exceptions import LearnerError, ResultsWriteError, TrainerThreadError
from ml_arl.results.timers import Timers
from ml_arl.trainers.trainer import Trainer

logger = logging.getLogger(__name__)

TRAINER_JOIN_TIMEOUT_S = 30.0
BLOCK_TIMEOUT_S = 0.05  # a thread waits this long for a trajectory before checking for a stop


class TrainerThreads:
    def __init__(self, timers: Timers, allowed: bool = True):
        self.timers = timers
        self.allowed = allowed  # False in a deterministic run: every trainer advances in the main loop
        self.stop_event = threading.Event()  # shared with the AgentManagers (their puts give up when set)
        self.threads: dict[str, threading.Thread] = {}
        self.errors: list[tuple[str, BaseException, str]] = []

    def start(self, brain: str, trainer: Trainer) -> None:
        if self.allowed and trainer.settings.threaded and trainer.learning and brain not in self.threads:
            thread = threading.Thread(target=self._loop, args=(brain, trainer), name=f"trainer-{brain}", daemon=True)
            self.threads[brain] = thread
            thread.start()

    def runs(self, brain: str) -> bool:
        return brain in self.threads

    def _loop(self, brain: str, trainer: Trainer) -> None:
        try:
            while not self.stop_event.is_set():
                with self.timers.timed("trainer_advance"):
                    trainer.advance(block_timeout=BLOCK_TIMEOUT_S)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread with its traceback
            self.errors.append((brain, exc, traceback.format_exc()))

    def check(self) -> None:
        """Raise the first error of a trainer thread in the calling (main) thread."""
        if self.errors:
            brain, exc, tb = self.errors[0]
            if isinstance(exc, (ResultsWriteError, LearnerError)):
                logger.debug("trainer thread of %s raised:\n%s", brain, tb.rstrip())
                raise exc  # a full disk or a learner process that died, not a bug: its one line says it all
            logger.error("trainer thread of %s raised:\n%s", brain, tb.rstrip())
            raise TrainerThreadError(brain, f"trainer of {brain} failed: {type(exc).__name__}: {exc}", tb) from exc

    def stop(self) -> None:
        """Ask every thread to stop and wait for each, up to TRAINER_JOIN_TIMEOUT_S."""
        self.stop_event.set()
        for brain, thread in self.threads.items():
            thread.join(timeout=TRAINER_JOIN_TIMEOUT_S)
            if thread.is_alive():
                logger.warning("trainer thread of %s did not stop within %.0f s", brain, TRAINER_JOIN_TIMEOUT_S)

    def unsafe(self) -> set[str]:
        """Brains whose state may be half-updated: their thread failed or is still running."""
        failed = {brain for brain, _, _ in self.errors}
        return failed | {brain for brain, thread in self.threads.items() if thread.is_alive()}

    def rearm(self) -> None:
        """After a phase: the threads have stopped; the next phase starts new ones."""
        self.threads = {}
        self.stop_event.clear()
