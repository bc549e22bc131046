"""The Ray manager (env_settings.manager: ray): environment workers as Ray actors.

One Ray instance for the module, on loopback (every Ray server on 127.0.0.1), started in the
repository root so that Ray's workers import ``tests.*`` factories as the driver does. Runs go
through arl-learn's ``main()`` in this process (``arl_learn_here``) or the TrainerController: the
manager finds Ray running and uses it. A learning run to its threshold, one put per changed
policy, a killed actor restarted, the restart quota's one-line stop, --resume, a node of a
two-node cluster removed mid-run (its worker restarted on the other node), and Unity builds
(the stand-in) checked and launched by the actors on their nodes, with ports claimed per node.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ml_arl.envs.backends.ray_env_manager import LOCAL_ONLY_ENV
from tests.support.faults import BEHAVIOR, ENV, behavior_dir, last_line, lines_with, status, worker_errors, write_config
from tests.support.runs import arl_learn_here, tiny_config

REPO = Path(__file__).resolve().parents[2]
SOLVED = 0.9  # the Ray learning run must reach this mean over 20 returns in a row before max_steps
# read when Ray is first imported: every Ray server these tests start listens on 127.0.0.1 only
os.environ[LOCAL_ONLY_ENV] = "0"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A Ray head node on loopback (4 CPUs: up to 4 workers); the node test adds a second node."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    here = os.getcwd()
    os.chdir(REPO)  # Ray's workers get the driver's cwd on sys.path: tests.support.fault_envs imports there
    try:
        head = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "include_dashboard": False})
        ray.init(address=head.address, include_dashboard=False, logging_level="WARNING")
    finally:
        os.chdir(here)
    yield head
    ray.shutdown()
    head.shutdown()


def test_ray_address_implies_the_ray_manager() -> None:
    from ml_arl.cli.learn import parse_options

    env = parse_options(["--ray-address", "auto", "--env", "builtin:Reach"]).env_settings
    assert (env.manager, env.ray_address) == ("ray", "auto")
    assert parse_options(["--env", "builtin:Reach"]).env_settings.manager == "subprocess"


def test_ray_actors_step_enough_per_call_unless_told() -> None:
    """Without env_settings.steps_per_message an actor makes each call last about CALL_TARGET_S:
    from the cost of a step it measured, within 16 (the setting's default) and MAX_ADAPTIVE_STEPS."""
    from ml_arl.acting.ray_actor import CALL_TARGET_S, MAX_ADAPTIVE_STEPS, EnvActor

    actor = EnvActor(b"", 0, 0, 16, adaptive=True)
    actor._adapt(CALL_TARGET_S / 40)  # a step costs a fortieth of the target
    assert actor.steps_per_message == 40
    actor._adapt(CALL_TARGET_S)  # slower steps: back towards the floor (a running estimate)
    assert 16 <= actor.steps_per_message < 40
    for _ in range(30):
        actor._adapt(CALL_TARGET_S / 1000)
    assert actor.steps_per_message == MAX_ADAPTIVE_STEPS
    fixed = EnvActor(b"", 0, 0, 8)
    assert not fixed.adaptive
    from ml_arl.cli.learn import parse_options

    assert "steps_per_message" not in parse_options(["--ray-address", "auto", "--env", "builtin:Reach"]).env_settings.model_fields_set


@pytest.mark.parametrize("env_settings,message", [
    ({"manager": "inprocess", "ray_address": "auto"},
     "test: env_settings: ray_address: 'auto' needs manager: ray; manager: inprocess runs no workers for Ray to "
     "place; remove manager or ray_address"),
    ({"backend": "subprocess", "ray_address": "auto"},
     "test: env_settings: ray_address: 'auto' needs manager: ray, and backend: subprocess says otherwise; remove "
     "backend or ray_address"),
    ({"backend": "ray", "manager": "inprocess"},
     "test: env_settings: manager: inprocess and backend: ray contradict each other; backend is deprecated: write "
     "manager: inprocess or manager: ray, not both keys"),
    ({"backend": "subprocess", "manager": "ray"},
     "test: env_settings: manager: ray and backend: subprocess contradict each other; backend is deprecated: write "
     "manager: ray or manager: subprocess, not both keys"),
    ({"backend": "rays"},
     "test: env_settings: backend: 'rays' is not subprocess or ray; backend is deprecated: write manager: "
     "subprocess, inprocess or ray"),
])
def test_ray_settings_that_do_not_fit_are_one_line(env_settings: dict, message: str) -> None:
    from ml_arl.core.exceptions import ConfigError
    from ml_arl.settings import build_run_options

    with pytest.raises(ConfigError) as err:
        build_run_options({"env_settings": {"env_path": "builtin:Reach", **env_settings}}, {}, "test")
    assert err.value.problems == [message]


@pytest.mark.parametrize("env_settings,manager", [
    ({"backend": "ray"}, "ray"),
    ({"backend": "ray", "manager": "subprocess"}, "ray"),
    ({"backend": "ray", "manager": "ray"}, "ray"),
    ({"backend": "subprocess"}, "subprocess"),
    ({"backend": "subprocess", "manager": "inprocess"}, "inprocess"),
    ({"manager": "subprocess", "ray_address": "auto"}, "ray"),
])
def test_the_old_backend_key_is_read_with_a_warning_naming_manager(
    env_settings: dict, manager: str, caplog: pytest.LogCaptureFixture
) -> None:
    """env_settings.backend was the second key of one choice; a config that still writes it runs as
    before, and one warning line says what to write."""
    from ml_arl.settings import build_run_options

    with caplog.at_level(logging.WARNING, logger="ml_arl.settings"):
        options = build_run_options({"env_settings": {"env_path": "builtin:Reach", **env_settings}}, {}, "test")
    assert options.env_settings.manager == manager
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"env_settings.backend is deprecated; write env_settings.manager: {manager} instead"
                        if "backend" in env_settings else
                        "env_settings.manager: subprocess with ray_address means manager: ray now; "
                        "write env_settings.manager: ray instead"]
    assert "backend" not in options.env_settings.model_dump()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ml_arl.settings"):
        build_run_options({"env_settings": {"env_path": "builtin:Reach", "manager": manager}}, {}, "test")
    assert not caplog.records  # the new spelling: no warning


