"""How the command-line tools print log records: ours at INFO, other libraries' only from WARNING up.

Libraries we load announce themselves at INFO (pandapower: "Failed to import plotly"), which would
otherwise land between our own lines and break a one-line error. ``--debug`` shows every record.
"""
from __future__ import annotations

import logging
import sys
from typing import Any, Optional

OURS = ("ml_arl", "__main__")


class _OthersFromWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.name.split(".")[0] in OURS


def configure_logging(debug: bool, stream: Optional[Any] = None, fmt: Optional[str] = None) -> None:
    """Send records to ``stream`` (stdout by default), replacing any handler set up before."""
    if fmt is None:
        fmt = ("%(asctime)s +%(relativeCreated)d ms %(levelname)s [%(filename)s:%(lineno)d] %(message)s" if debug
               else "[%(levelname)s] %(message)s")
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, format=fmt, stream=stream or sys.stdout, force=True)
    if not debug:
        for handler in logging.getLogger().handlers:
            handler.addFilter(_OthersFromWarning())
    for noisy in ("matplotlib", "PIL", "alembic", "numba"):  # their DEBUG records drown ours under --debug
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # a tracker's server retried: the tracker says what failed, once
