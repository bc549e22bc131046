"""Checkpoints and run status, every file written atomically (temp file in the same folder,
fsync, then os.replace), so an interrupted run never leaves a half-written file behind.

Layout (as ML-Agents): results/<run>/<Behavior>/<Behavior>-<step>.pt, .../checkpoint.pt (the
newest), results/<run>/run_logs/training_status.json (checkpoint list per behavior).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import torch
import yaml

import ml_arl
from ml_arl.exceptions import RunDirectoryError

logger = logging.getLogger(__name__)

STATUS_FORMAT_VERSION = "0.3.0"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()


def atomic_write(path: str, write: Callable[[Any], None], mode: str = "wb") -> None:
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        os.chmod(tmp, _FILE_MODE)  # mkstemp makes 0600; results are ordinary files
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def copy_file_atomic(src: str, dst: str) -> None:
    with open(src, "rb") as f:
        data = f.read()
    atomic_write(dst, lambda out: out.write(data))


def write_json(path: str, data: Any) -> None:
    atomic_write(path, lambda f: json.dump(data, f, indent=4), "w")


def write_yaml(path: str, data: Any) -> None:
    atomic_write(path, lambda f: yaml.safe_dump(data, f, sort_keys=False), "w")


def save_torch(path: str, state: dict[str, Any]) -> None:
    atomic_write(path, lambda f: torch.save(state, f))


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
    """run_logs/training_status.json: per behavior {checkpoints, final_checkpoint, ...} + metadata."""

    def __init__(self, path: str):
        self.path = path
        self.data: dict[str, Any] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        if not os.path.exists(self.path):
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as err:
            raise RunDirectoryError(f"{self.path}: cannot read the run status ({err}); --resume needs it intact") from None
        if not isinstance(data, dict):
            raise RunDirectoryError(f"{self.path}: not a training status file; --resume needs it intact")
        self.data = data

    def behavior(self, name: str) -> dict[str, Any]:
        with self._lock:
            return self.data.setdefault(name, {"checkpoints": []})

    def save(self) -> None:
        with self._lock:
            self.data["metadata"] = metadata()
            write_json(self.path, self.data)


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
        ONNX model to results/<run-id>/<Behavior>.onnx."""
        path = os.path.join(self.folder, f"{self.behavior}-{step}.pt")
        save_torch(path, state)
        save_torch(self.latest_path, state)
        aux: list[str] = []
        if export is not None:
            onnx_path = os.path.join(self.folder, f"{self.behavior}-{step}.onnx")
            try:
                export(onnx_path)
                aux.append(onnx_path)
                logger.info("Exported %s", onnx_path)
            except Exception:  # noqa: BLE001 - a failed export must not end a long run; the .pt is safe
                logger.exception("%s: exporting the ONNX model failed; the checkpoint %s was saved", self.behavior, path)
        entry = {
            "steps": step,
            "file_path": path,
            "reward": reward,
            "creation_time": time.time(),
            "auxillary_file_paths": aux,
        }
        status = self.status.behavior(self.behavior)
        checkpoints = [c for c in status.setdefault("checkpoints", []) if c["file_path"] != path]
        checkpoints.append(entry)
        while len(checkpoints) > self.keep:
            old = checkpoints.pop(0)
            for p in [old["file_path"], *old.get("auxillary_file_paths", [])]:
                if os.path.exists(p):
                    os.remove(p)
        status["checkpoints"] = checkpoints
        if final:
            self._finalize(entry)
        self.status.save()
        return path

    def mark_final(self, step: int) -> None:
        """The newest checkpoint already holds ``step``: record it as the final one."""
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