def test_unreachable_ray_address_is_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, max_steps=100)
    run = arl_learn_here([str(config), "--run-id", "bad", "--results-dir", str(tmp_path / "results"), "--env", ENV,
                          "--ray-address", "127.0.0.1:1"], cwd=REPO)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert last_line(run.stdout) == (
        "[ERROR] --ray-address 127.0.0.1:1: nothing answers there (Connection refused); start the head node "
        "(ray start --head) or fix the address"), out
    assert "Traceback" not in out


def ray_args(tmp_path: Path, config: Path, run_id: str, *extra: str, num_envs: int = 2, env_args: tuple[str, ...] = ()) -> list[str]:
    args = [str(config), "--run-id", run_id, "--results-dir", str(tmp_path / "results"), "--num-envs", str(num_envs),
            "--seed", "1", "--torch-device", "cpu", "--env", ENV, "--ray-address", "auto", *extra]
    if env_args:
        args += ["--env-args", *env_args]
    return args


@pytest.mark.slow
def test_ppo_learns_reach_on_ray(cluster: Any, tmp_path: Path) -> None:
    from ml_arl.envs.backends.ray_env_manager import RayEnvManager
    from ml_arl.settings import build_run_options
    from ml_arl.training.callbacks import CallbackList, StopOnReward
    from ml_arl.training.controller import TrainerController

    config = tiny_config("builtin:ReachDiscrete", max_steps=10000, hyperparameters={
        "batch_size": 128, "buffer_size": 1024, "learning_rate": 3e-3, "beta": 1e-3, "num_epoch": 4})
    config["env_settings"].update({"manager": "ray", "num_envs": 2, "seed": 1})
    config["checkpoint_settings"] = {"results_dir": str(tmp_path), "run_id": "learn"}
    import ray

    # the run stops once 20 returns in a row average SOLVED, or at max_steps (it solves at 3-4k steps).
    # The stopper's own window is what the test reads: an actor returns many steps per call here, so
    # episodes of the same call that end after the stop are recorded too, and the manager's last 20
    # returns can hold a few of them (0.73-0.86 in 3 of 12 probe runs that had stopped at 0.9)
    stopper = StopOnReward("ReachDiscrete", SOLVED, 20)
    controller = TrainerController(build_run_options(config, {}, "test"), callbacks=CallbackList([stopper]))
    manager = controller.env_manager
    assert isinstance(manager, RayEnvManager)
    controller.start_learning()
    assert stopper.reached_at is not None and stopper.mean is not None and stopper.mean >= SOLVED, (
        stopper.mean, list(controller.managers["ReachDiscrete"].recent_rewards)[-20:])
    assert controller.trainers["ReachDiscrete"].step < 10000
    # the manager recorded the same 20 returns in a row (then at most a call's worth more: 64 steps a worker)
    rewards, window = list(controller.managers["ReachDiscrete"].recent_rewards), list(stopper.returns)
    starts = [i for i in range(len(rewards) - 19) if rewards[i:i + 20] == window]
    assert starts and np.mean(rewards[starts[-1]:starts[-1] + 20]) >= 0.8, (window, rewards[-30:])
    updates = controller.trainers["ReachDiscrete"].step // 1024
    # one object-store put per new policy (the first weights and each update), not one per worker
    assert 2 <= manager.puts <= updates + 1, (manager.puts, updates)
    assert manager.num_workers == 0  # closed; the module's Ray keeps running
    assert ray.is_initialized()


