"""Fault injection: killed, crashing, raising and hung workers, while stepping and while resetting
(phase switch, self-play team change); one console line per failure with the tracebacks in
run_logs/worker_errors.log; Ctrl-C and --resume.

The end-to-end tests run arl-learn with a tiny config, a results dir under tmp_path and hard
timeouts: those that signal the run or check what its processes print themselves run
``python -m ml_arl.cli.learn`` as a subprocess (cwd = repository root, PYTHONPATH including it, so
worker processes can import ``tests.support.fault_envs``); the others run the same command line through
its ``main()`` in the test process (``run_to_end``), with worker processes all the same.
The unit tests check RestartQuota and
EnvManager.handle_failure against hand-computed expectations.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Optional

import pytest

from ml_arl.core.exceptions import RestartQuotaExceeded, WorkerError, WorkerUserError
from ml_arl.envs.backends.env_manager import WORKER_ERRORS_LOG, EnvManager, RestartQuota, WorkerErrorLog
from ml_arl.settings import EnvSettings
from tests.support.faults import (
    BEHAVIOR,
    ENV,
    REPO,
    SELF_PLAY,
    assert_no_traceback,
    assert_tracebacks_only_from_workers,
    behavior_dir,
    last_line,
    lines_with,
    read_pid,
    run_command_to_end,
    run_to_end,
    start_run,
    status,
    worker_errors,
    write_config,
)
from tests.support.runs import arl_learn_here


@pytest.mark.slow
def test_sigkill_worker_is_restarted_and_run_finishes(tmp_path: Path) -> None:
    """Worker 0 parks itself at step 20 of its first life; the test SIGKILLs it; worker 1 keeps
    going meanwhile. The run must restart worker 0 (restart 1 of 10) and finish normally."""
    state = tmp_path / "state"
    config = write_config(tmp_path, max_steps=3000)
    run = start_run(
        tmp_path, config, "kill",
        num_envs=2,
        env_args=("fault=block", "at_step=20", "only_worker=0", "lives=[1]", f"state_dir={state}", "step_sleep=0.004"),
    )
    blocked = state / "blocked-0-1"
    run.wait_for("worker 0 to block", lambda: read_pid(blocked) is not None)
    pid = read_pid(blocked)
    assert pid == read_pid(state / "pid-0-1"), "the blocked env is not worker 0's first life"
    os.kill(pid, signal.SIGKILL)
    rc = run.wait()
    out = run.output()
    assert rc == 0, out
    restarts = lines_with(run.stdout, "Restarting worker[")
    assert len(restarts) == 1, out  # one line per failure
    assert "Restarting worker[0] after WorkerDied: worker process died (killed by signal 9) (restart 1 of 10)" in restarts[0], out
    assert "Training finished" in run.stdout, out
    assert_no_traceback(run)
    log = worker_errors(tmp_path, "kill")
    assert "worker 0: WorkerDied: worker process died (killed by signal 9) (restart 1 of 10)\n(no traceback)" in log, log
    assert read_pid(state / "pid-0-2") not in (None, pid), "worker 0 was not started again"
    assert (state / "lives-1").read_text() == "1", "worker 1 must not have been restarted"
    final = status(tmp_path, "kill")[BEHAVIOR]["final_checkpoint"]
    assert final["steps"] >= 3000, final
    assert (behavior_dir(tmp_path, "kill") / "checkpoint.pt").is_file()


def test_restart_quota_exceeded_stops_with_one_line_reason(tmp_path: Path) -> None:
    """Every life of worker 0 raises UnityCommunicationException at step 20: the first failure
    is restarted, the second one within 60 s exceeds --restarts-rate-limit-n 1. With --debug the
    worker's tracebacks are on the console too."""
    config = write_config(tmp_path, max_steps=5000)
    run = run_to_end(
        tmp_path, config, "quota", "--restarts-rate-limit-n", "1", "--debug",
        env_args=("fault=unity", "at_step=20", "message=comm-lost-31337", f"state_dir={tmp_path / 'state'}"),
    )
    out = run.output()
    assert run.returncode == 1, out
    assert run.stdout.count("Restarting worker[0]") == 1, out
    assert "(restart 1 of 10)" in run.stdout, out
    final = last_line(run.stdout)
    assert "exceeded the allowed number of restarts" in final, out
    assert "Worker 0" in final and "comm-lost-31337" in final, out
    assert "restarts_rate_limit_n=1" in final, out
    log_path = tmp_path / "results" / "quota" / "run_logs" / WORKER_ERRORS_LOG
    assert final.endswith(f"(traceback in {log_path})"), out
    assert_tracebacks_only_from_workers(run, 0)
    assert "UnityCommunicationException: worker 0 life 1: comm-lost-31337 at step 20" in run.stdout, out
    assert "UnityCommunicationException: worker 0 life 2: comm-lost-31337 at step 20" in run.stdout, out
    log = worker_errors(tmp_path, "quota")
    assert log.count("Traceback (most recent call last)") == 2, log
    assert "(restart 1 of 10)" in log and "(beyond the restart quota: the run stops)" in log, log
    assert (tmp_path / "state" / "lives-0").read_text() == "2", out  # no third life
    assert (behavior_dir(tmp_path, "quota") / "checkpoint.pt").is_file(), out
    assert status(tmp_path, "quota")[BEHAVIOR]["final_checkpoint"]["steps"] >= 0


