"""BaseEnv factories that fail on purpose, for the fault-injection tests (tests/test_faults.py).

Used as ``--env tests.fault_envs:make_env --env-args fault=<kind> at_step=<n> ...``. Worker
processes import this module, so the run needs the repository root on ``sys.path`` (cwd = repo
root, or PYTHONPATH).

Every env is ``ml_arl.envs.builtin.Reach`` (continuous, 4 agents) with injected faults:

  fault=<kind>        what ``step()`` number ``at_step`` does (counted per process life):
      none            nothing (``step_sleep`` can still slow the env down)
      value_error     raises ValueError(message)                    -> not restartable
      unity           raises UnityCommunicationException(message)   -> restartable
      hang            sleeps ``hang_s`` seconds                     -> caught by --timeout-wait
      block           writes its pid to <state_dir>/blocked-<worker>-<life> and sleeps ``hang_s``
                      seconds: the worker is parked mid-run and a test can SIGKILL it
  create_fault=<kind> the constructor raises: none / unity / value_error

Options:
  only_worker=<id>    faults only in that worker (the others run clean)
  state_dir=<dir>     per-worker life counter (<dir>/lives-<worker>), pid files
                      (<dir>/pid-<worker>-<life>) and block markers; required by lives/create_lives
  lives=[1, 3]        the lives (1 = first process of that worker) in which ``fault`` fires;
                      default: every life
  create_lives=[2]    the same for ``create_fault``
  step_sleep=<s>      sleep per env step, to make a run last long enough to interfere with it
"""

from __future__ import annotations

import fcntl
import os
import time
from typing import Optional

from mlagents_envs.exception import UnityCommunicationException

from ml_arl.envs.builtin import Reach

STEP_FAULTS = ("none", "value_error", "unity", "hang", "block")
CREATE_FAULTS = ("none", "value_error", "unity")


def next_life(state_dir: str, worker_id: int) -> int:
    """Increment and return the life counter of ``worker_id`` (1 for its first process)."""
    os.makedirs(state_dir, exist_ok=True)
    path = os.path.join(state_dir, f"lives-{worker_id}")
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        life = int(f.read() or 0) + 1
        f.seek(0)
        f.truncate()
        f.write(str(life))
        f.flush()
    return life


def write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _raise(kind: str, message: str) -> None:
    if kind == "value_error":
        raise ValueError(message)
    if kind == "unity":
        raise UnityCommunicationException(message)


class FaultyReach(Reach):
    def __init__(
        self,
        worker_id: int = 0,
        seed: int = 0,
        fault: str = "none",
        at_step: int = 20,
        create_fault: str = "none",
        only_worker: Optional[int] = None,
        state_dir: Optional[str] = None,
        lives: Optional[list[int]] = None,
        create_lives: Optional[list[int]] = None,
        step_sleep: float = 0.0,
        hang_s: float = 120.0,
        message: str = "injected fault",
    ):
        if fault not in STEP_FAULTS:
            raise ValueError(f"fault must be one of {STEP_FAULTS}, got {fault!r}")
        if create_fault not in CREATE_FAULTS:
            raise ValueError(f"create_fault must be one of {CREATE_FAULTS}, got {create_fault!r}")
        if (lives is not None or create_lives is not None or fault == "block") and not state_dir:
            raise ValueError("lives, create_lives and fault=block need state_dir")
        super().__init__("continuous", seed=seed)
        self.worker_id = worker_id
        self.state_dir = state_dir
        self.life = next_life(state_dir, worker_id) if state_dir else 1
        if state_dir:
            write_atomic(os.path.join(state_dir, f"pid-{worker_id}-{self.life}"), str(os.getpid()))
        targeted = only_worker is None or only_worker == worker_id
        self.fault = fault if targeted and (lives is None or self.life in lives) else "none"
        self.at_step = at_step
        self.step_sleep = step_sleep
        self.hang_s = hang_s
        self.message = message
        self.steps = 0
        if targeted and (create_lives is None or self.life in create_lives):
            _raise(create_fault, f"worker {worker_id} life {self.life}: {message} on create")

    def step(self) -> None:
        self.steps += 1
        if self.step_sleep:
            time.sleep(self.step_sleep)
        if self.steps == self.at_step and self.fault != "none":
            text = f"worker {self.worker_id} life {self.life}: {self.message} at step {self.steps}"
            _raise(self.fault, text)
            if self.fault == "block":
                assert self.state_dir
                write_atomic(os.path.join(self.state_dir, f"blocked-{self.worker_id}-{self.life}"), str(os.getpid()))
            time.sleep(self.hang_s)  # hang / block
        super().step()


def make_env(worker_id: int, seed: int, **kwargs) -> FaultyReach:
    return FaultyReach(worker_id, seed, **kwargs)