def test_learner_actors_on_ray_make_one_learners_update_and_a_killed_one_is_one_line(cluster: Any, tmp_path: Path) -> None:
    """--num-learners on Ray: learner 1 is a Ray actor joined over TCP; two updates equal one
    learner's (as tests/trainers/test_learners.py checks for processes); the actor killed, the
    next update fails with one line naming it."""
    import ray

    from ml_arl.core.exceptions import LearnerError
    from ml_arl.trainers.learner_group import LearnerGroup
    from tests.trainers.test_learners import _trainer, _trajectories, updates_match

    single, grouped = _trainer(), _trainer()
    group = LearnerGroup(2, str(tmp_path), on_ray=True)
    assert group.init_method.startswith("tcp://")
    try:
        updates_match(single, grouped, group)
        ray.kill(group.members.actors[0])
        for traj in _trajectories(3):
            grouped.add_experience(traj)
        with pytest.raises(LearnerError) as err:
            grouped.update()
    finally:
        group.close()
    assert "learner 1 (a Ray actor) stopped" in str(err.value) and "\n" not in str(err.value)
    assert ray.is_initialized()


def test_a_ray_run_places_its_second_learner_on_ray(cluster: Any, tmp_path: Path, caplog: Any) -> None:
    """The cluster run of docs/ray.md: workers and the second learner on Ray, the episodes in one
    PostgreSQL store (a real server, tests/support/postgres.py), no results.sqlite in the folder."""
    from ml_arl.results.server_store import read_run
    from ml_arl.settings import build_run_options
    from ml_arl.training.controller import TrainerController
    from tests.support.postgres import PostgresServer

    server = PostgresServer()
    try:
        url = server.database()
        config = tiny_config("builtin:Reach", max_steps=3000)
        config["env_settings"].update({"manager": "ray", "num_envs": 2, "seed": 1})
        config["torch_settings"] = {"num_learners": 2}
        config["checkpoint_settings"] = {"results_dir": str(tmp_path), "run_id": "learners"}
        config["results_store"] = {"url": url}
        controller = TrainerController(build_run_options(config, {}, "test"))
        with caplog.at_level(logging.DEBUG, logger="ml_arl.trainers.ray_learners"):
            controller.start_learning()
        assert controller.learners is not None and controller.learners.init_method.startswith("tcp://")
        assert any("learner actor(s) on Ray" in r.getMessage() for r in caplog.records)
        assert controller.trainers["Reach"].step >= 3000
        assert (tmp_path / "learners" / "Reach.onnx").is_file()
        assert not (tmp_path / "learners" / "results.sqlite").exists()
        assert read_run(url, "learners").episode_count > 20
    finally:
        server.stop()


