"""examples/python_api.py, as docs/python-api.md shows it, runs as a user runs it: a script in a
process of its own that trains CartPole with StopOnReward, loads the policy and evaluates it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "python_api.py"


def test_the_docs_show_the_example_as_it_is() -> None:
    doc = (ROOT / "docs" / "python-api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, re.S)
    assert EXAMPLE.read_text() in blocks


@pytest.mark.slow
def test_the_python_api_example_trains_stops_loads_and_evaluates(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--results-dir", str(tmp_path), "--threshold", "475"],
        cwd=ROOT, capture_output=True, text=True, timeout=240, env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "stopped: StopOnReward" in proc.stdout, proc.stdout
    assert re.search(r"vector env: 2 sub-environments, \d+ episodes ended", proc.stdout), proc.stdout
    mean = float(re.search(r"evaluation: mean return ([\d.]+)", proc.stdout).group(1))  # type: ignore[union-attr]
    assert mean >= 300, proc.stdout  # solved in training (475 over 20 episodes); played deterministically
    assert (tmp_path / "cartpole-api" / "CartPole.onnx").is_file()
