"""``--record-demo DIR``: every behavior's acted episodes as Unity ML-Agents demonstrations,
``DIR/<behavior>.demo`` (a team of a self-play brain: ``<behavior>-team<N>.demo``), one
``ml_arl.demonstrations.DemoWriter`` per behavior id. The controller hands over each trajectory as it routes
it and closes the recorder at shutdown (Ctrl-C and errors too), so each file is complete: the
episodes that finished, none half.

A file that exists is never overwritten: when a behavior's recording starts (its first trajectory),
the next free name is taken (``Reach_1.demo``, ...), as Unity's Demonstration Recorder does, so
several recordings into one folder add up.

What is recorded are the actions the environment received, not the raw samples a trajectory
holds: ``sent_continuous`` says, per trainer type, how one becomes the other.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Collection
from typing import Optional

import numpy as np
from mlagents_envs.base_env import BehaviorSpec

from ml_arl.acting.muscle import env_continuous
from ml_arl.core.exceptions import ResultsWriteError
from ml_arl.core.experience import Trajectory
from ml_arl.demonstrations import DemoWriter
from ml_arl.demonstrations.reader import DEMO_SUFFIX
from ml_arl.settings import RunOptions

logger = logging.getLogger(__name__)


def _as_sent(raw: np.ndarray) -> np.ndarray:
    return raw


def sent_continuous(trainer_type: str) -> Callable[[np.ndarray], np.ndarray]:
    """How a behavior's trajectories' continuous actions become what its environment received,
    by the behavior's ``trainer_type``:

    - ``sac``: its muscle samples a tanh-squashed action, sends it as is and keeps it in the
      trajectory: identity;
    - anything else (``ppo``, user trainers acting with ml_arl's muscle): the trajectory keeps the
      raw Gaussian sample and the environment got ``clamp(a, -3, 3) / 3``
      (``ml_arl.acting.muscle.env_continuous``).

    A trainer whose muscle sends something else adds its case here."""
    return _as_sent if trainer_type == "sac" else env_continuous


def demo_file_stem(behavior_id: str) -> str:
    """A file name for a behavior id: "Tag?team=1" -> "Tag-team1"; anything unsafe in a name -> "_"."""
    stem = behavior_id.replace("?team=", "-team")
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", stem)


def free_demo_path(folder: str, stem: str, taken: Collection[str] = ()) -> str:
    """``folder/stem.demo``, or the first of ``stem_1.demo``, ``stem_2.demo`` ... that does not
    exist and is not ``taken``."""
    path, n = os.path.join(folder, stem + DEMO_SUFFIX), 0
    while os.path.lexists(path) or path in taken:
        n += 1
        path = os.path.join(folder, f"{stem}_{n}{DEMO_SUFFIX}")
    return path


class DemoRecorder:
    """One DemoWriter per behavior id, opened with the behavior's first trajectory."""

    def __init__(self, folder: str, options: RunOptions):
        self.folder = folder
        self.options = options
        self.writers: dict[str, DemoWriter] = {}
        self._sent: dict[str, Callable[[np.ndarray], np.ndarray]] = {}

    def record(self, trajectory: Trajectory, spec: BehaviorSpec) -> None:
        behavior = trajectory.behavior
        writer = self.writers.get(behavior)
        if writer is None:
            writer = self._open(behavior, spec)
        writer.add(trajectory, self._sent[behavior](trajectory.continuous))

    def _open(self, behavior: str, spec: BehaviorSpec) -> DemoWriter:
        path = free_demo_path(self.folder, demo_file_stem(behavior), {w.path for w in self.writers.values()})
        name = os.path.basename(path)[: -len(DEMO_SUFFIX)]  # as Unity names a demonstration after its file
        writer = self.writers[behavior] = DemoWriter(path, behavior, spec, name)
        self._sent[behavior] = sent_continuous(self.options.settings_for(behavior).trainer_type)
        logger.info("Recording the episodes of %s to %s", behavior, path)
        return writer

    def close(self) -> None:
        """Close every writer (each file complete, or none); the first write error is raised after all are closed."""
        failure: Optional[ResultsWriteError] = None
        for writer in self.writers.values():
            try:
                writer.close()
            except ResultsWriteError as err:
                failure = failure or err
        self.writers.clear()
        if failure is not None:
            raise failure
