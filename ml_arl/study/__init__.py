"""Studies: many arl-learn runs of one config, as a hyperparameter search (Optuna) or as seeds of one
config with honest statistics. ``arl-study STUDY.yaml --run-id NAME`` (ml_arl.cli.study).

Kept light (no Optuna import): arl-report asks ``is_study_folder`` of every folder it is given."""

from __future__ import annotations

import os

STORAGE_FILE = "study.db"  # a study's Optuna storage (SQLite) in its folder


def is_study_folder(path: str) -> bool:
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, STORAGE_FILE))


def storage_url(folder: str) -> str:
    """The SQLAlchemy URL of the SQLite storage in a study's folder."""
    return f"sqlite:///{os.path.abspath(os.path.join(folder, STORAGE_FILE))}"