@pytest.mark.slow
def test_killed_actor_is_restarted_and_run_finishes(cluster: Any, tmp_path: Path) -> None:
    """Worker 0 parks itself at step 20 of its first life; the test ray.kill()s its actor."""
    state = tmp_path / "state"
    config = write_config(tmp_path, max_steps=3000)
    killed: list[str] = []
    import ray

    def killer() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (state / "blocked-0-1").exists():
            time.sleep(0.1)
        actor = ray.get_actor("arl:kill:worker-0:1")
        ray.kill(actor)
        killed.append("yes")

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    run = arl_learn_here(ray_args(tmp_path, config, "kill", env_args=(
        "fault=block", "at_step=20", "only_worker=0", "lives=[1]", f"state_dir={state}")), cwd=REPO)
    thread.join(timeout=5)
    out = run.stdout + run.stderr
    assert killed and run.returncode == 0, out
    restarts = lines_with(run.stdout, "Restarting worker[")
    assert len(restarts) == 1, out
    assert re.search(r"Restarting worker\[0\] after WorkerDied: Ray actor on node 127\.0\.0\.1 \(\w{8}\) died "
                     r"\(\w+: .*\) \(restart 1 of 10\)", restarts[0]), out
    assert re.search(r"worker\[0\] restarted on Ray node 127\.0\.0\.1 \(\w{8}\)", run.stdout), out
    assert "Training finished" in run.stdout, out
    assert (state / "lives-0").read_text() == "2" and (state / "lives-1").read_text() == "1", out
    assert status(tmp_path, "kill")[BEHAVIOR]["final_checkpoint"]["steps"] >= 3000
    assert "The actor is dead because it was killed by `ray.kill`." in worker_errors(tmp_path, "kill")  # Ray's account


@pytest.mark.slow
def test_restart_quota_exceeded_is_one_line(cluster: Any, tmp_path: Path) -> None:
    """Every life of worker 0 raises UnityCommunicationException at step 20: restarted once, then
    the second failure within 60 s is beyond --restarts-rate-limit-n 1; its traceback crossed
    from the actor to the run's worker_errors.log."""
    config = write_config(tmp_path, max_steps=5000)
    run = arl_learn_here(ray_args(tmp_path, config, "quota", "--restarts-rate-limit-n", "1", num_envs=1, env_args=(
        "fault=unity", "at_step=20", "message=comm-lost-31337", f"state_dir={tmp_path / 'state'}")), cwd=REPO)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert run.stdout.count("Restarting worker[0]") == 1, out
    final = last_line(run.stdout)
    assert "Training stopped: Worker 0 exceeded the allowed number of restarts" in final, out
    assert "comm-lost-31337" in final and "restarts_rate_limit_n=1" in final, out
    assert "Traceback" not in out, out
    log = worker_errors(tmp_path, "quota")
    assert log.count("Traceback (most recent call last)") == 2, log
    assert "UnityCommunicationException: worker 0 life 2: comm-lost-31337 at step 20" in log, log
    assert 'fault_envs.py", line' in log, log  # the actor's own frames


