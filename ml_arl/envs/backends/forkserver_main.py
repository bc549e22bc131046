"""The fork server's own process: ``python -c "...; serve(FD)"``, started by
``ml_arl.envs.backends.forkserver``. It imports what every worker needs once, then forks one
worker per request. It never imports the user's main module (a script, ``<stdin>``, a notebook):
its own ``__main__`` is the ``-c`` line, and a worker's is the same.

Protocol, on a Unix stream socket shared with the main process: a request is one byte carrying
three descriptors (SCM_RIGHTS: the worker's end of its pipe, the read end of its lifeline, the
write end of its exit-status pipe) followed by a length-prefixed pickle of ``(args, sys_path,
cwd, preload)``; the server imports the preload modules it lacks, then forks; the answer is
the worker's pid, length-prefixed. The server reaps its children (SIGCHLD,
woken through a pipe: nothing polls) and writes each one's exit code, 4 signed bytes, to its
status pipe, whose read end the main process waits on as the worker's sentinel. A request of
the byte ``R`` alone retires the server: it forks no more and exits once its last worker has been
reaped (a run's end: its memory is given back while the run saves; a later run starts another).

A worker:

* leads a process group of its own, so that whatever it starts (a simulator, a writer process, a
  Unity build) goes with it: the main process kills the whole group;
* is not daemonic: it may start processes, threads and event loops of its own;
* dies with the run: a watchdog thread blocks on the lifeline, whose only write end the main
  process holds; when that process is gone, however it went (SIGKILL included), the read returns
  and the watchdog SIGKILLs the worker's process group.

When the main process closes the control socket (or dies), the server exits; its workers go by
their own lifelines. Standard library only, until the preloads.
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import signal
import socket
import struct
import sys
import threading
from typing import Any

_LENGTH = struct.Struct("!Q")
STATUS = struct.Struct("!i")  # a worker's exit code as its status pipe carries it
LOST = 255  # the exit code of a worker whose server died before reporting it
RETIRE = b"R"  # a request without descriptors: exit once every worker started so far has been reaped


def send_message(sock: socket.socket, obj: Any) -> None:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_LENGTH.pack(len(payload)) + payload)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise EOFError("the other end closed the fork server's socket")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv_message(sock: socket.socket) -> Any:
    (length,) = _LENGTH.unpack(_read_exactly(sock, _LENGTH.size))
    return pickle.loads(_read_exactly(sock, length))


def _preload() -> None:
    """What every worker needs, imported once here (numpy, mlagents_envs, gymnasium, the worker
    loop, the built-in environments) instead of in each worker after its fork."""
    import ml_arl.acting.worker_main  # noqa: F401
    import ml_arl.envs.adapters.gym_env  # noqa: F401
    import ml_arl.envs.games.builtin  # noqa: F401


def _watch_lifeline(fd: int) -> None:
    """Block until the main process is gone (its end of the lifeline closed), then take this
    worker's process group with it."""
    while True:
        try:
            if not os.read(fd, 1):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    try:  # the observation files it made and the main process never mapped (ml_arl.acting.observation_slots)
        from ml_arl.acting.observation_slots import remove_owned

        remove_owned()
    except Exception:  # noqa: BLE001, S110 - nothing may keep the group from going
        pass
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _import_first(modules: tuple[str, ...], sys_path: list[str]) -> None:
    """A request's preloads (EnvFactory.preload), imported here before the fork, once: a module
    that fails is left to the worker, which imports it itself and reports what went wrong."""
    from ml_arl.core.import_path import load_module

    for name in modules:
        if name in sys.modules:
            continue
        saved = sys.path[:]
        sys.path[:] = sys_path
        try:
            load_module(name)
        except Exception:  # noqa: BLE001 - the worker meets the same failure and reports it
            pass
        finally:
            sys.path[:] = saved


def _run_worker(conn_fd: int, lifeline_fd: int, request: tuple[tuple[Any, ...], list[str], str, tuple[str, ...]]) -> int:
    """A forked child: become a worker and return its exit code."""
    from multiprocessing.connection import Connection

    args, sys_path, cwd, _ = request
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # a worker reads nothing from the terminal
    os.close(devnull)
    sys.path[:] = sys_path
    try:
        os.chdir(cwd)
    except OSError:
        pass  # the main process's folder is gone; the worker still runs where the server is
    threading.Thread(target=_watch_lifeline, args=(lifeline_fd,), name="arl-lifeline", daemon=True).start()
    from ml_arl.acting.worker_main import worker_main

    worker_main(Connection(conn_fd), *args)
    return 0


def _child(conn_fd: int, lifeline_fd: int, request: Any) -> None:
    code = 1
    try:
        code = _run_worker(conn_fd, lifeline_fd, request)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: BLE001 - worker_main reports its own failures; this is before it could
        import traceback

        sys.stderr.write(traceback.format_exc())
    finally:
        try:
            atexit._run_exitfuncs()  # multiprocessing's: processes the environment started are joined
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(code)


def serve(control_fd: int) -> None:
    """The server's loop: until the main process closes the control socket."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    control = socket.socket(fileno=control_fd)
    sys.path[:] = recv_message(control)
    try:
        _preload()
    except Exception as err:  # noqa: BLE001 - a worker imports what it needs itself
        sys.stderr.write(f"ml_arl fork server: preloading failed ({type(err).__name__}: {err}); workers import it\n")
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # wakes the select through wake_w
    statuses: dict[int, int] = {}  # pid -> the write end of its exit-status pipe
    retiring = False  # asked to exit once its last worker is reaped (RETIRE)

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            fd = statuses.pop(pid, None)
            if fd is not None:
                try:
                    os.write(fd, STATUS.pack(os.waitstatus_to_exitcode(status)))
                except OSError:
                    pass  # the main process no longer waits on it
                os.close(fd)

    while True:
        try:
            ready, _, _ = select.select([control.fileno(), wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
            reap()
        if retiring and not statuses:
            break
        if control.fileno() not in ready:
            continue
        try:
            kind, fds, _, _ = socket.recv_fds(control, 1, 3)
            if kind == RETIRE and not fds:
                retiring = True  # no more workers will be asked for: exit when the last one is reaped
                if not statuses:
                    break
                continue
            if len(fds) != 3:
                break  # EOF: the main process is gone or done
            request = recv_message(control)
        except (EOFError, OSError):
            break
        conn_fd, lifeline_fd, status_fd = fds
        _import_first(request[3], request[1])
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            os.setpgid(0, 0)
            for fd in (wake_r, wake_w, status_fd, *statuses.values()):
                os.close(fd)
            control.close()
            _child(conn_fd, lifeline_fd, request)
        try:
            os.setpgid(pid, pid)  # here too: the main process may signal the group before the child ran
        except OSError:
            pass  # the child did it first, or is gone already
        os.close(conn_fd)
        os.close(lifeline_fd)
        statuses[pid] = status_fd
        try:
            send_message(control, pid)
        except OSError:
            break
    reap()
