"""Which results store a run uses, for its writer and for the readers of its folder.

A run writes ``results/<run-id>/results.sqlite`` unless ``results_store.url`` (``--store``) names a
PostgreSQL database; its configuration.yaml keeps that choice, so ``arl-report results/<run-id>``,
``arl-study``'s metric and the MLflow report read a run from wherever it wrote, given its folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import yaml

from ml_arl.results.run_results import RunResults, StoreReadError
from ml_arl.results.sqlite_store import STORE_FILENAME, ResultsStore, read_results
from ml_arl.results.store_buffer import BufferedStore
from ml_arl.settings import RunOptions


@dataclass(frozen=True)
class RunStore:
    """Where one run's results are: ``path`` (a results.sqlite) or ``url`` and ``run_id`` (a server)."""

    path: Optional[str] = None
    url: Optional[str] = None
    run_id: str = ""

    @property
    def exists(self) -> bool:
        return self.url is not None or (self.path is not None and os.path.isfile(self.path))

    def read(self) -> RunResults:
        if self.url is not None:
            from ml_arl.results.server_store import read_run

            return read_run(self.url, self.run_id)
        assert self.path is not None
        return read_results(self.path)


def open_store(options: RunOptions) -> Optional[BufferedStore]:
    """The run's store, opened for writing (None when ``results_store.enabled`` is false). A server
    store refuses a run id it holds unless the run resumes (appends) or is forced (replaces it)."""
    settings, cp = options.results_store, options.checkpoint_settings
    if not settings.enabled:
        return None
    if settings.url is None:
        return ResultsStore(os.path.join(cp.write_path, STORE_FILENAME), cp.run_id, settings.batch_size, settings.record_steps)
    from ml_arl.results.server_store import ServerStore

    existing = "append" if cp.resume or cp.inference else "replace" if cp.force else "refuse"
    return ServerStore(settings.url, settings.run_name or cp.run_id, settings.batch_size, settings.record_steps, existing)


def store_of(folder: str) -> RunStore:
    """The store a run folder's configuration.yaml names (results.sqlite in the folder by default)."""
    path = os.path.join(folder, STORE_FILENAME)
    try:
        with open(os.path.join(folder, "configuration.yaml"), encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError):
        return RunStore(path=path)
    store = config.get("results_store") if isinstance(config, dict) else None
    store = store if isinstance(store, dict) else {}
    url = store.get("url")
    if not isinstance(url, str) or not url:
        return RunStore(path=path)
    checkpoint = config.get("checkpoint_settings") or {}
    run_id = store.get("run_name") or (checkpoint.get("run_id") if isinstance(checkpoint, dict) else None)
    return RunStore(url=url, run_id=str(run_id or os.path.basename(os.path.normpath(folder))))


def read_folder(folder: str) -> RunResults:
    """The results of the run in ``folder``, from its own store. StoreReadError when there are none."""
    store = store_of(folder)
    if not store.exists:
        raise StoreReadError(f"no {STORE_FILENAME} in {folder}; pass a run folder written by arl-learn (results/<run-id>)")
    return store.read()
