"""Statistics: reporters per behavior (category) and the writers that own the outputs.

Tags follow ML-Agents ("Environment/Cumulative Reward", "Losses/Value Loss", ...). Values are
averaged over each summary period and written when the trainer step crosses a multiple of
summary_freq, at that multiple.
"""

from __future__ import annotations

import glob
import logging
import os
import struct
import threading
import time
from typing import NamedTuple, Optional, Protocol

import numpy as np

from ml_arl.core.exceptions import ResultsWriteError

logger = logging.getLogger(__name__)


class StatsSummary(NamedTuple):
    mean: float  # the value written: the mean, or the sum for "sum" stats
    std: float
    n: int
    histogram: Optional[np.ndarray] = None  # every value of the period, for "histogram" stats
    aggregation: str = "average"  # how the period's values became ``mean``: average, sum or histogram


class StatsWriter(Protocol):
    def write_stats(self, category: str, values: dict[str, StatsSummary], step: int) -> None: ...

    def close(self) -> None: ...


EVENT_FILE_GLOB = "events.out.tfevents.*"


def _write_error(path: str, err: OSError) -> ResultsWriteError:
    from ml_arl.core.atomic_files import write_error

    return write_error(path, err)


_hook_lock = threading.Lock()
_hook_installed = False


def _quiet_event_writer_threads() -> None:
    """TensorBoard writes event files from a thread that, when a write fails (disk full), prints
    its traceback and stores the error, which the next flush raises here (and we report it in one
    line). Keep that thread's OSError from printing a traceback; every other thread's exception is
    shown as before."""
    global _hook_installed
    with _hook_lock:
        if _hook_installed:
            return
        from tensorboard.summary.writer.event_file_writer import _AsyncWriterThread

        previous = threading.excepthook

        def hook(args: threading.ExceptHookArgs) -> None:
            if isinstance(args.thread, _AsyncWriterThread) and isinstance(args.exc_value, OSError):
                logger.debug("TensorBoard writer thread: %s", args.exc_value)
                return
            previous(args)

        threading.excepthook = hook
        _hook_installed = True


class TensorboardWriter:
    """One event file per behavior under results/<run-id>/<Behavior>/. Each summary is flushed to
    the file at once; a run killed while writing may leave a torn last record, which
    ``repair_event_files`` cuts off on --resume (each session writes a new event file)."""

    def __init__(self, base_dir: str, clear_past_data: bool):
        self.base_dir = base_dir
        self.clear_past_data = clear_past_data
        self._writers: dict[str, object] = {}

    def _writer(self, category: str):  # noqa: ANN202 - SummaryWriter is imported lazily
        writer = self._writers.get(category)
        if writer is None:
            from torch.utils.tensorboard import SummaryWriter

            _quiet_event_writer_threads()
            path = os.path.join(self.base_dir, category)
            try:
                os.makedirs(path, exist_ok=True)
                if self.clear_past_data:
                    for old in glob.glob(os.path.join(path, EVENT_FILE_GLOB)):
                        os.remove(old)
                writer = self._writers[category] = SummaryWriter(path)
            except OSError as err:
                raise _write_error(getattr(err, "filename", None) or path, err) from None
        return writer

    def write_stats(self, category: str, values: dict[str, StatsSummary], step: int) -> None:
        writer = self._writer(category)
        try:
            for key, summary in values.items():
                writer.add_scalar(key, summary.mean, step)  # type: ignore[attr-defined]
                if summary.histogram is not None:
                    writer.add_histogram(f"{key}_hist", summary.histogram, step)  # type: ignore[attr-defined]
            writer.flush()  # type: ignore[attr-defined]
        except OSError as err:
            raise _write_error(getattr(err, "filename", None) or writer.log_dir, err) from None  # type: ignore[attr-defined]

    def close(self) -> None:
        for category, writer in self._writers.items():
            try:
                writer.close()  # type: ignore[attr-defined]
            except OSError as err:  # closing after a failed write: the error was reported already
                logger.warning("%s: closing the TensorBoard event file failed (%s)", category, err.strerror or err)


def _masked_crc(data: bytes) -> int:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    return int(masked_crc32c(data))


def intact_event_bytes(path: str) -> int:
    """How many leading bytes of a TensorBoard event file are whole records (length, its CRC, data,
    data CRC). Every header CRC is checked, the data CRC of the last record only (a kill tears the
    end of the file, where the writer appends)."""
    size = os.path.getsize(path)
    good = 0
    last: Optional[tuple[int, int]] = None  # (offset, length) of the last whole record
    with open(path, "rb") as f:
        while good + 12 <= size:
            f.seek(good)
            head = f.read(12)
            (length,) = struct.unpack("<Q", head[:8])
            if _masked_crc(head[:8]) != struct.unpack("<I", head[8:])[0] or good + 16 + length > size:
                break
            last = (good, length)
            good += 16 + length
        if last is not None:
            f.seek(last[0] + 12)
            data = f.read(last[1])
            if _masked_crc(data) != struct.unpack("<I", f.read(4))[0]:
                good = last[0]
    return good


