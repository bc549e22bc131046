"""One run folder, one run, as a user with two terminals meets it: ``arl-learn ... --run-id same
--force`` while the same command is running is refused (one line naming the running one's pid,
exit code 2, nothing deleted), and the running one finishes as if nothing happened. The first run
cannot end before the second is checked, on any machine: it has far more steps than the test waits
for and is stopped afterwards with SIGTERM (what Ctrl-C does: save, export, exit 0)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from tests.support.runs import tiny_config, write_config
from tests.support.zygote import popen_arl_learn, run_arl_learn


def test_a_second_run_on_a_live_runs_folder_is_refused_and_the_first_finishes(tmp_path: Path) -> None:
    config = tiny_config("builtin:Reach", max_steps=10_000_000)
    config["env_settings"]["num_envs"] = 1
    cfg = write_config(tmp_path / "reach.yaml", config)
    args = [str(cfg), "--run-id", "same", "--force", "--seed", "1"]
    first = popen_arl_learn(args, tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        marker = tmp_path / "results/same/run_logs/arl-run.json"  # written once the run holds its folder
        deadline = time.monotonic() + 60
        while not marker.is_file() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.is_file() and first.poll() is None, "the first run did not start"
        second = run_arl_learn(args, tmp_path, timeout=60)
        assert first.poll() is None, "the first run ended while the second was being checked"
        assert second.returncode == 2, second.stdout + second.stderr
        lines = (second.stdout + second.stderr).splitlines()
        assert len(lines) == 1 and f"held by a live run (pid {first.pid} " in lines[0], lines
        first.send_signal(signal.SIGTERM)  # the first run goes on untouched until now: stop it as Ctrl-C does
        out, err = first.communicate(timeout=90)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 0, out + err
    status = json.loads((tmp_path / "results/same/run_logs/training_status.json").read_text())
    assert status["Reach"]["final_checkpoint"]["steps"] > 0
    assert (tmp_path / "results/same/Reach/checkpoint.pt").is_file()
