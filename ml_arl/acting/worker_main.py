"""The worker side of the subprocess backend (ml_arl.envs.backends.subprocess_env_manager):
``worker_main``, the entry point of a worker process. It sends its behavior specs, then answers
every command on its pipe (``ml_arl.acting.env_runner.answer``) until CLOSE; a failure is
shipped as a FailedReply with its traceback, and the environment is closed in any case."""

from __future__ import annotations

import logging
import os
import signal
import sys
from multiprocessing.connection import Connection
from typing import Optional

import cloudpickle

from ml_arl.acting.env_runner import EnvRunner, answer, failure_of
from ml_arl.acting.observation_slots import SharedFiles
from ml_arl.acting.worker_protocol import ClosedReply, FailedReply, SpecsReply, WorkerCommand
from ml_arl.core.env_factory import EnvFactory

logger = logging.getLogger(__name__)


def worker_main(
    conn: Connection, factory_bytes: bytes, worker_id: int, seed: int, steps_per_message: int, nice: int = 0,
    shared_prefix: str = "", shared_cap_bytes: int = 0,
) -> None:
    """Entry point of a worker process; with ``shared_prefix``, trajectories' observations go to
    files in shared memory of that name (at most ``shared_cap_bytes`` per behavior)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process decides when we stop
    if nice:
        os.nice(nice)  # lower priority (env_settings.worker_nice): inherited by what the env starts
    runner: Optional[EnvRunner] = None
    shared = SharedFiles(shared_prefix, shared_cap_bytes) if shared_prefix and shared_cap_bytes > 0 else None
    try:
        factory: EnvFactory = cloudpickle.loads(factory_bytes)
        runner = EnvRunner(factory(worker_id, seed), worker_id, seed, shared)
        conn.send(SpecsReply(worker_id, runner.take_new_specs(), extras=runner.behavior_extras()))
        while True:
            command: WorkerCommand = conn.recv()
            reply = answer(runner, command, steps_per_message)
            if reply is None:  # CloseCommand
                break
            conn.send(reply)
    except (EOFError, ConnectionError):  # EOF, a broken or a reset pipe
        if shared is not None:
            shared.remove_all()  # the main process is gone: nobody maps or removes these files now
    except BaseException as exc:  # noqa: BLE001 - shipped to the main process, never swallowed
        failure = failure_of(exc)
        try:
            conn.send(FailedReply(worker_id, failure))
        except (OSError, EOFError):
            sys.stderr.write(f"worker {worker_id} failed and could not report it:\n{failure.traceback}")
    finally:
        if runner is not None:
            try:
                runner.close()
            except Exception as exc:  # noqa: BLE001 - closing after a failure must not hide the failure
                logger.warning("worker %d: closing its environment raised %s: %s", worker_id, type(exc).__name__,
                               (str(exc).strip().splitlines() or [""])[0])
        try:
            conn.send(ClosedReply(worker_id))
        except (OSError, EOFError):
            pass
        conn.close()