@pytest.mark.slow
def test_hung_actor_times_out_and_phase_switch_resets_every_actor(cluster: Any, tmp_path: Path) -> None:
    """Worker 0 hangs at step 20 of its first life: past --timeout-wait 5 (+2 s) its actor is
    killed and restarted. Then phase two resets every actor with its environment parameters.
    (With --timeout-wait 2, a loaded machine, the whole suite on 2 cores, once took more than 4 s
    to answer the healthy worker's phase-switch reset, and restarted it too.)"""
    import json

    state = tmp_path / "state"
    config = write_config(tmp_path, max_steps=100000, phase_steps=600)
    run = arl_learn_here(ray_args(tmp_path, config, "hang", "--timeout-wait", "5", env_args=(
        "fault=hang", "at_step=20", "only_worker=0", "lives=[1]", f"state_dir={state}")), cwd=REPO)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    restarts = lines_with(run.stdout, "Restarting worker[")
    assert len(restarts) == 1, out
    assert re.search(r"Restarting worker\[0\] after the Ray actor on node 127\.0\.0\.1 \(\w{8}\) did not "
                     r"answer a step within 7 s \(--timeout-wait 5 s; hung", restarts[0]), out
    assert "Training finished" in run.stdout, out
    assert (state / "lives-0").read_text() == "2" and (state / "lives-1").read_text() == "1", out
    for worker, life in ((0, 2), (1, 1)):  # the phase switch reached both actors, the restarted one too
        assert json.loads((state / f"params-{worker}-{life}").read_text()) == {"level": 2.0}, out


@pytest.mark.slow
def test_resume_a_ray_run(cluster: Any, tmp_path: Path) -> None:
    # one actor: what is resumed is the trainer's state, the same with any number of workers
    first = arl_learn_here(ray_args(tmp_path, write_config(tmp_path, max_steps=500), "res", num_envs=1), cwd=REPO)
    assert first.returncode == 0, first.stdout + first.stderr
    n = status(tmp_path, "res")[BEHAVIOR]["final_checkpoint"]["steps"]
    config2 = write_config(tmp_path, max_steps=n + 500, name="config2.yaml")
    resumed = arl_learn_here(ray_args(tmp_path, config2, "res", "--resume", num_envs=1), cwd=REPO)
    out = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, out
    assert re.search(rf"Resuming {BEHAVIOR} from \S+ at step {n}\b", resumed.stdout), out
    assert status(tmp_path, "res")[BEHAVIOR]["final_checkpoint"]["steps"] >= n + 500, out
    assert (behavior_dir(tmp_path, "res") / "checkpoint.pt").is_file()


@pytest.mark.slow
def test_node_removed_mid_run_its_worker_restarts_on_the_other(cluster: Any, tmp_path: Path, caplog: Any) -> None:
    """A second node joins; the two workers spread over both nodes and park at step 20 of their
    first life (4 s). Node B is removed meanwhile: its worker is a dead worker, restarted on the
    head node (the log names both nodes); the other one goes on, and the run finishes."""
    import logging

    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from ml_arl.envs.backends.ray_env_manager import RayEnvManager
    from ml_arl.settings import build_run_options
    from ml_arl.training.controller import TrainerController

    node_b = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()

    @ray.remote(num_cpus=1)
    def node_id() -> str:
        return ray.get_runtime_context().get_node_id()

    # node B runs Python workers before the run starts (a fresh raylet on a loaded machine is slow)
    on_b = node_id.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_b.node_id, soft=False)).remote()
    assert ray.get(on_b, timeout=90) == node_b.node_id
    state = tmp_path / "state"
    config = tiny_config(ENV, max_steps=1000, hyperparameters={"batch_size": 64, "buffer_size": 256, "num_epoch": 1})
    config["env_settings"].update({"manager": "ray", "num_envs": 2, "seed": 1, "env_args": [
        "fault=block", "at_step=20", "lives=[1]", "hang_s=4", f"state_dir={state}"]})
    config["checkpoint_settings"] = {"results_dir": str(tmp_path), "run_id": "node"}
    controller = TrainerController(build_run_options(config, {}, "test"))
    manager = controller.env_manager
    assert isinstance(manager, RayEnvManager)
    b_id = node_b.node_id[:8]
    placed: dict[int, str] = {}

    def remove_b() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all((state / f"blocked-{w}-1").exists() for w in (0, 1)):
            time.sleep(0.1)
        placed.update((h.worker_id, h.node) for h in manager.handles)
        cluster.remove_node(node_b, allow_graceful=False)

    thread = threading.Thread(target=remove_b, daemon=True)
    thread.start()
    with caplog.at_level(logging.INFO):
        controller.start_learning()
    thread.join(timeout=5)
    workers_on_b = [w for w, node in placed.items() if b_id in node]
    assert len(workers_on_b) == 1, (placed, b_id)  # SPREAD: one worker per node
    log = caplog.text
    restarts = [line for line in log.splitlines() if "Restarting worker[" in line]
    assert len(restarts) == 1 and f"Restarting worker[{workers_on_b[0]}] after WorkerDied: Ray actor on node" in restarts[0], log
    assert b_id in restarts[0], log
    restarted = re.search(rf"worker\[{workers_on_b[0]}\] restarted on Ray node (\S+ \((\w+)\))", log)
    assert restarted is not None and restarted.group(2) != b_id, log
    assert controller.trainers[BEHAVIOR].step >= 1000


