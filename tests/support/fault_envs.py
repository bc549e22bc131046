"""BaseEnv factories that fail on purpose, for the fault-injection tests (tests/envs/test_faults.py).

Used as ``--env tests.support.fault_envs:make_env --env-args fault=<kind> at_step=<n> ...``. Worker
processes import this module, so the run needs the repository root on ``sys.path`` (cwd = repo
root, or PYTHONPATH).

``make_env`` builds ``ml_arl.envs.games.builtin.Reach`` (continuous, 4 agents) with injected faults;
``make_tag`` builds ``ml_arl.envs.games.tag.Tag`` (self-play, two teams) with the reset faults only:

  fault=<kind>        what ``step()`` number ``at_step`` does (counted per process life):
      none            nothing (``step_sleep`` can still slow the env down)
      value_error     raises ValueError(message)                    -> not restartable
      unity           raises UnityCommunicationException(message)   -> restartable
      hang            sleeps ``hang_s`` seconds                     -> caught by --timeout-wait
      block           writes its pid to <state_dir>/blocked-<worker>-<life> and sleeps ``hang_s``
                      seconds: the worker is parked mid-run and a test can SIGKILL it
  create_fault=<kind> the constructor raises: none / unity / value_error
  reset_fault=<kind>  what ``reset()`` number ``at_reset`` (default 2) does, counted per process
                      life; reset 1 is the one every worker makes when it starts, later ones are a
                      phase switch or a self-play team change:
      none / value_error / unity / hang   as for ``fault``
      kill            the worker SIGKILLs itself (a worker killed in the middle of a reset)

Options:
  only_worker=<id>    faults only in that worker (the others run clean)
  state_dir=<dir>     per-worker life counter (<dir>/lives-<worker>), pid files
                      (<dir>/pid-<worker>-<life>) and block markers; required by lives/create_lives
  lives=[1, 3]        the lives (1 = first process of that worker) in which ``fault`` and
                      ``reset_fault`` fire; default: every life
  create_lives=[2]    the same for ``create_fault``
  step_sleep=<s>      sleep per env step, to make a run last long enough to interfere with it

With state_dir, ``set_environment_parameters`` (a phase switch, or a restarted worker joining the
current phase) writes the parameters as JSON to <dir>/params-<worker>-<life>.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import time
from typing import Optional

from mlagents_envs.exception import UnityCommunicationException

from ml_arl.envs.games.builtin import Reach
from ml_arl.envs.games.tag import Tag

STEP_FAULTS = ("none", "value_error", "unity", "hang", "block")
CREATE_FAULTS = ("none", "value_error", "unity")
RESET_FAULTS = ("none", "value_error", "unity", "hang", "kill")


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


class ResetFaults:
    """Counts resets per process life and fires ``reset_fault`` at reset ``at_reset``."""

    def _setup_resets(
        self, worker_id: int, reset_fault: str, at_reset: int, targeted: bool, state_dir: Optional[str],
        lives: Optional[list[int]], hang_s: float, message: str,
    ) -> None:
        if reset_fault not in RESET_FAULTS:
            raise ValueError(f"reset_fault must be one of {RESET_FAULTS}, got {reset_fault!r}")
        self.worker_id = worker_id
        self.state_dir = state_dir
        self.life = next_life(state_dir, worker_id) if state_dir else 1
        if state_dir:
            write_atomic(os.path.join(state_dir, f"pid-{worker_id}-{self.life}"), str(os.getpid()))
        self.reset_fault = reset_fault if targeted and (lives is None or self.life in lives) else "none"
        self.at_reset = at_reset
        self.resets = 0
        self.hang_s = hang_s
        self.message = message

    def _count_reset(self) -> None:
        self.resets += 1
        if self.resets != self.at_reset or self.reset_fault == "none":
            return
        if self.reset_fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        _raise(self.reset_fault, f"worker {self.worker_id} life {self.life}: {self.message} at reset {self.resets}")
        time.sleep(self.hang_s)  # hang

    def set_environment_parameters(self, params: dict) -> None:
        if self.state_dir:
            write_atomic(os.path.join(self.state_dir, f"params-{self.worker_id}-{self.life}"), json.dumps(params))


class FaultyReach(ResetFaults, Reach):
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
        reset_fault: str = "none",
        at_reset: int = 2,
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
        targeted = only_worker is None or only_worker == worker_id
        self._setup_resets(worker_id, reset_fault, at_reset, targeted, state_dir, lives, hang_s, message)
        self.fault = fault if targeted and (lives is None or self.life in lives) else "none"
        self.at_step = at_step
        self.step_sleep = step_sleep
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

    def reset(self) -> None:
        self._count_reset()
        super().reset()


def make_env(worker_id: int, seed: int, **kwargs) -> FaultyReach:
    return FaultyReach(worker_id, seed, **kwargs)


class FaultyTag(ResetFaults, Tag):
    def __init__(
        self,
        worker_id: int = 0,
        seed: int = 0,
        num_areas: int = 8,
        reset_fault: str = "none",
        at_reset: int = 2,
        only_worker: Optional[int] = None,
        state_dir: Optional[str] = None,
        lives: Optional[list[int]] = None,
        hang_s: float = 120.0,
        message: str = "injected fault",
    ):
        if lives is not None and not state_dir:
            raise ValueError("lives needs state_dir")
        super().__init__(seed=seed, num_areas=num_areas)
        targeted = only_worker is None or only_worker == worker_id
        self._setup_resets(worker_id, reset_fault, at_reset, targeted, state_dir, lives, hang_s, message)

    def reset(self) -> None:
        self._count_reset()
        super().reset()


def make_tag(worker_id: int, seed: int, num_areas: int = 8, **kwargs) -> FaultyTag:
    return FaultyTag(worker_id, seed, num_areas, **kwargs)