@pytest.mark.slow
def test_sigint_saves_checkpoint_and_resume_continues(tmp_path: Path) -> None:
    """Started with SIGINT ignored, as a shell without job control starts a background command:
    SIGINT still saves and stops the run."""
    config = write_config(tmp_path, max_steps=1_000_000, summary_freq=500)
    ignored = "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)"
    run = start_run(tmp_path, config, "intr", num_envs=2, env_args=("step_sleep=0.002",), tag="first", code=ignored)
    run.wait_for("1000 trained steps", lambda: max(map(int, re.findall(r"Step: (\d+)\.", run.stdout)), default=0) >= 1000)
    run.proc.send_signal(signal.SIGINT)
    rc = run.wait(timeout=60)
    out = run.output()
    assert rc == 0, out
    assert "Learning was interrupted" in run.stdout, out
    assert "Traceback" not in run.stdout + run.stderr, out
    bdir = behavior_dir(tmp_path, "intr")
    assert (bdir / "checkpoint.pt").is_file(), out
    saved = status(tmp_path, "intr")[BEHAVIOR]["final_checkpoint"]
    n = saved["steps"]
    assert n >= 1000, saved
    assert (bdir / f"{BEHAVIOR}-{n}.pt").is_file(), sorted(os.listdir(bdir))
    assert Path(saved["file_path"]).name == f"{BEHAVIOR}-{n}.pt"

    config2 = write_config(tmp_path, max_steps=n + 2000, name="config2.yaml")
    resumed = arl_learn_here(  # the same command line, through main() in this process (resumes through the command: test_kill_resume)
        [str(config2), "--run-id", "intr", "--results-dir", str(tmp_path / "results"), "--num-envs", "2", "--seed", "1",
         "--torch-device", "cpu", "--resume", "--env", ENV],
        cwd=REPO,
    )
    out = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, out
    m = re.search(rf"Resuming {BEHAVIOR} from \S+ at step (\d+)", resumed.stdout)
    assert m is not None, out
    assert int(m.group(1)) == n, out
    assert "Training finished" in resumed.stdout, out
    final = status(tmp_path, "intr")[BEHAVIOR]["final_checkpoint"]["steps"]
    assert final > n and final >= n + 2000, out
    assert (bdir / f"{BEHAVIOR}-{final}.pt").is_file(), sorted(os.listdir(bdir))


