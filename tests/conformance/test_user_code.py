"""Environments and scripts as users write them, run unchanged with the default subprocess
workers: an environment that starts a process, one that starts a thread, one that runs an asyncio
loop, one that prints to stdout, one that takes 10 s to start; a script without a ``__main__``
guard whose environment class is defined in it, the same script piped in on stdin; and a SIGKILL
of ``arl-learn`` that must leave no process behind, whatever the environments started."""

from __future__ import annotations

import glob
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from ml_arl.acting.observation_slots import FILE_PREFIX, shared_dir
from tests.conformance.harness import (
    TAG,
    assert_no_orphans,
    check_run,
    new_tag,
    run_case,
    run_script,
    tagged,
    two_phases,
)
from tests.conformance.user_envs import SLOW_START_S
from tests.support.zygote import popen_arl_learn

USER_ENVS = ["starts_process", "starts_thread", "runs_asyncio", "prints_to_stdout"]


@pytest.mark.parametrize("factory", USER_ENVS)
def test_an_environment_doing_what_users_do_trains_and_tests(tmp_path: Path, factory: str) -> None:
    proc, episodes = run_case(tmp_path, two_phases(f"tests.conformance.user_envs:{factory}"))
    if factory == "prints_to_stdout":
        assert "PrintsToStdout: reset" in proc.stdout and "PrintsToStdout: step" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.slow
def test_an_environment_that_takes_10_s_to_start_needs_no_flag(tmp_path: Path) -> None:
    """A start of 10 s is within a worker's start deadline (2 x --timeout-wait + 5 s) at the
    default --timeout-wait: nothing is restarted, no flag is needed."""
    start = time.monotonic()
    proc, _ = run_case(tmp_path, two_phases("tests.conformance.user_envs:slow_start", train_steps=300, test_episodes=2))
    assert time.monotonic() - start >= SLOW_START_S
    assert "Restarting worker" not in proc.stdout + proc.stderr


SCRIPT = '''\
import numpy as np
import ml_arl
from ml_arl.envs.games.builtin import Reach


class MyReach(Reach):
    """A user's environment, defined in the script: it reaches the workers by value (cloudpickle)."""

    def step(self):
        self.stepped = getattr(self, "stepped", 0) + 1
        super().step()


def make_env(seed):
    return MyReach(seed=seed)


config = {
    "env_settings": {"num_envs": 2},
    "default_settings": {"trainer_type": "ppo", "max_steps": 600, "summary_freq": 10000,
                         "hyperparameters": {"batch_size": 64, "buffer_size": 256},
                         "network_settings": {"hidden_units": 32, "num_layers": 1}},
    "phases": [{"name": "train", "mode": "train", "max_steps": 600}, {"name": "test", "mode": "test", "episodes": 4}],
}
run = ml_arl.train(config, run_id="script", env=make_env, force=True)
print("trained", run.steps, "env steps", run.env_steps)
'''


@pytest.mark.parametrize("stdin", [False, True], ids=["python train.py", "python - < train.py"])
def test_a_script_without_a_main_guard_trains_with_a_class_defined_in_it(tmp_path: Path, stdin: bool) -> None:
    """Workers start from ml_arl's own fork server and never import the script: without a guard
    each would run the training again (multiprocessing's spawn and forkserver do import it)."""
    proc, tag = run_script(tmp_path, SCRIPT, stdin=stdin)
    assert re.search(r"^trained \{'Reach': \d+\} env steps \d+$", proc.stdout, re.M), proc.stdout + proc.stderr
    assert proc.stdout.count("trained") == 1, proc.stdout
    check_run(proc, tag, tmp_path / "results" / "script")
    saved = yaml.safe_load((tmp_path / "results" / "script" / "configuration.yaml").read_text())
    assert saved["env_settings"]["env_path"] == "__main__:make_env"


def test_a_nested_factory_is_one_config_error_line(tmp_path: Path) -> None:
    script = "import ml_arl\ndef outer():\n    return lambda seed: None\nml_arl.train(None, run_id='x', env=outer())\n"
    proc, tag = run_script(tmp_path, script)
    assert proc.returncode != 0
    assert "ConfigError: train(): env=<function outer.<locals>.<lambda>" in proc.stderr, proc.stderr
    assert "define it at the top level" in proc.stderr
    assert_no_orphans(tag)


def test_sigkill_of_arl_learn_leaves_no_process_behind(tmp_path: Path) -> None:
    """arl-learn is SIGKILLed while its two workers' environments each run a helper process of
    their own: the workers (their lifelines close), the helpers (their workers' process groups),
    and the fork server all go."""
    config = two_phases("tests.conformance.user_envs:starts_process", train_steps=10**7)
    config["default_settings"]["summary_freq"] = 500
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(config))
    env = new_tag()
    log = tmp_path / "console.log"
    with open(log, "w") as out:
        proc = popen_arl_learn([str(path), "--run-id", "kill"], tmp_path, env, stdout=out, stderr=subprocess.STDOUT)
        try:
            end = time.monotonic() + 120
            while "Mean Reward" not in log.read_text() and time.monotonic() < end and proc.poll() is None:
                time.sleep(0.2)
            assert "Mean Reward" in log.read_text(), log.read_text()[-3000:]
            names = [cmd for _, cmd in tagged(env[TAG])]
            # the fork server, 2 workers, 2 helpers (arl-learn, forked by the test's zygote, shows the zygote's
            # environment in /proc: it is checked by its exit)
            assert len(names) >= 5, names
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert_no_orphans(env[TAG])
    # nor a shared file of its workers' observations (ml_arl.acting.observation_slots)
    assert not glob.glob(os.path.join(shared_dir(), f"{FILE_PREFIX}{proc.pid}-*"))


def test_a_factory_that_cannot_be_pickled_is_one_line(tmp_path: Path) -> None:
    script = ("import threading\nimport ml_arl\nfrom ml_arl.envs.games.builtin import Reach\nLOCK = threading.Lock()\n"
              "def make_env(seed):\n    with LOCK:\n        return Reach(seed=seed)\n"
              "ml_arl.train(None, run_id='x', env=make_env)\n")
    proc, tag = run_script(tmp_path, script)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ml_arl.core.exceptions.EnvironmentSourceError: --env __main__:make_env: cannot be sent"), proc.stderr
    assert "manager: inprocess" in last
    assert_no_orphans(tag)
