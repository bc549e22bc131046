"""SubprocessEnvManager (ml_arl.envs.backends.subprocess_env_manager) on its own, without a trainer:
workers from the fork server answer in worker order, every step request is answered, a worker
killed mid-run is restarted with its own id (its shared files removed), and close() leaves no worker process behind."""

from __future__ import annotations

import glob
import os
import signal
import time
from typing import Any

from ml_arl.core.actor_weights import PolicyMessage
from ml_arl.envs.backends.subprocess_env_manager import SubprocessEnvManager
from ml_arl.envs.sources import resolve_env
from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.settings import EnvSettings, NetworkSettings


def _manager(**settings: Any) -> SubprocessEnvManager:
    env_settings = EnvSettings(env_path="builtin:Trivial", timeout_wait=60, **settings)
    return SubprocessEnvManager(resolve_env(env_settings.env_path, env_settings.env_args), env_settings, 0)


def _act(manager: SubprocessEnvManager) -> None:
    spec = manager.start()["Trivial"]
    weights = ActorCritic(spec, NetworkSettings(hidden_units=8)).muscle_weights()
    manager.set_policy("Trivial", PolicyMessage(1, weights, 16, False))


def _gone(pid: int, within_s: float = 30.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie child of this process is gone too
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return False


def test_workers_answer_every_request_and_close_leaves_none_behind() -> None:
    manager = _manager(num_envs=2, steps_per_message=4)
    try:
        _act(manager)
        pids = [w.process.pid for w in manager.workers]
        assert len(set(pids)) == 2 and os.getpid() not in pids
        steps = 0
        for _ in range(10):
            batches = manager.step()
            assert {b.worker_id for b in batches} <= {0, 1}
            steps += sum(b.env_steps for b in batches)
        assert steps > 0
    finally:
        manager.close()
    assert manager.workers == []
    assert all(_gone(pid) for pid in pids)


def test_a_killed_worker_is_restarted_with_its_own_id() -> None:
    manager = _manager(num_envs=2, steps_per_message=2)
    try:
        _act(manager)
        first = manager.workers[1].process.pid
        manager.step()
        old_files = manager.workers[1].shared_prefix  # where its observations were (ml_arl.acting.observation_slots)
        os.kill(first, signal.SIGKILL)
        answered: set[int] = set()
        deadline = time.monotonic() + 60
        while 1 not in answered or manager.workers[1].process.pid == first:
            assert time.monotonic() < deadline, "worker 1 was not restarted"
            answered |= {b.worker_id for b in manager.step() if b.env_steps}
        assert manager.workers[1].worker_id == 1 and manager.workers[0].process.pid != first
        assert old_files and manager.workers[1].shared_prefix != old_files and not glob.glob(old_files + "*")
    finally:
        manager.close()
    assert _gone(first)


def test_the_last_phase_lets_the_workers_go_before_the_final_export(tmp_path: Any, monkeypatch: Any) -> None:
    """EnvManager.finish_stepping: at the last phase's end the workers are asked to close before the
    final checkpoint's ONNX export (their memory is given back before the export's imports), once;
    the run still closes them and ends as it did."""
    import ml_arl
    import ml_arl.networks.onnx_export as onnx_export
    from tests.support.runs import tiny_config

    events: list[str] = []
    finish = SubprocessEnvManager.finish_stepping
    export = onnx_export.export_onnx

    def finishing(self: SubprocessEnvManager) -> None:
        events.append(f"finish_stepping, {sum(w.process.is_alive() for w in self.workers)} alive")
        finish(self)

    def exporting(network: Any, path: str) -> None:
        events.append("export")
        export(network, path)

    monkeypatch.setattr(SubprocessEnvManager, "finish_stepping", finishing)
    monkeypatch.setattr(onnx_export, "export_onnx", exporting)
    config = tiny_config("builtin:Reach", max_steps=600, checkpoint_interval=100000)
    config["env_settings"].update({"manager": "subprocess", "num_envs": 2, "seed": 1})
    run = ml_arl.train(config, run_id="last", results_dir=str(tmp_path))
    assert run.finished and run.steps["Reach"] >= 600, run.steps
    assert events[0] == "finish_stepping, 2 alive" and events.count(events[0]) == 1, events
    assert events[1:] and set(events[1:]) == {"export"}, events
    assert (tmp_path / "last" / "Reach.onnx").exists()
