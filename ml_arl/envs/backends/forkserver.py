"""How worker processes are started: forked by ml_arl's own fork server, started early.

The server (``ml_arl.envs.backends.forkserver_main``) is a fresh interpreter started from ml_arl's
own entry point, so a worker never imports the user's main module: a script without an
``if __name__ == "__main__":`` guard, one piped in on stdin and a notebook all work, and an
environment class defined there reaches the workers by cloudpickle, by value. The server has no
trainer threads and no torch, so forking it is safe, and it imports what every worker needs once
(numpy, mlagents_envs, gymnasium, the built-in envs): a worker starts in milliseconds.
``prestart()`` boots it in the background as soon as the config asks for subprocess workers, so
it imports while this process imports torch.

A worker is not daemonic (it may start processes of its own: palaestrAI's MIDAS store does),
leads a process group of its own, and dies with the run: it watches a lifeline pipe whose write
end only this process holds (``forkserver_main``). ``WorkerProcess`` is its handle here, with
what ``multiprocessing.Process`` offers the manager: a sentinel to ``wait`` on, the exit code,
terminate and kill (of the whole group), join.

This module imports only the standard library: it runs before anything heavy is loaded.
"""

from __future__ import annotations

import math
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any, Optional

from ml_arl.envs.backends.forkserver_main import LOST, RETIRE, STATUS, recv_message, send_message

# Workers share the machine's cores: one BLAS thread each (set before the server starts).
_SINGLE_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
PID_TIMEOUT_S = 120.0  # how long the server may take to answer a launch (it may still be importing)
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_SERVER_CODE = (
    "import sys; sys.path.insert(0, {root!r}); "
    "from ml_arl.envs.backends.forkserver_main import serve; serve({fd})"
)


