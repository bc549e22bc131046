"""The CLIs print our INFO records and other libraries' records only from WARNING up (unless --debug)."""
from __future__ import annotations

import io
import logging

from ml_arl.cli.logs import configure_logging


def test_other_libraries_info_is_hidden_ours_and_their_warnings_are_shown() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        configure_logging(False, stream=stream)
        logging.getLogger("pandapower.plotting").info("Failed to import plotly")
        logging.getLogger("ml_arl.training").info("ours")
        logging.getLogger("grid2op").warning("theirs, a warning")
        assert stream.getvalue().splitlines() == ["[INFO] ours", "[WARNING] theirs, a warning"]
        stream.truncate(0), stream.seek(0)
        configure_logging(True, stream=stream)
        logging.getLogger("pandapower.plotting").info("Failed to import plotly")
        assert "Failed to import plotly" in stream.getvalue()
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