def test_raising_env_stops_run_with_worker_traceback(tmp_path: Path) -> None:
    config = write_config(tmp_path, max_steps=5000)
    run = run_command_to_end(
        tmp_path, config, "valerr",
        num_envs=2,
        env_args=("fault=value_error", "at_step=20", "only_worker=1", "message=boom-4711"),
    )
    out = run.output()
    assert run.returncode == 1, out
    assert "Restarting worker" not in run.stdout, out  # a ValueError is not restartable
    assert_no_traceback(run)  # one line on the console ...
    assert len(lines_with(run.stdout, "boom-4711")) == 1, out
    final = last_line(run.stdout)
    assert "worker 1" in final and "ValueError" in final and "boom-4711" in final, out
    assert "(traceback in " in final and WORKER_ERRORS_LOG in final, out
    log = worker_errors(tmp_path, "valerr")  # ... and the worker's traceback in run_logs
    assert "worker 1: ValueError: worker 1 life 1: boom-4711 at step 20 (not restartable: the run stops)" in log, log
    assert "Traceback (most recent call last)" in log, log
    assert "in step" in log and "fault_envs.py" in log, log  # the worker's frames
    assert "ValueError: worker 1 life 1: boom-4711 at step 20" in log, log


@pytest.mark.slow
def test_hung_env_times_out(tmp_path: Path) -> None:
    """Worker 0 hangs (8 s) at step 20 while worker 1 keeps answering; with --timeout-wait 2
    (+ 2 s grace) and no restarts allowed the run stops after 4 s and names worker 0. (hang_s=8
    rather than a forever-hang only keeps shutdown short should the kill not happen.)"""
    config = write_config(tmp_path, max_steps=6000)
    run = run_to_end(
        tmp_path, config, "hang", "--timeout-wait", "2", "--max-lifetime-restarts", "0",
        num_envs=2,
        env_args=("fault=hang", "at_step=20", "only_worker=0", "hang_s=8", "step_sleep=0.004"),
    )
    out = run.output()
    assert run.returncode == 1, out
    final = last_line(run.stdout)
    assert "Worker 0" in final, out
    assert "did not answer a step within 4 s (--timeout-wait 2 s; hung?)" in final, out
    assert "exceeded the allowed number of restarts" in final, out
    assert "Training finished" not in run.stdout, out
    assert_no_traceback(run)
    assert "(no traceback)" in worker_errors(tmp_path, "hang")


@pytest.mark.slow
def test_env_failing_to_start_after_a_restart_is_restarted_again(tmp_path: Path) -> None:
    """Life 1 of worker 0 loses its connection at step 20; life 2 fails while being created
    (a restartable UnityCommunicationException); life 3 runs clean. With unlimited rate and 10
    lifetime restarts the failed start is one more restartable failure and must be counted and
    restarted, not end the run. (Upstream ML-Agents stops here too: its reset after a restart
    re-raises; this test holds ml_arl to its own rule "Unity* exceptions are restartable".)"""
    state = tmp_path / "state"
    config = write_config(tmp_path, max_steps=3000)
    run = run_to_end(
        tmp_path, config, "recreate", "--restarts-rate-limit-n", "-1",
        env_args=(
            "fault=unity", "lives=[1]", "at_step=20", "create_fault=unity", "create_lives=[2]", f"state_dir={state}",
        ),
    )
    out = run.output()
    assert run.returncode == 0, out
    assert "(restart 1 of 10)" in run.stdout, out
    assert "(restart 2 of 10)" in run.stdout, out
    assert (state / "lives-0").read_text() == "3", out
    assert "Training finished" in run.stdout, out


def test_worker_killed_during_a_phase_switch_is_restarted_with_the_new_parameters(tmp_path: Path) -> None:
    """Worker 0 SIGKILLs itself in its second reset: the reset of the switch to phase two, with
    environment_parameters {level: 2.0}. It is restarted (restart 1 of 10), the new worker joins
    with phase two's parameters, and both phases run to their step counts."""
    state = tmp_path / "state"
    config = write_config(tmp_path, max_steps=100000, phase_steps=600)
    run = run_to_end(
        tmp_path, config, "phase",
        num_envs=2,
        env_args=("reset_fault=kill", "at_reset=2", "only_worker=0", "lives=[1]", f"state_dir={state}"),
    )
    out = run.output()
    assert run.returncode == 0, out
    restarts = lines_with(run.stdout, "Restarting worker[")
    assert restarts == [
        "[WARNING] Restarting worker[0] after WorkerDied: worker process died (killed by signal 9) "
        "[during a reset with new environment parameters] (restart 1 of 10)"
    ], out
    assert_no_traceback(run)
    assert "Training finished" in run.stdout, out
    assert (state / "lives-0").read_text() == "2" and (state / "lives-1").read_text() == "1", out
    assert json.loads((state / "params-0-2").read_text()) == {"level": 2.0}, out  # joined phase two
    for phase, steps in (("one", 600), ("two", 1200)):
        path = tmp_path / "results" / "phase" / phase / "run_logs" / "training_status.json"
        final = json.loads(path.read_text())[BEHAVIOR]["final_checkpoint"]["steps"]
        assert steps <= final < steps + 200, (phase, final)
    assert "worker 0: WorkerDied" in worker_errors(tmp_path, "phase")


