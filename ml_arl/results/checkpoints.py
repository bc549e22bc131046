"""Checkpoints and run status, every file written atomically (temp file in the same folder,
fsync, then os.replace), so an interrupted run never leaves a half-written file behind.

Layout (as ML-Agents): results/<run>/<Behavior>/<Behavior>-<step>.pt, .../checkpoint.pt (the
newest), results/<run>/run_logs/training_status.json (checkpoint list per behavior).

A run killed at any moment (SIGKILL, power cut after the fsync) leaves every file whole; what it
may leave is a ``.tmp-*`` file of an unfinished write, which --resume removes, and a
<Behavior>-<step> file that training_status.json does not list yet or no longer lists, which the
next checkpoint removes. training_status.json never names a file that does not exist: new files
are written before it, old ones removed after it. --resume continues from checkpoint.pt; one that
cannot be read (damaged by hand or by a disk) is skipped with a warning for the newest listed
checkpoint that loads; if none loads, that is a one-line error. A write that fails (disk full,
read-only folder) is a ResultsWriteError (one line, exit code 1) and leaves the earlier files as
they were.
"""

from __future__ import annotations

import io
import logging
import os
import platform
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import torch

import ml_arl
from ml_arl.core.atomic_files import copy_file_atomic, read_json_object, write_bytes, write_json
from ml_arl.core.exceptions import ResultsWriteError, RunDirectoryError

logger = logging.getLogger(__name__)

STATUS_FORMAT_VERSION = "0.3.0"


