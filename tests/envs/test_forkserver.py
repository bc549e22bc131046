"""ml_arl's fork server (ml_arl.envs.backends.forkserver): a worker forked on request answers on
its pipe, its handle reports its pid and exit code, a kill takes its whole process group (what its
environment started), and a forked copy of this process gets a server of its own."""

from __future__ import annotations

import os
import signal
import time

import cloudpickle

from ml_arl.acting.worker_protocol import CloseCommand, SpecsReply
from ml_arl.core.env_factory import EnvFactory
from ml_arl.envs.backends.forkserver import ForkServer, fork_server
from tests.conformance.user_envs import starts_process


def test_a_worker_answers_reports_its_exit_and_dies_with_its_group() -> None:
    server = ForkServer()
    try:
        factory = cloudpickle.dumps(EnvFactory("helper env", starts_process))
        handle, conn = server.start_worker("w0", (factory, 0, 1, 4, 0))
        assert conn.poll(60), "the worker did not report its specs within 60 s"
        reply = conn.recv()
        assert isinstance(reply, SpecsReply) and "Reach" in reply.specs
        assert handle.pid > 0 and handle.is_alive() and os.getpgid(handle.pid) == handle.pid
        members = [int(p) for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == handle.pid]
        assert len(members) >= 2, members  # the worker and its environment's helper process
        handle.kill()
        handle.join(30)
        assert handle.exitcode == -signal.SIGKILL
        handle.close()
        conn.close()
        end = time.monotonic() + 10
        while [p for p in members if _alive(p)] and time.monotonic() < end:
            time.sleep(0.05)  # SIGKILL is delivered to the group at once; the state changes within moments
        left = [p for p in members if _alive(p)]
        assert not left, left
    finally:
        server.close()


def test_a_closed_worker_exits_0() -> None:
    server = ForkServer()
    try:
        factory = cloudpickle.dumps(EnvFactory("helper env", starts_process))
        handle, conn = server.start_worker("w0", (factory, 0, 1, 4, 0))
        assert conn.poll(60)
        conn.recv()
        conn.send(CloseCommand())
        handle.join(30)
        assert handle.exitcode == 0
        handle.close()
    finally:
        server.close()


def test_a_forked_copy_of_this_process_gets_a_server_of_its_own() -> None:
    ours = fork_server()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child says whether it got another server, then leaves without the test's teardown
        os.close(read)
        theirs = fork_server()
        os.write(write, b"1" if theirs is not ours and theirs.alive() else b"0")
        theirs.close()
        os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"1"
    assert fork_server() is ours and ours.alive()


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return -1


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_factorys_preload_is_imported_once_by_the_server_before_the_forks(tmp_path, monkeypatch) -> None:
    """EnvFactory.preload: the server imports those modules once, before it forks the workers (who
    share them); one that does not import is left to the worker, which still starts."""
    log = tmp_path / "imported_by.txt"
    (tmp_path / "arl_preload_probe.py").write_text(f"import os\nopen({str(log)!r}, 'a').write(f'{{os.getpid()}}\\n')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    server = ForkServer()
    try:
        factory = cloudpickle.dumps(EnvFactory("helper env", starts_process))
        preload = ("arl_preload_probe", "no_such_module_anywhere")
        workers = [server.start_worker(f"w{i}", (factory, i, 1, 4, 0), preload) for i in range(2)]
        for handle, conn in workers:
            assert conn.poll(60), "the worker did not report its specs within 60 s"
            assert isinstance(conn.recv(), SpecsReply)
            assert handle.pid != server.process.pid
            conn.send(CloseCommand())
        for handle, conn in workers:
            handle.join(30)
            handle.close()
            conn.close()
        assert log.read_text().split() == [str(server.process.pid)]
    finally:
        server.close()


def test_a_retired_server_reports_its_workers_exit_then_exits_and_another_starts() -> None:
    """retire(): the server forks no more and exits once its last worker is reaped, having reported
    that worker's exit code (not LOST: the worker closes as it was asked); fork_server() then starts
    another (issue 49: a run's end gives the server's memory back before its final export)."""
    from ml_arl.envs.backends import forkserver

    server = fork_server()
    factory = cloudpickle.dumps(EnvFactory("helper env", starts_process))
    handle, conn = server.start_worker("w0", (factory, 0, 1, 4, 0))
    assert conn.poll(60), "the worker did not report its specs within 60 s"
    conn.recv()
    forkserver.retire()
    assert not server.alive() and server.retired
    assert not server.exited(), "the server left before its worker"  # and its exit code below is the worker's, not LOST
    conn.send(CloseCommand())
    handle.join(30)
    assert handle.exitcode == 0
    server.process.wait(timeout=30)
    handle.close()
    conn.close()
    again = fork_server()
    assert again is not server and again.alive()
    assert server not in forkserver._retired  # its socket closed once it had exited