def test_worker_killed_during_a_selfplay_reset_is_restarted(tmp_path: Path) -> None:
    """builtin:Tag self-play with team_change 1000: the learning team changes at step 1000 and
    every env is reset; worker 1 SIGKILLs itself in that reset and is restarted; the run ends at
    max_steps."""
    state = tmp_path / "state"
    config = tmp_path / "tag.yaml"
    config.write_text(SELF_PLAY.format(max_steps=3000, team_change=1000))
    run = run_to_end(
        tmp_path, config, "selfplay", "--num-areas", "4",
        num_envs=2, env="tests.support.fault_envs:make_tag",
        env_args=("reset_fault=kill", "at_reset=2", "only_worker=1", "lives=[1]", f"state_dir={state}"),
    )
    out = run.output()
    assert run.returncode == 0, out
    assert "team 1 learns now" in run.stdout, out
    restarts = lines_with(run.stdout, "Restarting worker[")
    assert restarts == [
        "[WARNING] Restarting worker[1] after WorkerDied: worker process died (killed by signal 9) "
        "[during a reset] (restart 1 of 10)"
    ], out
    assert_no_traceback(run)
    assert (state / "lives-1").read_text() == "2" and (state / "lives-0").read_text() == "1", out
    final = status(tmp_path, "selfplay")["Tag"]["final_checkpoint"]["steps"]
    assert 3000 <= final < 3200, final


def test_reset_failure_beyond_the_quota_is_one_line(tmp_path: Path) -> None:
    """Worker 0 raises in the reset of the phase switch; with --max-lifetime-restarts 0 the run
    stops with one line and exit code 1; the traceback is in run_logs/worker_errors.log."""
    config = write_config(tmp_path, max_steps=100000, phase_steps=400)
    run = run_to_end(
        tmp_path, config, "resetquota", "--max-lifetime-restarts", "0",
        env_args=("reset_fault=unity", "at_reset=2", "message=reset-lost-2718"),
    )
    out = run.output()
    assert run.returncode == 1, out
    assert_no_traceback(run)
    assert lines_with(run.stdout + run.stderr, "reset-lost-2718") == [last_line(run.stdout)], out
    final = last_line(run.stdout)
    assert final.startswith("[ERROR] Training stopped: Worker 0 exceeded the allowed number of restarts"), out
    assert "UnityCommunicationException: worker 0 life 1: reset-lost-2718 at reset 2 " \
           "[during a reset with new environment parameters]" in final, out
    assert "Restarting" not in run.stdout and "Training finished" not in run.stdout, out
    log = worker_errors(tmp_path, "resetquota")
    assert "Traceback (most recent call last)" in log and "in reset" in log and "fault_envs.py" in log, log