def repair_event_files(root: str) -> list[str]:
    """Cut a torn last record off every event file under ``root`` (left by a killed run, or a
    full disk); TensorBoard then reads each to its end. Returns the files that were cut."""
    repaired = []
    for folder, _, files in os.walk(root):
        for name in files:
            if not name.startswith("events.out.tfevents."):
                continue
            path = os.path.join(folder, name)
            try:
                good, size = intact_event_bytes(path), os.path.getsize(path)
                if good < size:
                    os.truncate(path, good)
                    logger.warning("%s: cut off %d bytes of a torn last record (the run was killed while writing)",
                                   path, size - good)
                    repaired.append(path)
            except OSError as err:
                raise _write_error(path, err) from None
    return repaired


class ConsoleWriter:
    """The ML-Agents console line, every summary period."""

    def __init__(self) -> None:
        self.start = time.time()

    def write_stats(self, category: str, values: dict[str, StatsSummary], step: int) -> None:
        parts = [category, f"Step: {step}", f"Time Elapsed: {time.time() - self.start:0.3f} s"]
        reward = values.get("Environment/Cumulative Reward")
        if reward is not None and reward.n > 0:
            parts.append(f"Mean Reward: {reward.mean:0.3f}")
            group = values.get("Environment/Group Cumulative Reward")  # POCA: the group's return replaces the std
            parts.append(f"Mean Group Reward: {group.mean:0.3f}" if group is not None and group.n > 0 else f"Std of Reward: {reward.std:0.3f}")
            objective = values.get("Objective/Cumulative Objective")
            if objective is not None and abs(objective.mean - reward.mean) > 1e-9:
                parts.append(f"Mean Objective: {objective.mean:0.3f}")
        else:
            parts.append("No episode was completed since last summary")
        training = values.get("Is Training")
        parts.append("Training" if training is None or training.mean > 0 else "Not Training")
        elo = values.get("Self-play/ELO")
        if elo is not None and elo.n > 0:
            parts.append(f"ELO: {elo.mean:0.3f}")
        logger.info(". ".join(parts) + ".")

    def close(self) -> None:
        pass


class GaugeWriter:
    """Mirrors every stat into the timers.json gauges (<Behavior>.<Tag>.mean)."""

    def __init__(self, timers) -> None:  # noqa: ANN001 - ml_arl.results.timers.Timers
        self.timers = timers

    def write_stats(self, category: str, values: dict[str, StatsSummary], step: int) -> None:
        for key, summary in values.items():
            name = f"{category}.{key.replace('/', '.').replace(' ', '')}.mean"
            self.timers.set_gauge(name, summary.mean)

    def close(self) -> None:
        pass


HIDDEN_FROM_TENSORBOARD = ("Is Training",)


class StepCounter:
    """Environment steps of the whole run (all workers), counted by the controller."""

    def __init__(self) -> None:
        self.total = 0


class StatsReporter:
    """Collects values for one category (behavior) between summaries. Thread-safe.
    With an ``env_steps`` counter it adds "Environment/Steps Per Second" over each summary period."""

    def __init__(self, category: str, writers: list[StatsWriter], env_steps: StepCounter | None = None):
        self.category = category
        self.writers = writers
        self.env_steps = env_steps
        self._last_rate_point = (time.monotonic(), env_steps.total if env_steps else 0)
        self._lock = threading.Lock()
        self._values: dict[str, list[float]] = {}
        self._aggregation: dict[str, str] = {}
        self._recent_rewards: list[float] = []

    def add_stat(self, key: str, value: float, aggregation: str = "average") -> None:
        """``aggregation``: "average" (the mean is written), "sum", or "histogram" (the mean, plus a
        TensorBoard histogram "<key>_hist" of the values)."""
        with self._lock:
            self._values.setdefault(key, []).append(float(value))
            if aggregation != "average":
                self._aggregation[key] = aggregation

    def set_stat(self, key: str, value: float) -> None:
        with self._lock:
            self._values[key] = [float(value)]

    def add_episode_reward(self, reward: float) -> None:
        with self._lock:
            self._recent_rewards.append(reward)

    def take_mean_episode_reward(self) -> float | None:
        """Mean return of episodes since the last call (checkpoint 'reward' in training_status)."""
        with self._lock:
            rewards, self._recent_rewards = self._recent_rewards, []
        return float(np.mean(rewards)) if rewards else None

    def _summary(self, key: str, values: list[float]) -> StatsSummary:
        arr = np.asarray(values, np.float64)
        aggregation = self._aggregation.get(key, "average")
        if aggregation == "sum":
            return StatsSummary(float(arr.sum()), 0.0, len(arr), None, "sum")
        if aggregation == "histogram":
            return StatsSummary(float(arr.mean()), float(arr.std()), len(arr), arr, "histogram")
        return StatsSummary(float(arr.mean()), float(arr.std()), len(arr))

    def write_stats(self, step: int) -> None:
        if self.env_steps is not None:
            now, total = time.monotonic(), self.env_steps.total
            then, before = self._last_rate_point
            if now > then:
                self.set_stat("Environment/Steps Per Second", (total - before) / (now - then))
            self._last_rate_point = (now, total)
        with self._lock:
            values, self._values = self._values, {}
        summaries = {k: self._summary(k, v) for k, v in values.items() if v}
        for writer in self.writers:
            shown = summaries
            if isinstance(writer, TensorboardWriter):
                shown = {k: v for k, v in summaries.items() if k not in HIDDEN_FROM_TENSORBOARD}
            writer.write_stats(self.category, shown, step)