def _readable(fd: int, timeout: Optional[float]) -> bool:
    """Whether ``fd`` becomes readable within ``timeout`` seconds (None: no limit)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else max(0, math.ceil(timeout * 1000))))


class WorkerProcess:
    """This process's handle of one worker forked by the server."""

    def __init__(self, server: ForkServer, name: str, status_fd: int, lifeline_fd: int):
        self.name = name
        self._server = server
        self.sentinel = status_fd  # readable once the worker has exited (or its server is gone)
        self._lifeline = lifeline_fd
        self._pid: Optional[int] = None
        self._exitcode: Optional[int] = None

    @property
    def pid(self) -> int:
        if self._pid is None:
            self._server.read_pids()
        assert self._pid is not None
        return self._pid

    @property
    def exitcode(self) -> Optional[int]:
        """The exit code (negative: killed by that signal), None while the worker runs."""
        if self._exitcode is None and self.sentinel >= 0 and _readable(self.sentinel, 0):
            data = os.read(self.sentinel, STATUS.size)
            if len(data) == STATUS.size:
                (self._exitcode,) = STATUS.unpack(data)
            else:  # the server died before it could say: make sure the worker is gone too
                self._signal(signal.SIGKILL)
                self._exitcode = LOST
        return self._exitcode

    def is_alive(self) -> bool:
        return self.exitcode is None

    def join(self, timeout: Optional[float] = None) -> None:
        if self._exitcode is None and self.sentinel >= 0:
            _readable(self.sentinel, timeout)

    def _signal(self, signum: int) -> None:
        """``signum`` to the worker's process group (what it started goes too); the group
        outlives its leader while a member lives, so this also reaches what an exited worker left."""
        pid = self.pid
        if pid <= 0:
            return  # its server died before it said (the worker went with its lifeline, or goes now)
        try:
            os.killpg(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def terminate(self) -> None:
        if self.is_alive():
            self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def close(self) -> None:
        """Forget the worker once it is gone: its lifeline and sentinel close, and whatever it
        left in its process group is killed."""
        self.kill()
        for fd in (self._lifeline, self.sentinel):
            if fd >= 0:
                os.close(fd)
        self._lifeline = self.sentinel = -1


class ForkServer:
    """The client end of one fork server process; ``start_worker`` asks it for a worker."""

    def __init__(self) -> None:
        for var in _SINGLE_THREAD_ENV:
            os.environ.setdefault(var, "1")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        code = _SERVER_CODE.format(root=_PACKAGE_ROOT, fd=theirs.fileno())
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, close_fds=True,
        )
        theirs.close()
        self.control = ours
        self.owner = os.getpid()  # a process forked from this one (a notebook's fork) needs a server of its own
        self.lost = False  # it stopped answering
        self.retired = False  # told to exit once its workers are gone (retire)
        self._lock = threading.Lock()
        self._awaiting: list[WorkerProcess] = []  # launched, pid not read yet (answers come in order)
        send_message(self.control, list(sys.path))

    def alive(self) -> bool:
        return self.owner == os.getpid() and not self.lost and not self.retired and self.process.poll() is None

    def retire(self) -> None:
        """Ask the server to fork no more and to exit once every worker it started has been
        reaped; the control socket stays open until then (closing it would end the server at
        once, before it reports its workers' exits). The next ``fork_server()`` starts another."""
        with self._lock:
            try:
                socket.send_fds(self.control, [RETIRE], [])
            except OSError:
                pass  # already gone
            self.retired = True

    def exited(self) -> bool:
        return self.process.poll() is not None

    def start_worker(self, name: str, args: tuple[Any, ...], preload: tuple[str, ...] = ()) -> tuple[WorkerProcess, Connection]:
        """Fork a worker that runs ``worker_main(conn, *args)``; returns its handle and this end of
        its pipe at once (the pid is read when first asked for: the server may still be importing).
        ``preload``: modules the server imports first, if it has not (the worker shares them)."""
        mine, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        lifeline_r, lifeline_w = os.pipe()
        status_r, status_w = os.pipe()
        handle = WorkerProcess(self, name, status_r, lifeline_w)
        try:
            with self._lock:
                socket.send_fds(self.control, [b"W"], [child.fileno(), lifeline_r, status_w])
                send_message(self.control, (args, list(sys.path), os.getcwd(), tuple(preload)))
                self._awaiting.append(handle)
        except OSError:
            handle.close()
            raise
        finally:
            child.close()
            os.close(lifeline_r)
            os.close(status_w)
        return handle, Connection(mine.detach())

    def read_pids(self) -> None:
        """Read the pids the server has answered, up to the last launched worker's. A server that
        says nothing within PID_TIMEOUT_S (its imports included) is taken as lost: its workers'
        lifelines still end them with this process."""
        with self._lock:
            self.control.settimeout(PID_TIMEOUT_S)
            try:
                while self._awaiting:
                    try:
                        pid = recv_message(self.control)
                    except (EOFError, OSError):  # socket.timeout is an OSError
                        for handle in self._awaiting:
                            handle._pid, handle._exitcode = -1, LOST
                        self._awaiting.clear()
                        self.lost = True  # the next fork_server() starts another
                        return
                    self._awaiting.pop(0)._pid = pid
            finally:
                self.control.settimeout(None)

    def close(self) -> None:
        self.control.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


_server: Optional[ForkServer] = None
_server_lock = threading.Lock()


def fork_server() -> ForkServer:
    """This process's fork server, started on first use, and again if it died, was retired, or
    this process is a fork of the one that started it (the socket is the parent's: the child
    leaves it alone)."""
    global _server
    with _server_lock:
        if _server is None or not _server.alive():
            if _server is not None and _server.retired and _server.owner == os.getpid():
                _retired.append(_server)
            _retired[:] = [s for s in _retired if not _closed_if_exited(s)]
            _server = ForkServer()
        return _server


_retired: list[ForkServer] = []  # retired servers whose workers may still be closing


def _closed_if_exited(server: ForkServer) -> bool:
    if not server.exited():
        return False
    server.control.close()
    return True


def retire() -> None:
    """No more workers will be asked for by this run: this process's server exits once its
    workers are gone, and gives its memory back (a later run starts another, early: prestart)."""
    with _server_lock:
        if _server is not None and _server.owner == os.getpid() and _server.alive():
            _server.retire()


def prestart() -> None:
    """Start the fork server now: it boots while this process goes on."""
    fork_server()