@pytest.mark.slow
def test_worker_hung_in_a_reset_is_killed_and_restarted(tmp_path: Path) -> None:
    """Worker 0 hangs in the reset of the phase switch: after --timeout-wait 2 (+ 2 s grace) it
    is killed (not left running), restarted, and the run finishes."""
    state = tmp_path / "state"
    config = write_config(tmp_path, max_steps=100000, phase_steps=400)
    run = run_to_end(
        tmp_path, config, "resethang", "--timeout-wait", "2",
        num_envs=2,
        env_args=("reset_fault=hang", "at_reset=2", "hang_s=60", "only_worker=0", "lives=[1]", f"state_dir={state}"),
    )
    out = run.output()
    assert run.returncode == 0, out
    restarts = lines_with(run.stdout, "Restarting worker[")
    assert len(restarts) == 1 and "Restarting worker[0] after environment did not answer a reset within 4 s" in restarts[0], out
    assert "(restart 1 of 10)" in restarts[0], out
    assert_no_traceback(run)
    hung = read_pid(state / "pid-0-1")
    assert hung is not None
    with pytest.raises(ProcessLookupError):
        os.kill(hung, 0)  # killed, not left behind
    assert (state / "lives-0").read_text() == "2", out


# --------------------------------------------------------------------------- unit level


def test_worker_error_log_waits_for_the_run_folder(tmp_path: Path) -> None:
    """Entries wait in memory (nothing is created) until open(); then they and later ones are appended."""
    run_logs = tmp_path / "results" / "r" / "run_logs"
    log = WorkerErrorLog(str(run_logs))
    early = WorkerError(0, "worker 0: UnityTimeOutException: slow", "Traceback (most recent call last):\n  early\n", True)
    log.record(early, "restart 1 of 10")
    assert not (tmp_path / "results").exists()
    assert log.hint(early) == " (run with --debug to see the traceback)"
    log.open()
    text = (run_logs / WORKER_ERRORS_LOG).read_text()
    assert re.match(r"=== \d{4}-\d\d-\d\d \d\d:\d\d:\d\d worker 0: UnityTimeOutException: slow \(restart 1 of 10\)\n"
                    r"Traceback \(most recent call last\):\n  early\n\n$", text), text
    log.record(WorkerError(1, "worker 1: WorkerDied: gone", "", True), "beyond the restart quota: the run stops")
    text = (run_logs / WORKER_ERRORS_LOG).read_text()
    assert text.count("===") == 2 and "worker 1: WorkerDied: gone (beyond the restart quota: the run stops)\n(no traceback)" in text
    assert log.hint(early) == f" (traceback in {run_logs / WORKER_ERRORS_LOG})"
    assert log.hint(WorkerError(1, "worker 1: WorkerDied: gone", "", True)) == ""  # nothing to read
    assert log.hint(WorkerUserError(0, "worker 0: no build", "tb", False)) == ""  # a complete message


def test_handle_failure_records_every_failure_and_names_the_log(tmp_path: Path) -> None:
    log = WorkerErrorLog(str(tmp_path))
    log.open()
    mgr = _StubManager(EnvSettings(max_lifetime_restarts=1, restarts_rate_limit_n=-1), log)
    mgr.handle_failure(WorkerError(0, "worker 0: RuntimeError: one", "Traceback (most recent call last):\n  one\n", True))
    with pytest.raises(RestartQuotaExceeded) as info:
        mgr.handle_failure(WorkerError(0, "worker 0: RuntimeError: two", "Traceback (most recent call last):\n  two\n", True))
    assert str(info.value).endswith(f"last failure: RuntimeError: two (traceback in {tmp_path / WORKER_ERRORS_LOG})")
    err = WorkerError(1, "worker 1: ValueError: three", "Traceback (most recent call last):\n  three\n", False)
    with pytest.raises(WorkerError) as raised:
        mgr.handle_failure(err)
    assert raised.value is err and str(err) == f"worker 1: ValueError: three (traceback in {tmp_path / WORKER_ERRORS_LOG})"
    text = (tmp_path / WORKER_ERRORS_LOG).read_text()
    assert "RuntimeError: one (restart 1 of 1)" in text and "RuntimeError: two (beyond the restart quota" in text
    assert "ValueError: three (not restartable" in text and text.count("Traceback") == 3


def _inprocess(tmp_path: Path, **kwargs):
    from ml_arl.core.env_factory import EnvFactory
    from ml_arl.envs.backends.inprocess_env_manager import InProcessEnvManager
    from tests.support.fault_envs import make_env

    factory = EnvFactory("faulty", make_env, {"state_dir": str(tmp_path / "state"), **kwargs}, pass_worker_id=True)
    return InProcessEnvManager(factory, EnvSettings(num_envs=2, manager="inprocess", restarts_rate_limit_n=-1), 0)


