"""arl-learn against Unity builds, played by the stand-in build (tests/support/unity_standin): training
with several workers, environment parameters and engine settings reaching the build, stats in
TensorBoard, the Editor mode, failures (crash, hang, self-quit, bad path, busy port, wrong
protocol version), loopback-only listening and the exported ONNX models."""

from __future__ import annotations

import glob
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.support.runs import arl_learn, arl_learn_here, arl_learn_watched
from tests.support.unity_standin import free_base_port, make_build, start_editor
from tests.support.zygote import popen_arl_learn


def config(tmp_path: Path, max_steps: int = 20000, behaviors: tuple[str, ...] = ("Seeker",), summary_freq: int = 2000,
           **extra: Any) -> Path:
    settings = {
        "trainer_type": "ppo",
        "hyperparameters": {"batch_size": 256, "buffer_size": 1024, "learning_rate": 3.0e-3, "beta": 1.0e-3, "num_epoch": 4},
        "network_settings": {"hidden_units": 32, "num_layers": 2},
        "reward_signals": {"extrinsic": {"gamma": 0.95}},
        "max_steps": max_steps,
        "time_horizon": 32,
        "summary_freq": summary_freq,
        "checkpoint_interval": 10000,
        "threaded": True,
    }
    data: dict[str, Any] = {"behaviors": {b: settings for b in behaviors}, **extra}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def tb_scalars(folder: Path) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for event_file in glob.glob(str(folder / "events.out.tfevents.*")):
        acc = EventAccumulator(event_file, size_guidance={"scalars": 0, "histograms": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, []).extend(e.value for e in acc.Scalars(tag))
        for tag in acc.Tags()["histograms"]:
            out.setdefault(tag, []).append(float(len(acc.Histograms(tag))))
    return out


def mean_rewards(stdout: str, behavior: str = "Seeker") -> list[float]:
    return [float(m) for m in re.findall(rf"{behavior}\. Step: \d+\. .*?Mean Reward: (-?\d+\.\d+)", stdout)]


def one_line_error(proc: subprocess.CompletedProcess[str], rc: int = 2) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode == rc, out
    assert "Traceback" not in out, out
    lines = [line for line in out.splitlines() if "error" in line.lower()]
    assert lines, out
    return lines[-1]


@pytest.fixture
def build(tmp_path: Path) -> Path:
    return make_build(tmp_path / "builds")


@pytest.fixture
def editor_port() -> Any:
    """Port 5004, the Unity Editor's, is one per machine: a test that needs it holds this lock (a
    file in the temp folder), so test runs side by side (pytest-xdist, other checkouts) take turns."""
    import fcntl
    import tempfile

    with open(Path(tempfile.gettempdir()) / "ml_arl-tests-editor-port-5004.lock", "w") as lock:
        deadline = time.monotonic() + 600
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, "another test run held port 5004 for 10 minutes"
                time.sleep(0.2)
        try:
            yield 5004
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.mark.slow
def test_build_with_two_workers_learns_and_gets_parameters_engine_settings_and_stats(tmp_path: Path, build: Path) -> None:
    cfg = config(
        tmp_path,
        environment_parameters={
            "target_range": {"sampler_type": "uniform", "sampler_parameters": {"min_value": 0.6, "max_value": 0.9}},
            "bonus": 0.25,
        },
    )
    port = free_base_port(2)
    trainer = arl_learn_watched(  # stopped (SIGTERM: save and exit 0, as Ctrl-C) once solved, else max_steps
        [cfg, "--env", build, "--num-envs", "2", "--base-port", port, "--run-id", "ball", "--no-graphics",
         "--time-scale", "7", "--seed", "3", "--env-args", "--agents", "8"],
        cwd=tmp_path, stop=lambda lines: any(r >= 0.8 for r in mean_rewards(lines[-1])),
    )
    out = trainer.stdout
    assert trainer.returncode == 0, out
    rewards = mean_rewards(out)
    assert rewards and max(rewards[-3:]) >= 0.8, out  # random play scores about -0.7
    run = tmp_path / "results" / "ball"
    for worker in (0, 1):
        log = (run / "run_logs" / f"Player-{worker}.log").read_text()
        assert f"--mlagents-port', '{port + worker}'" in log and "-nographics" in log, log
        assert "environment parameter target_range = sampler uniform" in log, log
        assert "environment parameter bonus = 0.25" in log, log
        assert "time_scale 7.0" in log, log
    tags = tb_scalars(run / "Seeker")
    draws = tags["Standin/target_range"]
    assert all(0.6 <= v <= 0.9 for v in draws) and len(set(draws)) > 1, draws  # resampled every episode
    assert tags["Standin/param/bonus"][-1] == pytest.approx(0.25)
    assert tags["Standin/Time Scale"][-1] == pytest.approx(7.0)
    assert "Standin/Goal Distance_hist" in tags and "Environment/Cumulative Reward_hist" in tags
    assert max(tags["Standin/Episodes"]) > 20  # SUM over a summary period, not a mean of 0/1 counts
    # ONNX per checkpoint and the final model
    from ml_arl.networks.onnx_export import check_onnx

    assert sorted(p.name for p in (run / "Seeker").glob("*.onnx")), list((run / "Seeker").iterdir())
    check_onnx(str(run / "Seeker.onnx"))


@pytest.mark.slow
def test_two_behaviors_with_masks_and_images(tmp_path: Path, build: Path) -> None:
    cfg = config(tmp_path, max_steps=2000, behaviors=("Seeker", "Picker"), summary_freq=1000)  # one update (buffer 1024)
    proc = arl_learn_here(  # main() in this process (the build in its worker); through the command: the test above
        [str(cfg), "--env", str(build), "--base-port", str(free_base_port(1)), "--run-id", "two",
         "--env-args", "--behaviors", "Seeker,Picker", "--visual", "--agents", "4"],
        cwd=tmp_path,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    run = tmp_path / "results" / "two"
    assert mean_rewards(proc.stdout, "Picker") and mean_rewards(proc.stdout, "Seeker"), out
    assert sum(tb_scalars(run / "Picker")["Standin/Masked Actions Taken"]) == 0  # masks are obeyed
    import onnx

    seeker = onnx.load(str(run / "Seeker.onnx"))
    assert [i.name for i in seeker.graph.input] == ["obs_0", "obs_1"]
    assert [d.dim_value for d in seeker.graph.input[1].type.tensor_type.shape.dim][1:] == [3, 20, 20]  # NCHW
    picker = onnx.load(str(run / "Picker.onnx"))
    assert [i.name for i in picker.graph.input] == ["obs_0", "action_masks"]


@pytest.mark.slow
def test_editor_mode_trains_with_a_player_started_by_hand(tmp_path: Path, editor_port: int) -> None:
    from ml_arl.envs.adapters.unity_env import EDITOR_PORT, port_is_free

    assert port_is_free(EDITOR_PORT), "port 5004 is taken on this machine"
    cfg = config(tmp_path, max_steps=2000)
    # the player first (it retries until the trainer's server is up, as an Editor in Play mode
    # does), then arl-learn's main() in this process (the command in Editor mode: the test below)
    editor = start_editor(EDITOR_PORT, "--agents", "4", "--connect-timeout", "120", log_file=tmp_path / "editor.log")
    try:
        proc = arl_learn_here([str(cfg), "--run-id", "editor", "--timeout-wait", "60"], cwd=tmp_path)
    finally:
        if editor.poll() is None:
            editor.kill()
            editor.wait()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "press" in out.lower() and "Play" in out and "5004" in out, out
    assert "Training finished" in out, out
    assert (tmp_path / "results" / "editor" / "Seeker.onnx").is_file()


def run_with_fault(tmp_path: Path, build: Path, run_id: str, *args: str, timeout: float = 180,
                   here: bool = False) -> subprocess.CompletedProcess[str]:
    """The command (or with ``here``, its main() in this process: the build still in its worker)."""
    # 1500 steps: the restarted build still plays past the first update (buffer_size 1024)
    cfg = config(tmp_path, max_steps=1500)
    argv = [str(cfg), "--env", str(build), "--base-port", str(free_base_port(1)), "--run-id", run_id, *args]
    return arl_learn_here(argv, cwd=tmp_path) if here else arl_learn(argv, cwd=tmp_path, timeout=timeout)


def worker_errors(tmp_path: Path, run_id: str) -> str:
    """run_logs/worker_errors.log: where the tracebacks of failed workers go."""
    path = tmp_path / "results" / run_id / "run_logs" / "worker_errors.log"
    assert path.is_file(), f"{path} missing"
    return path.read_text()


def assert_no_traceback(out: str) -> None:
    assert "Traceback (most recent call last)" not in out, out


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault,reason",
    [("--crash-at", "UnityEnvironmentException: Environment shut down with return code -9 (SIGKILL)."),
     ("--quit-at", "UnityCommunicatorStoppedException: Communicator has exited.")],
)
def test_crash_and_self_quit_are_restarted_within_quota(tmp_path: Path, build: Path, fault: str, reason: str) -> None:
    """One console line per failure (worker, what happened, restart n of m), no traceback on the
    console; the worker's traceback is in run_logs/worker_errors.log."""
    once = tmp_path / "fired"
    # the crash through the command, the self-quit through its main() in this process
    proc = run_with_fault(tmp_path, build, "fault", "--timeout-wait", "20", "--env-args", fault, "40", "--once-file", str(once),
                          here=fault == "--quit-at")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert once.exists(), out
    failures = [line for line in out.splitlines() if "worker" in line.lower() or "Exception" in line]
    assert failures == [f"[WARNING] Restarting worker[0] after {reason} (restart 1 of 10)"], out
    assert_no_traceback(out)
    assert "Training finished" in out, out
    log = worker_errors(tmp_path, "fault")
    assert f"worker 0: {reason} (restart 1 of 10)\nTraceback (most recent call last):" in log, log
    assert log.count("Traceback (most recent call last)") == 1, log


@pytest.mark.slow
def test_crash_beyond_quota_stops_with_one_line_reason(tmp_path: Path, build: Path) -> None:
    # main() in this process (the build in its worker); a crash through the command: the test above
    proc = run_with_fault(tmp_path, build, "quota", "--max-lifetime-restarts", "0", "--env-args", "--crash-at", "40",
                          here=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert_no_traceback(out)
    last = out.strip().splitlines()[-1]
    assert "Worker 0 exceeded the allowed number of restarts" in last and "return code -9" in last, out
    assert [line for line in out.splitlines() if "return code -9" in line] == [last], out  # one line
    assert last.endswith("(traceback in results/quota/run_logs/worker_errors.log)"), out
    assert "Traceback (most recent call last)" in worker_errors(tmp_path, "quota")


@pytest.mark.slow
def test_hung_build_times_out_naming_the_worker(tmp_path: Path, build: Path) -> None:
    """The build's own --timeout-wait (the trainer waits 2 s longer) names the worker's port; one
    line, the traceback in run_logs."""
    started = time.monotonic()
    port = free_base_port(1)
    proc = arl_learn(
        [str(config(tmp_path, max_steps=3000)), "--env", str(build), "--base-port", str(port), "--run-id", "hang",
         "--timeout-wait", "3", "--max-lifetime-restarts", "0", "--env-args", "--hang-at", "40"],
        cwd=tmp_path, timeout=180,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert_no_traceback(out)
    last = out.strip().splitlines()[-1]
    assert "Worker 0" in last and f"port {port} did not answer within 3 s" in last, out
    assert [line for line in out.splitlines() if "did not answer" in line] == [last], out  # one line
    assert time.monotonic() - started < 60, out
    log = worker_errors(tmp_path, "hang")
    assert "UnityTimeOutException" in log and "Traceback (most recent call last)" in log, log


def test_editor_nobody_connecting_is_one_line_with_exit_code_2(tmp_path: Path, editor_port: int) -> None:
    """Editor mode (no --env) and nothing presses Play: one line naming the port and the wait,
    saying how to fix it; no restart, no traceback, nothing written."""
    from ml_arl.envs.adapters.unity_env import EDITOR_PORT, port_is_free

    assert port_is_free(EDITOR_PORT), "port 5004 is taken on this machine"
    # the wait is timed from "Listening on port 5004" (after arl-learn's start-up) to the error line
    # (before its shutdown): a loaded machine stretches both to many seconds
    seen: dict[str, float] = {}

    def note(line: str) -> None:
        for key in ("Listening on port 5004", "[ERROR]"):
            if key in line:
                seen.setdefault(key, time.monotonic())

    trainer = arl_learn_watched([config(tmp_path), "--run-id", "ed", "--timeout-wait", "2"], cwd=tmp_path,
                                on_line=note, deadline_s=60, PYTHONUNBUFFERED="1")
    out, returncode = trainer.stdout, trainer.returncode
    assert returncode == 2, out
    assert_no_traceback(out)
    errors = [line for line in out.splitlines() if "[ERROR]" in line or "[WARNING]" in line]
    assert len(errors) == 1, out
    assert "nothing connected to port 5004 within 2 s (--timeout-wait)" in errors[0], out
    assert "press Play in the Unity Editor" in errors[0] and "--env" in errors[0], out
    assert "Restarting" not in out, out
    assert not (tmp_path / "results").exists()
    assert seen.keys() == {"Listening on port 5004", "[ERROR]"}, out
    waited = seen["[ERROR]"] - seen["Listening on port 5004"]
    assert waited < 30, (waited, out)


def test_missing_and_non_executable_builds_are_one_line_errors(tmp_path: Path) -> None:
    cfg = config(tmp_path)  # the first through the command itself, the others through its main() in this process
    line = one_line_error(arl_learn([str(cfg), "--env", "builds/Nothing.x86_64", "--run-id", "x"], cwd=tmp_path))
    assert "builds/Nothing.x86_64" in line and "no Unity build found" in line, line
    plain = tmp_path / "Plain.x86_64"
    plain.write_text("not a program")
    line = one_line_error(arl_learn_here([str(cfg), "--env", str(plain), "--run-id", "x"], cwd=tmp_path))
    assert "not executable" in line and "chmod +x" in line, line
    line = one_line_error(arl_learn_here([str(cfg), "--num-envs", "2", "--run-id", "x"], cwd=tmp_path))
    assert "num_envs" in line, line
    assert not (tmp_path / "results" / "x").exists()


def test_busy_port_is_a_one_line_error(tmp_path: Path, build: Path) -> None:
    cfg = config(tmp_path)
    base = free_base_port(2)
    with socket.socket() as blocker:
        blocker.bind(("localhost", base + 1))
        blocker.listen()
        line = one_line_error(  # checked in the main process before any worker starts: main() in this process
            arl_learn_here([str(cfg), "--env", str(build), "--num-envs", "2", "--base-port", str(base), "--run-id", "x"], cwd=tmp_path)
        )
    assert f"port {base + 1} (worker 1) is already in use" in line and "--base-port" in line, line


def test_incompatible_communication_version_is_a_one_line_error(tmp_path: Path, build: Path) -> None:
    cfg = config(tmp_path)
    proc = arl_learn_here(  # main() in this process (the build in its worker); one-line errors of the command: above
        [str(cfg), "--env", str(build), "--base-port", str(free_base_port(1)), "--run-id", "x", "--timeout-wait", "20",
         "--env-args", "--comm-version", "2.0.0"],
        cwd=tmp_path,
    )
    line = one_line_error(proc)
    assert "2.0.0" in line and "1.5.0" in line and "incompatible" in line, line


def _listening_addresses(port: int) -> set[str]:
    """Local addresses of sockets listening on ``port`` (Linux /proc/net/tcp{,6}; state 0A = LISTEN)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, _, hex_port = local.rpartition(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(addr)
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/net")
def test_the_port_for_a_build_listens_on_loopback_only_unless_asked() -> None:
    from ml_arl.envs.adapters.unity_env import _Communicator

    # 127.0.0.1, ::1, ::ffff:127.0.0.1 (how /proc/net/tcp{,6} print them)
    loopback = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}
    port = free_base_port(2)
    comm = _Communicator(0, port, 5, "localhost")
    try:
        addrs = _listening_addresses(port)
        assert addrs and addrs <= loopback, addrs
    finally:
        comm.close()
    comm = _Communicator(1, port, 5, "0.0.0.0")
    try:
        assert _listening_addresses(port + 1) & {"00000000", "0" * 32}  # every interface (gRPC may use [::])
    finally:
        comm.close()


def test_onnx_from_a_trained_checkpoint_matches_the_muscle(tmp_path: Path) -> None:
    """The exported model's deterministic action is what the workers' numpy muscle does."""
    import onnxruntime as ort

    from ml_arl.acting.muscle import Muscle
    from ml_arl.envs.games.builtin import Reach
    from ml_arl.networks.actor_critic import ActorCritic
    from ml_arl.networks.onnx_export import export_onnx
    from ml_arl.settings import NetworkSettings

    env = Reach("continuous")
    env.reset()
    name = list(env.behavior_specs)[0]
    net = ActorCritic(env.behavior_specs[name], NetworkSettings(normalize=True, hidden_units=16))
    import torch

    net.normalizer.update(torch.randn(50, env.behavior_specs[name].observation_specs[0].shape[0]) * 2)
    export_onnx(net, str(tmp_path / "m.onnx"))
    decision, _ = env.get_steps(name)
    muscle = Muscle(net.muscle_weights(), deterministic=True)
    info = muscle.act(decision.obs, None)
    sess = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    outputs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"obs_0": decision.obs[0]})))
    np.testing.assert_allclose(outputs["deterministic_continuous_actions"], info.env_action.continuous, atol=1e-5)


def _launch_and_report(path: str, conn: Any) -> None:  # runs in a child process
    from ml_arl.envs.adapters.unity_env import _launch_executable

    proc = _launch_executable(path, [])
    conn.send(proc.pid)
    time.sleep(60)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_a_build_dies_with_its_worker(tmp_path: Path) -> None:
    import multiprocessing

    script = tmp_path / "Sleeper.x86_64"
    script.write_text("#!/bin/sh\nexec sleep 60\n")
    script.chmod(0o755)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    worker = ctx.Process(target=_launch_and_report, args=(str(script), child))
    worker.start()
    try:
        assert parent.poll(30)
        pid = parent.recv()
        os.kill(worker.pid, signal.SIGKILL)  # as after a hang: no finally, no close()
        worker.join(5)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("the build outlived its worker")
    finally:
        if worker.is_alive():
            worker.kill()


@pytest.mark.slow
def test_ctrl_c_closes_every_build_and_saves(tmp_path: Path, build: Path) -> None:

    cfg = config(tmp_path, max_steps=10_000_000)
    trainer = popen_arl_learn(
        [cfg, "--env", build, "--num-envs", "2", "--base-port", free_base_port(2), "--run-id", "intr", "--env-args",
         "--agents", "4"], tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(120, trainer.kill)
    watchdog.start()
    try:
        logs = [tmp_path / "results" / "intr" / "run_logs" / f"Player-{i}.log" for i in (0, 1)]
        assert trainer.stdout is not None
        seen = []
        for line in trainer.stdout:  # until the first summary: both builds stepped and the trainer updated
            seen.append(line)
            if "Seeker. Step:" in line:
                break
        trainer.send_signal(signal.SIGINT)
        rest, _ = trainer.communicate(timeout=60)
        out = "".join(seen) + rest
    finally:
        watchdog.cancel()
        if trainer.poll() is None:
            trainer.kill()
    assert trainer.returncode == 0, out
    assert "Learning was interrupted" in out and "Traceback" not in out, out
    for log in logs:
        text = log.read_text()
        assert "close: trainer sent status 400" in text, text  # closed by the trainer, not orphaned
    assert (tmp_path / "results" / "intr" / "Seeker.onnx").is_file(), out


@pytest.mark.slow
def test_sac_trains_both_standin_behaviors_and_exports_tanh_squashed_models(tmp_path: Path, build: Path) -> None:
    """SAC end to end against the build (Seeker: 1 continuous action; Picker: branches 3 and 2 with
    masks): the exported models follow the contract, and their deterministic actions are tanh of
    the actor's mean (Seeker) and the most likely allowed action (Picker)."""
    import onnxruntime as ort
    import torch
    from mlagents_envs.base_env import ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType

    from ml_arl.networks.actor_critic import ActorCritic
    from ml_arl.networks.onnx_export import check_onnx
    from ml_arl.settings import NetworkSettings

    network = {"hidden_units": 16, "num_layers": 1}
    settings = {"trainer_type": "sac", "max_steps": 600, "summary_freq": 300, "checkpoint_interval": 300,
                "hyperparameters": {"batch_size": 32, "buffer_size": 5000, "buffer_init_steps": 100, "steps_per_update": 4},
                "network_settings": network}
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"behaviors": {"Seeker": settings, "Picker": settings}}))
    proc = arl_learn_here(  # main() in this process, the build in its worker
        [str(cfg), "--env", str(build), "--base-port", str(free_base_port(1)), "--run-id", "sac", "--seed", "3",
         "--env-args", "--behaviors", "Seeker,Picker", "--agents", "4"],
        cwd=tmp_path,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in out, out
    run = tmp_path / "results" / "sac"
    rng = np.random.default_rng(0)
    for behavior, obs_size, actions in (("Seeker", 2, ActionSpec(1, ())), ("Picker", 4, ActionSpec(0, (3, 2)))):
        state = torch.load(run / behavior / "checkpoint.pt", weights_only=True)
        assert state["global_step"] >= 600 and state["update_steps"] > 100, behavior  # it learned: (600 - 100) / 4 steps
        model = run / f"{behavior}.onnx"
        check_onnx(str(model))
        obs_spec = ObservationSpec((obs_size,), (DimensionProperty.NONE,), ObservationType.DEFAULT, "VectorSensor")
        actor = ActorCritic(BehaviorSpec([obs_spec], actions), NetworkSettings(**network),
                            conditional_sigma=True, tanh_squash=True, critic=False)
        actor.load_state_dict(state["Policy"])
        obs = rng.uniform(-1, 1, (6, obs_size)).astype(np.float32)
        feed = {"obs_0": obs}
        if actions.discrete_branches:
            feed["action_masks"] = np.ones((6, 5), np.float32)
        session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        outputs = dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))
        with torch.no_grad():
            dist = actor.distribution([torch.as_tensor(obs)], None)
        if actions.continuous_size:
            assert dist.mu is not None
            np.testing.assert_allclose(outputs["deterministic_continuous_actions"], np.tanh(dist.mu.numpy()), atol=1e-5)
        else:
            best = np.stack([logp.argmax(1).numpy() for logp in dist.branch_log_probs()], axis=1)
            np.testing.assert_array_equal(outputs["deterministic_discrete_actions"], best)
