"""The phase schedule: which phase runs, what it asks of each brain, and when it is done.

A run without ``phases:`` is one unnamed phase ("train", or "inference" with --inference) that
ends when every trainer reached max_steps. With phases (palaestrAI's experiment phases), each
runs in order in its own folder ``results/<run>/<phase>/``; ``run_logs/phases.json`` records
which are done and how far the running one got, so --resume skips the finished ones.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any, Optional

from ml_arl.core.atomic_files import read_json_object, write_json
from ml_arl.core.exceptions import RunDirectoryError
from ml_arl.results.checkpoints import CheckpointManager
from ml_arl.settings import PhaseSettings, RunOptions, TrainerSettings
from ml_arl.trainers.trainer import Trainer, TrainerAssignment

logger = logging.getLogger(__name__)

UNLIMITED_STEPS = 2**62


class PhaseLog:
    """run_logs/phases.json: which phases are done, and where the running one stands (--resume)."""

    def __init__(self, path: str):
        self.path = path
        self.data: dict[str, Any] = {"phases": {}}

    def load(self) -> None:
        data = read_json_object(self.path, "phase log")
        if data is None:
            return
        if not isinstance(data.get("phases"), dict):
            raise RunDirectoryError(f"{self.path}: not a phase log file; --resume needs it intact")
        self.data = data

    def entry(self, name: str) -> dict[str, Any]:
        return self.data["phases"].setdefault(name, {"state": "pending"})

    def drop_unknown(self, names: list[str]) -> None:
        """Forget entries of phases the config does not name (a log written by an older arl-learn
        may hold one for the unnamed phase, "train")."""
        phases = self.data["phases"]
        for name in [n for n in phases if n not in names]:
            logger.warning("%s: phase '%s' is not in the config; its entry is dropped", self.path, name)
            del phases[name]

    def save(self) -> None:
        write_json(self.path, self.data)


class PhaseSchedule:
    """The run's phases, the current one and its counters (steps acted, episodes finished)."""

    def __init__(self, options: RunOptions):
        cp = options.checkpoint_settings
        self.options = options
        self.train_model = not cp.inference
        self.run_path = cp.write_path
        self.phased = options.phases is not None
        self.phases: list[Optional[PhaseSettings]] = list(options.phases) if options.phases else [None]
        self.phase: Optional[PhaseSettings] = None
        self.index = 0
        self.log = PhaseLog(os.path.join(cp.run_logs_dir, "phases.json"))
        self.acted: dict[str, int] = {}  # brain -> steps acted in this phase
        self.episodes: dict[str, int] = {}  # brain -> episodes finished in this phase
        self.recent: dict[str, deque[float]] = {}  # brain -> objective per step of its last episodes (stop_when)
        self.resumed = False  # the current phase was running when the run stopped (--resume)
        self.begun = False  # a phase began in this session (none does when every phase is done already)
        self.ended = False  # the current phase ended and saved its brains

    # ------------------------------------------------------------------ the current phase
    @property
    def name(self) -> str:
        if self.phase is not None:
            return self.phase.name
        return "train" if self.train_model else "inference"

    @property
    def mode(self) -> str:
        if self.phase is not None:
            return self.phase.mode
        return "train" if self.train_model else "test"

    def learns(self, brain: str) -> bool:
        return self.train_model and (self.phase is None or self.phase.learns(brain))

    @property
    def write_path(self) -> str:
        """The current phase's folder (the run's own folder without phases)."""
        return os.path.join(self.run_path, self.phase.name) if self.phase is not None else self.run_path

    @property
    def run_logs(self) -> str:
        return os.path.join(self.write_path, "run_logs") if self.phase is not None else self.options.checkpoint_settings.run_logs_dir

    @property
    def has_next(self) -> bool:
        return self.phase is not None and self.index + 1 < len(self.phases)

    def folders(self) -> list[str]:
        """Folders a brain may continue from on --resume, newest first: the current phase's, then
        the earlier phases'."""
        if self.phase is None:
            return [self.run_path]
        return [os.path.join(self.run_path, p.name) for p in reversed(self.phases[: self.index + 1]) if p is not None]

    def settings_for(self, behavior: str) -> TrainerSettings:
        return self.options.phase_settings_for(behavior, self.phase)

    # ------------------------------------------------------------------ moving through the phases
    def pending(self) -> Iterator[tuple[int, Optional[PhaseSettings]]]:
        """The phases still to run (on --resume the finished ones are skipped)."""
        if self.options.checkpoint_settings.resume:
            self.log.load()
            if self.phased:
                self.log.drop_unknown([p.name for p in self.phases if p is not None])
        for index, phase in enumerate(self.phases):
            if phase is not None and self.log.entry(phase.name).get("state") == "done":
                logger.info("Phase %s is done already; skipping it", phase.name)
                continue
            yield index, phase

    def begin(self, index: int, phase: Optional[PhaseSettings]) -> None:
        self.phase, self.index = phase, index
        self.begun, self.ended = True, False
        entry = self.log.entry(self.name)
        self.resumed = entry.get("state") == "running"
        entry["state"] = "running"
        self.acted = dict(entry.get("acted", {})) if self.resumed else {}
        self.episodes = dict(entry.get("episodes", {})) if self.resumed else {}
        self.recent = {}
        if phase is not None:
            logger.info("Phase %s (%s, %s) begins", phase.name, phase.mode,
                        f"{phase.max_steps} steps" if phase.max_steps is not None else f"{phase.episodes} episodes")

    def save_log(self) -> None:
        if self.phased:
            self.log.save()

    def environment_parameters(self) -> dict[str, Any]:
        """The parameters of this phase (curricula included, seeds not resolved): the run's, with
        the phase's on top."""
        phase = self.phase
        return {**(self.options.environment_parameters or {}), **((phase.environment_parameters if phase else None) or {})}

    def assignment(self, brain: str, trainer: Trainer, checkpoints: Optional[CheckpointManager]) -> TrainerAssignment:
        """What this phase asks of a brain: settings, learning, checkpoints and step window (the
        window starts where the brain stood when the phase began, kept in phases.json). A brain
        resumed past that start (--resume of a running phase) continues the phase with what it
        loaded (a SAC replay buffer); for every other brain the phase is new."""
        settings = self.settings_for(brain)
        learning = self.learns(brain)
        phase = self.phase
        if phase is None:
            return TrainerAssignment(settings, learning, checkpoints, settings.max_steps, 0, settings.max_steps)
        origin = int(self.log.entry(self.name).setdefault("origin", {}).setdefault(brain, trainer.step))
        if phase.max_steps is not None:
            limit, length = origin + phase.max_steps, phase.max_steps
        else:
            limit, length = UNLIMITED_STEPS, settings.max_steps
        continued = self.resumed and trainer.step > origin
        return TrainerAssignment(settings, learning, checkpoints, limit, origin, length, new_phase=not continued)

    # ------------------------------------------------------------------ counting
    def count_acted(self, brain: str, n: int) -> None:
        self.acted[brain] = self.acted.get(brain, 0) + n

    def count_episode(self, brain: str, objective: float = 0.0, length: int = 0) -> int:
        """One more episode of ``brain`` (its objective and length, for ``stop_when``); its number."""
        self.episodes[brain] = self.episodes.get(brain, 0) + 1
        windows = [s.episodes for s in (self.phase.stop_when if self.phase is not None else []) if s.behavior == brain]
        if windows:
            recent = self.recent.setdefault(brain, deque(maxlen=max(windows)))
            recent.append(objective / max(1, length))
        return self.episodes[brain]

    def stopped_early(self) -> Optional[str]:
        """The phase's ``stop_when`` that holds, said in words; None while none does."""
        for stop in self.phase.stop_when if self.phase is not None else []:
            recent = list(self.recent.get(stop.behavior, ()))[-stop.episodes:]
            if len(recent) == stop.episodes and sum(recent) / len(recent) >= stop.mean_objective_per_step:
                return (f"{stop.behavior}'s objective per step averaged {sum(recent) / len(recent):.4g} over its last "
                        f"{stop.episodes} episodes (stop_when: at least {stop.mean_objective_per_step:g})")
        return None

    def done(self, trainers: Mapping[str, Trainer]) -> bool:
        if not trainers:
            return False
        phase = self.phase
        if phase is None:
            return all(t.finished for t in trainers.values())
        learning = [b for b, t in trainers.items() if t.learning]
        counting = learning or [b for b in trainers if phase.acts(b)] or list(trainers)
        reason = self.stopped_early()
        if reason is not None:
            logger.info("Phase %s ends early: %s", phase.name, reason)
            return True
        if phase.episodes is not None:
            return all(self.episodes.get(b, 0) >= phase.episodes for b in counting)
        assert phase.max_steps is not None
        if learning:
            return all(trainers[b].step >= trainers[b].step_limit for b in learning)
        return all(self.acted.get(b, 0) >= phase.max_steps for b in counting)

    def end(self) -> None:
        """The phase is done (its brains are saved)."""
        self.ended = True
        entry = self.log.entry(self.name)
        entry["state"] = "done"
        entry["acted"], entry["episodes"] = dict(self.acted), dict(self.episodes)
        if self.phased:
            self.log.save()
        if self.phase is not None:
            logger.info("Phase %s done", self.phase.name)

    def save_progress(self) -> None:
        """The run stops: how far the running phase got, for --resume. Nothing is written when no
        phase began in this session (every phase was done, or the run stopped before the first):
        the log on disk is already right, and the unnamed phase has no entry in a phased run."""
        if not self.phased or not self.begun:
            return
        entry = self.log.entry(self.name)
        if entry.get("state") != "done":
            entry["acted"], entry["episodes"] = dict(self.acted), dict(self.episodes)
        self.log.save()