def test_inprocess_reset_failures_are_restarted_with_the_parameters(tmp_path: Path) -> None:
    """In-process: a raising reset (phase switch) rebuilds that env with the new parameters; the
    others keep theirs; beyond the quota it raises."""
    state = tmp_path / "state"
    mgr = _inprocess(tmp_path, reset_fault="unity", at_reset=2, only_worker=1, lives=[1])
    try:
        mgr.start()
        mgr.set_environment_parameters({"level": 3.0})
        assert mgr.quota.counts[1] == 1 and mgr.quota.counts[0] == 0
        assert (state / "lives-1").read_text() == "2" and (state / "lives-0").read_text() == "1"
        assert json.loads((state / "params-1-2").read_text()) == {"level": 3.0}
        assert len(mgr.step()) == 2
    finally:
        mgr.close()


def test_inprocess_start_and_reset_failures_go_through_the_quota(tmp_path: Path) -> None:
    mgr = _inprocess(tmp_path, create_fault="unity", create_lives=[1], reset_fault="unity", at_reset=2)
    try:
        mgr.start()  # both workers fail to start once and are rebuilt
        assert dict(mgr.quota.counts) == {0: 1, 1: 1}
        mgr.quota.max_lifetime = 1
        with pytest.raises(RestartQuotaExceeded, match=r"reset 2 \[during a reset\]"):
            mgr.reset()
    finally:
        mgr.close()


def test_quota_lifetime_limit() -> None:
    q = RestartQuota(max_lifetime=3, rate_n=-1, period_s=60)
    for i in range(3):
        assert q.allows(0, now=float(i))
        assert q.record(0, now=float(i)) == i + 1
    assert not q.allows(0, now=3.0)
    assert not q.allows(0, now=1e6)  # lifetime restarts never expire
    assert q.allows(1, now=3.0)  # per worker


def test_quota_lifetime_zero_never_allows() -> None:
    q = RestartQuota(max_lifetime=0, rate_n=-1, period_s=60)
    assert not q.allows(0, now=0.0)
    assert not q.allows(5, now=100.0)


def test_quota_rate_limit_window() -> None:
    q = RestartQuota(max_lifetime=-1, rate_n=1, period_s=60)
    assert q.allows(0, now=100.0)
    q.record(0, now=100.0)
    assert not q.allows(0, now=100.0)
    assert not q.allows(0, now=130.0)
    assert not q.allows(0, now=159.5)
    assert q.allows(0, now=160.5)
    assert q.allows(1, now=100.0)  # other workers have their own window
    q.record(0, now=160.5)
    assert not q.allows(0, now=200.0)
    assert q.allows(0, now=221.0)


def test_quota_rate_limit_n2_sliding() -> None:
    q = RestartQuota(max_lifetime=-1, rate_n=2, period_s=10)
    q.record(0, now=0.0)
    assert q.allows(0, now=5.0)
    q.record(0, now=5.0)
    assert not q.allows(0, now=9.0)  # 2 in (−1, 9]
    assert q.allows(0, now=10.5)  # the restart at 0 left the window, the one at 5 did not
    q.record(0, now=10.5)
    assert not q.allows(0, now=14.9)  # 5 and 10.5 are in the window
    assert q.allows(0, now=15.5)


def test_quota_both_limits() -> None:
    q = RestartQuota(max_lifetime=2, rate_n=1, period_s=10)
    q.record(0, now=0.0)
    assert not q.allows(0, now=5.0)  # rate
    assert q.allows(0, now=11.0)
    q.record(0, now=11.0)
    assert not q.allows(0, now=100.0)  # lifetime (2 of 2), although the rate window is empty


def test_quota_unlimited() -> None:
    q = RestartQuota(max_lifetime=-1, rate_n=-1, period_s=60)
    for i in range(1000):
        assert q.allows(0, now=0.0)
        assert q.record(0, now=0.0) == i + 1


