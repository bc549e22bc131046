"""run_logs/<tracker>.json: which tracker run an arl-learn run logs to, so that --resume continues it."""

from __future__ import annotations

import json
from typing import Any, Optional

from ml_arl.core.atomic_files import write_json


def known(path: str, key: str) -> Optional[Any]:
    """``key`` of the file a run wrote, or None (no file, or one that cannot be read: a new tracker run then)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data.get(key) if isinstance(data, dict) else None


def remember(path: str, data: dict[str, Any]) -> None:
    write_json(path, data)