# ---------------------------------------------------------------- Unity builds on the nodes


def test_ports_are_claimed_per_node_without_collisions() -> None:
    """Claims from one base port never share a port (a lock file per port in the node's temp
    folder, so actors of every run on the node see each other), skip a port something else listens
    on, and a released port can be claimed again."""
    import socket

    from ml_arl.core.exceptions import EnvironmentSourceError
    from ml_arl.envs.adapters.unity_nodes import claim_port
    from tests.support.unity_standin import free_base_port

    base = free_base_port(6)
    first, second = claim_port(base), claim_port(base)
    with socket.socket() as other:
        other.bind(("localhost", base + 2))
        other.listen()
        third = claim_port(base)
        assert (first.port, second.port, third.port) == (base, base + 1, base + 3)
        with pytest.raises(EnvironmentSourceError) as err:
            claim_port(base, scan=4, node="node-x")
        assert str(err.value) == (f"--base-port {base}: no free port from {base} to {base + 3} on Ray node node-x; "
                                  "pick another range with --base-port")
    first.release()
    again = claim_port(base)
    assert again.port == base
    for claim in (second, third, again):
        claim.release()


def test_the_unity_editor_with_ray_is_one_line() -> None:
    from ml_arl.core.exceptions import EnvironmentSourceError
    from ml_arl.envs.sources import unity_factory
    from ml_arl.settings import build_run_options

    options = build_run_options({"env_settings": {"manager": "ray"}}, {}, "test")
    with pytest.raises(EnvironmentSourceError) as err:
        unity_factory(options, 0)
    assert str(err.value) == (
        "manager: ray needs a Unity build (--env path/to/Build.x86_64): the Unity Editor runs on this machine only; "
        "train in the Editor with manager: subprocess")


def unity_ray_config(tmp_path: Path, build: Path, run_id: str, max_steps: int, base_port: int) -> dict[str, Any]:
    config = tiny_config(str(build), max_steps=max_steps, hyperparameters={
        "batch_size": 256, "buffer_size": 1024, "learning_rate": 3e-3, "beta": 1e-3, "num_epoch": 4})
    config["env_settings"].update({"manager": "ray", "num_envs": 2, "seed": 3, "base_port": base_port,
                                   "env_args": ["--agents", "8"]})
    config["engine_settings"] = {"no_graphics": True, "time_scale": 7}
    config["checkpoint_settings"] = {"results_dir": str(tmp_path / "results"), "run_id": run_id}
    return config


