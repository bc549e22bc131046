"""palaestrAI's power grids: MIDAS through palaestrai-mosaik, unchanged, with the default subprocess
workers. The run file and scenario are examples/midas's (pandapower's CIGRE MV grid with PV and
wind; MIDAS' store and powergrid modules only, so nothing is downloaded), with episodes cut to 4
steps of 15 minutes. MIDAS' store starts a process of its own in the worker, and mosaik runs its
world on the worker's event loop: the run must exit 0 with no traceback and no asyncio error, the
store must hold every step, the closing line must count them, and no process may be left."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.harness import TAG, check_run, new_tag
from tests.support.runs import ROOT, arl_learn

pytest.importorskip("midas_palaestrai")
EXAMPLE = ROOT / "examples" / "midas"
STEPS = 4  # per episode: 3 train episodes and 1 test episode


def midas_folder(tmp_path: Path, steps: int = STEPS) -> Path:
    for name in ("scenario.yml", "run.yml"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    scenario = (tmp_path / "scenario.yml").read_text()
    (tmp_path / "scenario.yml").write_text(scenario.replace("end: 96*15*60", f"end: {steps}*15*60"))
    run = (tmp_path / "run.yml").read_text()
    (tmp_path / "run.yml").write_text(re.sub(r"end: 86400\b", f"end: {steps * 900}", run))
    subprocess.run([sys.executable, str(EXAMPLE / "make_grid.py")], cwd=tmp_path, check=True, capture_output=True,
                   timeout=120)
    return tmp_path


@pytest.mark.slow
def test_a_midas_run_file_trains_and_tests_with_subprocess_workers(tmp_path: Path) -> None:
    folder = midas_folder(tmp_path)
    env = new_tag()
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")  # MIDAS writes its runtime configuration there
    proc = arl_learn(["run.yml"], folder, 600, env=env)
    run = folder / "results" / "midas-cigre-mv-arl"
    episodes = check_run(proc, env[TAG], run, phases=("phase_train", "phase_test"))
    assert episodes == {"phase_train": 6, "phase_test": 2}, episodes  # both agents' episodes
    with sqlite3.connect(run / "results.sqlite") as db:
        actions = db.execute("SELECT COUNT(*) FROM muscle_actions").fetchone()[0]
        objectives = dict(db.execute("SELECT agent_name, AVG(objective) FROM muscle_actions GROUP BY agent_name"))
    assert actions == 4 * STEPS, actions  # TakingTurns: one agent acts per step
    assert f"Training finished after {actions} environment steps." in proc.stdout, proc.stdout[-2000:]
    # MIDAS' own voltage objectives, in the ranges palaestrAI's run of examples/midas shows (defender 1.4-9.6,
    # attacker 0.5-4.9 over 96 steps)
    assert 0 < objectives["defender"] < 20 and 0 < objectives["attacker"] < 10, objectives
    assert (folder / "_outputs" / "cigre_mv_arl.csv").is_file()  # the store's writer process wrote its file