def torch_bytes(state: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def save_torch(path: str, state: dict[str, Any]) -> None:
    write_bytes(path, torch_bytes(state))


def load_torch(path: str, device: str = "cpu") -> dict[str, Any]:
    return torch.load(path, map_location=device, weights_only=True)


def metadata() -> dict[str, Any]:
    return {
        "stats_format_version": STATUS_FORMAT_VERSION,
        "ml_arl_version": ml_arl.__version__,
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
    }


class TrainingStatus:
    """run_logs/training_status.json: per behavior {checkpoints, final_checkpoint, elo}, per
    environment parameter {lesson_num} (ml_arl.training.curriculum), and metadata, as ML-Agents.

    The file is written only after the files it names exist, and before any file it named is
    removed: it never names a missing file (``prune_missing`` drops what others removed)."""

    def __init__(self, path: str):
        self.path = path
        self.data: dict[str, Any] = {}
        self.lock = threading.RLock()

    @property
    def root(self) -> str:
        """The folder holding run_logs/ and the behaviors' folders."""
        return os.path.dirname(os.path.dirname(os.path.abspath(self.path)))

    def load(self) -> None:
        data = read_json_object(self.path, "run status")
        if data is not None:
            self.data = data

    def behavior(self, name: str) -> dict[str, Any]:
        with self.lock:
            return self.data.setdefault(name, {"checkpoints": []})

    def behaviors(self) -> list[str]:
        """Entries with checkpoints (the others are metadata and curricula's lesson numbers)."""
        return [k for k, v in self.data.items() if k != "metadata" and isinstance(v, dict) and "checkpoints" in v]

    def resolve(self, behavior: str, path: str) -> Optional[str]:
        """The file an entry names: the path as written (relative to where the run was started, as
        ML-Agents writes it), else the same name in the behavior's folder; None if neither exists."""
        if os.path.isfile(path):
            return path
        here = os.path.join(self.root, behavior, os.path.basename(path))
        return here if os.path.isfile(here) else None

    def prune_missing(self) -> None:
        """Drop checkpoint entries whose file is gone (removed by hand, or by a run killed
        before it could save this file), with a warning each."""
        with self.lock:
            for name in self.behaviors():
                entry = self.data[name]
                kept = []
                for ckpt in entry.get("checkpoints", []):
                    if not isinstance(ckpt, dict) or self.resolve(name, str(ckpt.get("file_path", ""))) is None:
                        logger.warning(
                            "%s lists the checkpoint %s, which does not exist; dropped from the list",
                            self.path, ckpt.get("file_path") if isinstance(ckpt, dict) else ckpt,
                        )
                        continue
                    ckpt["auxillary_file_paths"] = [
                        p for p in ckpt.get("auxillary_file_paths", []) if self.resolve(name, p) is not None
                    ]
                    kept.append(ckpt)
                entry["checkpoints"] = kept
                final = entry.get("final_checkpoint")
                if isinstance(final, dict) and self.resolve(name, str(final.get("file_path", ""))) is None:
                    del entry["final_checkpoint"]

    def save(self) -> None:
        with self.lock:
            self.data["metadata"] = metadata()
            write_json(self.path, self.data)


def _step_files(folder: str, behavior: str) -> dict[str, int]:
    """<behavior>-<step>.pt / .onnx files in ``folder``: name -> step."""
    pattern = re.compile(rf"{re.escape(behavior)}-(\d+)\.(pt|onnx)")
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    found = {}
    for name in names:
        m = pattern.fullmatch(name)
        if m:
            found[name] = int(m.group(1))
    return found


def resume_candidates(folder: str, behavior: str, status_path: str) -> list[str]:
    """Files --resume may continue ``behavior`` from, best first: checkpoint.pt, then the checkpoints
    that training_status.json lists (newest first), then other <behavior>-<step>.pt files (newest
    first). Only existing files; the caller tries them in order and skips those that do not load."""
    out = [os.path.join(folder, "checkpoint.pt")]
    status = TrainingStatus(status_path)
    try:
        status.load()
    except RunDirectoryError as err:
        logger.warning("%s", err)
    listed = [c for c in status.data.get(behavior, {}).get("checkpoints", []) if isinstance(c, dict)]
    for ckpt in sorted(listed, key=lambda c: int(c.get("steps", 0)), reverse=True):
        path = status.resolve(behavior, str(ckpt.get("file_path", "")))
        if path is not None:
            out.append(path)
    steps = {name: step for name, step in _step_files(folder, behavior).items() if name.endswith(".pt")}
    out += [os.path.join(folder, name) for name in sorted(steps, key=steps.__getitem__, reverse=True)]
    seen: set[str] = set()
    unique = []
    for path in out:
        key = os.path.realpath(path)
        if key not in seen and os.path.isfile(path):
            seen.add(key)
            unique.append(path)
    return unique


def checkpoint_problem(path: str) -> Optional[str]:
    """None if ``path`` reads as a checkpoint (torch.load, weights_only), else why not (one line)."""
    try:
        state = load_torch(path)
    except Exception as err:  # noqa: BLE001 - torch raises many kinds for a damaged file; all mean "unreadable"
        text = " ".join(str(err).split())
        return f"{type(err).__name__}: {text[:200]}" if text else type(err).__name__
    if not isinstance(state, dict) or "global_step" not in state:
        return "not an ml_arl checkpoint (no global_step)"
    return None


class CheckpointManager:
    """Writes <Behavior>-<step>.pt and checkpoint.pt, keeps the newest ``keep`` step files."""

    def __init__(self, behavior: str, folder: str, keep: int, status: TrainingStatus):
        self.behavior = behavior
        self.folder = folder
        self.keep = keep
        self.status = status

    @property
    def latest_path(self) -> str:
        return os.path.join(self.folder, "checkpoint.pt")

    def save(
        self, step: int, state: dict[str, Any], reward: Optional[float], final: bool = False,
        export: Optional[Callable[[str], None]] = None,
    ) -> str:
        """Write <Behavior>-<step>.pt and checkpoint.pt; ``export(path)`` writes <Behavior>-<step>.onnx
        (listed as the checkpoint's auxiliary file, removed with it). ``final`` also copies the
        ONNX model to results/<run-id>/<Behavior>.onnx.

        Order, so that a run killed at any moment leaves a consistent folder: the new files
        (each atomic), then training_status.json naming them, and only then the removal of the
        checkpoints that fell out of the list (a kill before that leaves unlisted files, which the
        next save removes). A failed write (disk full, ...) raises ResultsWriteError and changes
        nothing that was saved before."""
        path = os.path.join(self.folder, f"{self.behavior}-{step}.pt")
        data = torch_bytes(state)
        write_bytes(path, data)
        write_bytes(self.latest_path, data)
        aux: list[str] = []
        if export is not None:
            onnx_path = os.path.join(self.folder, f"{self.behavior}-{step}.onnx")
            try:
                export(onnx_path)
                aux.append(onnx_path)
                logger.info("Exported %s", onnx_path)
            except ResultsWriteError:
                raise  # the disk, not the model: the run cannot save anything more
            except Exception:  # noqa: BLE001 - a failed export must not end a long run; the .pt is safe
                logger.exception("%s: exporting the ONNX model failed; the checkpoint %s was saved", self.behavior, path)
        entry = {
            "steps": step,
            "file_path": path,
            "reward": reward,
            "creation_time": time.time(),
            "auxillary_file_paths": aux,
        }
        name = os.path.basename(path)
        with self.status.lock:
            status = self.status.behavior(self.behavior)
            checkpoints = [c for c in status.get("checkpoints", []) if os.path.basename(c["file_path"]) != name]
            checkpoints.append(entry)
            cut = max(len(checkpoints) - self.keep, 0)
            dropped, checkpoints = checkpoints[:cut], checkpoints[cut:]
            status["checkpoints"] = checkpoints
            final_entry = status.get("final_checkpoint")
            if isinstance(final_entry, dict) and any(
                os.path.basename(str(final_entry.get("file_path"))) == os.path.basename(c["file_path"]) for c in dropped
            ):
                del status["final_checkpoint"]  # its file goes now
            if final:
                self._finalize(entry)
            self.status.save()
        for old in dropped:
            for p in [old["file_path"], *old.get("auxillary_file_paths", [])]:
                self._remove(self.status.resolve(self.behavior, p))
        self._remove_unlisted(checkpoints)
        return path

    def _remove(self, path: Optional[str]) -> None:
        if path is None:
            return
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        except OSError as err:
            logger.warning("%s: could not remove an old checkpoint (%s)", path, err.strerror or err)

    def _remove_unlisted(self, listed: list[dict[str, Any]]) -> None:
        """<Behavior>-<step> files that no entry names: left by a run killed during a save."""
        keep = {os.path.basename(p) for c in listed for p in [c["file_path"], *c.get("auxillary_file_paths", [])]}
        for name in _step_files(self.folder, self.behavior):
            if name not in keep:
                logger.info("Removing %s: a checkpoint file the run status does not list", os.path.join(self.folder, name))
                self._remove(os.path.join(self.folder, name))

    def mark_final(self, step: int) -> None:
        """The newest checkpoint already holds ``step``: record it as the final one."""
        with self.status.lock:
            status = self.status.behavior(self.behavior)
            for entry in status.get("checkpoints", []):
                if entry["steps"] == step:
                    self._finalize(entry)
            self.status.save()

    def _finalize(self, entry: dict[str, Any]) -> None:
        self.status.behavior(self.behavior)["final_checkpoint"] = entry
        for aux in entry.get("auxillary_file_paths", []):
            if aux.endswith(".onnx") and os.path.isfile(aux):
                final = os.path.join(os.path.dirname(self.folder), f"{self.behavior}.onnx")
                copy_file_atomic(aux, final)
                logger.info("Copied %s to %s", aux, final)