class _StubManager(EnvManager):
    def __init__(self, settings: EnvSettings, error_log: Optional[WorkerErrorLog] = None):
        super().__init__(settings, error_log)
        self.restarted: list[int] = []

    @property
    def num_workers(self) -> int:
        return 2

    def start(self):  # pragma: no cover - not used
        return {}

    def set_environment_parameters(self, params):  # pragma: no cover - not used
        pass

    def step(self):  # pragma: no cover - not used
        return []

    def close(self) -> None:  # pragma: no cover - not used
        pass

    def reset(self) -> None:  # pragma: no cover - not used
        pass

    def exchange(self, commands):  # pragma: no cover - not used
        return {}

    def restart_worker(self, worker_id: int) -> None:
        self.restarted.append(worker_id)


def test_handle_failure_not_restartable_is_raised_unchanged() -> None:
    mgr = _StubManager(EnvSettings())
    err = WorkerError(1, "worker 1: ValueError: nope", "tb", restartable=False)
    with pytest.raises(WorkerError) as info:
        mgr.handle_failure(err)
    assert info.value is err
    assert mgr.restarted == []


def test_handle_failure_restarts_until_quota(caplog: pytest.LogCaptureFixture) -> None:
    mgr = _StubManager(EnvSettings(max_lifetime_restarts=10, restarts_rate_limit_n=1, restarts_rate_limit_period_s=60))
    caplog.set_level("WARNING")
    mgr.handle_failure(WorkerError(0, "worker 0: WorkerDied: gone", restartable=True))
    assert mgr.restarted == [0]
    assert "Restarting worker[0]" in caplog.text and "restart 1 of 10" in caplog.text
    mgr.handle_failure(WorkerError(1, "worker 1: WorkerDied: gone", restartable=True))  # own quota
    assert mgr.restarted == [0, 1]
    with pytest.raises(RestartQuotaExceeded, match="exceeded the allowed number of restarts"):
        mgr.handle_failure(WorkerError(0, "worker 0: WorkerDied: again", restartable=True))
    assert mgr.restarted == [0, 1]


def test_handle_failure_unlimited_label(caplog: pytest.LogCaptureFixture) -> None:
    mgr = _StubManager(EnvSettings(max_lifetime_restarts=-1, restarts_rate_limit_n=-1))
    caplog.set_level("WARNING")
    for _ in range(5):
        mgr.handle_failure(WorkerError(0, "x", restartable=True))
    assert mgr.restarted == [0] * 5
    assert "restart 5 of unlimited" in caplog.text


@pytest.mark.timeout(120)
def test_large_policies_and_replies_do_not_deadlock_the_pipes() -> None:
    """Weights bigger than a pipe buffer going one way while big trajectory batches come the
    other way: the worker's reader thread keeps both sides moving."""
    import threading

    from ml_arl.core.actor_weights import PolicyMessage
    from ml_arl.envs.backends.subprocess_env_manager import SubprocessEnvManager
    from ml_arl.envs.sources import resolve_env
    from ml_arl.networks.actor_critic import ActorCritic
    from ml_arl.results.summary_writers import StatsReporter
    from ml_arl.settings import EnvSettings, NetworkSettings
    from ml_arl.training.router import AgentManager

    settings = EnvSettings(num_envs=2, env_path="builtin:Trivial", env_args=["n_agents=600"], timeout_wait=30)
    manager = SubprocessEnvManager(resolve_env(settings.env_path, settings.env_args), settings, 0)
    try:
        spec = manager.start()["Trivial"]
        net = ActorCritic(spec, NetworkSettings(hidden_units=256))
        weights = net.muscle_weights()
        assert sum(layer.w.nbytes for layer in weights.body) > 250_000
        sink = AgentManager("Trivial", StatsReporter("Trivial", []), False, threading.Event())
        for version in range(12):
            manager.set_policy("Trivial", PolicyMessage(version, weights, 16, False))
            for batch in manager.step():
                sink.add_trajectories(batch.trajectories, lambda: None)
            sink.trajectory_queue.drain()
    finally:
        manager.close()
