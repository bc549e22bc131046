"""A stand-in Unity player build for tests and benchmarks: ``standin.py`` plays the C# side of the
ML-Agents gRPC protocol (communication API 1.5.0) with five small learnable behaviors.

- ``make_build(folder)`` writes an executable "player" that ``UnityEnvironment(file_name=...)`` (or
  the trainer's ``--env``) launches exactly as it launches a Unity build.
- ``start_editor(port, *args)`` starts it as the Unity Editor would be (it connects to ``port``, where
  a ``UnityEnvironment(file_name=None, base_port=port)`` listens).

Options of the stand-in: see the docstring of standin.py.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from pathlib import Path
from typing import IO, Optional, Union

STANDIN = Path(__file__).with_name("standin.py")

_LAUNCHER = """#!{python}
# Stand-in Unity player build, written by tests.support.unity_standin.make_build: runs {standin}
import runpy
import sys

sys.argv[0] = {standin!r}
runpy.run_path({standin!r}, run_name="__main__")
"""

_SHELL_LAUNCHER = """#!/bin/sh
# Stand-in Unity player build, written by tests.support.unity_standin.make_build: runs {standin}
exec {python} {standin} "$@"
"""


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def make_build(folder: Union[Path, str], name: str = "Standin.x86_64") -> Path:
    """Writes an executable launcher ``folder/name`` (mode 755) that runs standin.py with this
    interpreter (``sys.executable``, so grpc and mlagents_envs import) and its own argv.
    Returns its path: what tests pass as ``--env`` / ``file_name``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    python = sys.executable
    if any(c.isspace() for c in python) or len(python) > 120:  # a shebang cannot hold it
        text = _SHELL_LAUNCHER.format(python=_sh_quote(python), standin=_sh_quote(str(STANDIN)))
    else:
        text = _LAUNCHER.format(python=python, standin=str(STANDIN))
    path.write_text(text)
    os.chmod(path, 0o755)
    return path


def start_editor(
    port: int = 5004, *args: str, log_file: Optional[Union[Path, str]] = None
) -> subprocess.Popen[bytes]:
    """Starts the stand-in by hand, as an Editor entering Play mode: no --mlagents-port, it connects
    to ``port`` (waiting up to --connect-timeout, default 30 s, for the trainer's server).
    ``args`` are extra stand-in options. Its log lines (and any traceback) go to ``log_file`` when
    given, else nowhere. The caller ends it (``proc.kill()``) if it is still running."""
    out: Union[int, IO[bytes]] = subprocess.DEVNULL
    if log_file is not None:
        out = open(log_file, "ab")  # noqa: SIM115 - handed to the child, closed below
    try:
        return subprocess.Popen(
            [sys.executable, str(STANDIN), "--editor-port", str(port), *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    finally:
        if out is not subprocess.DEVNULL:
            out.close()  # type: ignore[union-attr]


def free_base_port(count: int = 1) -> int:
    """A base port with ``count`` free ports above it, chosen at random so that tests running side
    by side (and builds of earlier tests in TIME_WAIT) do not collide."""
    for _ in range(200):
        base = random.randrange(20000, 60000 - count)
        for port in range(base, base + count):
            with socket.socket() as s:
                try:
                    s.bind(("localhost", port))
                except OSError:
                    break
        else:
            return base
    raise RuntimeError("no free ports between 20000 and 60000")