@pytest.mark.slow
def test_unity_build_only_the_nodes_have_trains_on_ray_and_exports_onnx(cluster: Any, tmp_path: Path, caplog: Any) -> None:
    """The driver accepts a build path that does not exist yet (with the Ray backend it checks
    nothing there and says so); the build appears before the actors start, as it would exist on
    the nodes only, and each actor finds it on its node, claims its own port there and trains the
    stand-in's Seeker with the other; the run exports Seeker.onnx."""
    import logging

    from ml_arl.envs.backends.ray_env_manager import RayEnvManager
    from ml_arl.networks.onnx_export import check_onnx
    from ml_arl.settings import build_run_options
    from ml_arl.training.controller import TrainerController
    from tests.support.unity_standin import free_base_port, make_build

    build = tmp_path / "nodes-only" / "Standin.x86_64"
    base = free_base_port(4)
    options = build_run_options(unity_ray_config(tmp_path, build, "unity", 1500, base), {}, "test")
    with caplog.at_level(logging.INFO):
        controller = TrainerController(options)
    assert isinstance(controller.env_manager, RayEnvManager)
    assert f"Unity build {build}: not checked here (manager: ray); each worker checks it and picks a free port " \
           f"from {base} up on its own Ray node" in caplog.text
    assert not build.exists()  # missing on the driver when it was accepted
    make_build(build.parent)
    controller.start_learning()
    assert controller.trainers["Seeker"].step >= 1500
    run = tmp_path / "results" / "unity"
    check_onnx(str(run / "Seeker.onnx"))
    ports = set()
    for worker in (0, 1):
        log = (run / "run_logs" / f"Player-{worker}.log").read_text()
        found = re.search(r"--mlagents-port', '(\d+)'", log)
        assert found is not None, log
        ports.add(int(found.group(1)))
    assert len(ports) == 2 and all(base <= p < base + 4 for p in ports), ports  # one node: two ports from base up


@pytest.mark.slow
def test_unity_build_missing_on_the_nodes_is_one_line_naming_the_node(cluster: Any, tmp_path: Path) -> None:
    config = write_config(tmp_path, max_steps=100)
    missing = tmp_path / "elsewhere" / "Nothing.x86_64"
    run = arl_learn_here([str(config), "--run-id", "gone", "--results-dir", str(tmp_path / "results"), "--num-envs",
                          "1", "--env", str(missing), "--ray-address", "auto"], cwd=REPO)
    out = run.stdout + run.stderr
    assert run.returncode == 2, out
    assert "Traceback" not in out, out
    assert re.search(rf"Unity build {re.escape(str(missing))}: not checked here \(manager: ray\)", run.stdout), out
    assert re.fullmatch(
        rf"\[ERROR\] Training stopped: worker \d: --env {re.escape(str(missing))}: no Unity build found there on Ray "
        r"node 127\.0\.0\.1 \(\w{8}\) \(also tried the \.x86_64 and \.x86 extensions\); every node needs the build "
        r"at this path", last_line(run.stdout)), out
    assert "Restarting" not in out, out


def test_make_vec_env_steps_ray_actors(cluster: Any) -> None:
    """ml_arl.make_vec_env over Ray actors (ray_address implies manager: ray): the cluster's actors step
    the built-in Reach with outside actions, reset themselves, and are closed with the env."""
    import ml_arl

    env = ml_arl.make_vec_env("builtin:ReachDiscrete", num_envs=2, ray_address="auto", seed=1)
    try:
        assert type(env.manager).__name__ == "RayEnvManager"
        obs, _ = env.reset()
        assert obs.shape[0] == env.num_envs and env.num_envs % 2 == 0
        ended = 0
        for _ in range(60):
            obs, rewards, terminated, truncated, infos = env.step(env.action_space.sample())
            ended += int((terminated | truncated).sum())
            assert np.all(np.isfinite(rewards))
        assert ended > 0  # Reach's episodes are short: some ended and came back reset
    finally:
        env.close()
