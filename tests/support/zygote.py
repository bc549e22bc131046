"""arl-learn as a process of its own, without paying for a fresh interpreter each time.

Most of what a fresh ``python -m ml_arl.cli.learn`` costs before it trains is its imports: torch alone
is about 3 s of CPU on the 2-core test machine, and the suite starts arl-learn a few dozen times.
A *zygote* pays that once per test process: it imports what arl-learn's ``main()`` imports, runs
no torch op (so no thread pool exists when it forks), then forks one child per run. The child is a
separate process that runs the real ``ml_arl.cli.learn.run()`` (``main(sys.argv[1:])`` and its exit),
with the run's argv, cwd, environment and its own stdin, stdout and stderr; signals, its worker
processes, its exit code and its console are its own, as the command's are.

What a forked run does not repeat is only what the interpreter does before ``main()``: start-up,
imports, reading thread settings at torch's import. Tests of exactly that run the command
(``fresh=True``, or ``subprocess`` directly): the console-script smoke test, ``--help``, the kills
that land during start-up.

Protocol: the test process and the zygote share a Unix SOCK_SEQPACKET socket pair. A request is a
JSON message with the file descriptors the child gets (exit-status pipe, stdout, stderr) passed
alongside (SCM_RIGHTS); the answer is the child's pid. The zygote reaps its children in a SIGCHLD
handler and writes each exit code to that child's status pipe, which the test reads with a
deadline (``select``): nothing polls. When the test process closes its end, the zygote SIGKILLs
any child still running and exits.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Optional, Union

ROOT = Path(__file__).resolve().parents[2]

ZYGOTE = """\
import os, sys
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # what arl-learn sets before it imports torch
    os.environ.setdefault(var, "1")
import importlib.util, io, json, random, signal, socket
import numpy
import ml_arl.cli.learn, ml_arl.envs.backends.factory, ml_arl.results.run_folder, ml_arl.training.controller
import ml_arl.networks.onnx_export, ml_arl.results.summary_writers, ml_arl.trainers.ppo.trainer, ml_arl.trainers.sac.trainer, ml_arl.trainers.poca.trainer
import ml_arl.envs.adapters.unity_env, ml_arl.envs.backends.subprocess_env_manager, ml_arl.envs.games.builtin, ml_arl.envs.adapters.gym_env

channel = socket.socket(fileno=int(sys.argv[1]))
statuses = {}  # pid -> the write end of its exit-status pipe

def reap(*_):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = statuses.pop(pid, None)
        if fd is not None:
            os.write(fd, b"%d\\n" % os.waitstatus_to_exitcode(status))
            os.close(fd)

def serve():  # returns only in a forked child, with its request and its descriptors
    signal.signal(signal.SIGCHLD, reap)
    channel.send(b'{"ready": %d}' % os.getpid())
    while True:
        message, fds, _, _ = socket.recv_fds(channel, 1 << 20, 3)
        if not message:
            break
        request = json.loads(message)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        try:
            pid = os.fork()
            if pid == 0:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
                channel.close()
                for fd in list(statuses.values()) + fds[:1]:
                    os.close(fd)
                return request, fds[1:]
            statuses[pid] = fds[0]
            for fd in fds[1:]:
                os.close(fd)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        channel.send(b'{"pid": %d}' % pid)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for pid in list(statuses):  # the test process is gone: no run of it stays
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
    os._exit(0)  # without the teardown of torch's modules

request, fds = serve()
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.dup2(fds[0], 1)
os.dup2(fds[-1], 2)
for fd in {null, *fds}:
    os.close(fd)
if request["new_session"]:
    os.setsid()
os.environ.clear()
os.environ.update(request["env"])
if os.environ.get("PYTHONUNBUFFERED"):
    sys.stdout = io.TextIOWrapper(open(1, "wb", buffering=0, closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(open(2, "wb", buffering=0, closefd=False), write_through=True, errors="backslashreplace")
os.chdir(request["cwd"])
sys.argv = [ml_arl.cli.learn.__file__, *request["args"]]
sys.modules["__main__"].__spec__ = importlib.util.find_spec("ml_arl.cli.learn")  # as -m: workers import it as __mp_main__
random.seed()  # fresh seeds, as a fresh interpreter's
numpy.random.seed()
code = request["code"]
del request, fds, serve, null, channel, statuses
if code:
    exec(code)
ml_arl.cli.learn.run()
"""


class Zygote:
    """The zygote process of this test process, started on first use, closed at exit."""

    _instance: Optional[Zygote] = None

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.channel = ours
        self.lock = threading.Lock()
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, str(theirs.fileno())], env=env, pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=ROOT,
        )
        theirs.close()
        self.ready = False

    @classmethod
    def shared(cls) -> Zygote:
        if cls._instance is None or cls._instance.proc.poll() is not None:
            cls._instance = cls()
            atexit.register(cls._instance.close)
        return cls._instance

    def _answer(self, deadline_s: float) -> dict[str, Any]:
        ready, _, _ = select.select([self.channel], [], [], deadline_s)
        assert ready, f"the zygote did not answer within {deadline_s} s"
        message = self.channel.recv(4096)
        assert message, f"the zygote ended (exit code {self.proc.poll()})"
        answer: dict[str, Any] = json.loads(message)
        return answer

    def fork(self, request: dict[str, Any], fds: Sequence[int]) -> int:
        with self.lock:
            if not self.ready:
                self._answer(deadline_s=180)  # its imports, once
                self.ready = True
            socket.send_fds(self.channel, [json.dumps(request).encode()], list(fds))
            pid: int = self._answer(deadline_s=60)["pid"]
            return pid

    def close(self) -> None:
        self.channel.close()  # it kills what is left of its runs and ends
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


Target = Union[None, int, IO[Any]]  # what Popen takes for stdout/stderr: PIPE, STDOUT, DEVNULL, a file


class Forked:
    """A run forked by the zygote, with the part of ``subprocess.Popen`` the tests use."""

    def __init__(
        self, args: list[str], cwd: Union[str, Path], env: dict[str, str], stdout: Target, stderr: Target,
        text: bool, start_new_session: bool, code: str,
    ) -> None:
        self.args = ["arl-learn", *args]
        self.returncode: Optional[int] = None
        self.stdout: Optional[IO[Any]] = None
        self.stderr: Optional[IO[Any]] = None
        status_r, status_w = os.pipe()
        child = [status_w]  # the descriptors the child gets: its exit-status pipe, stdout[, stderr]
        for spec, inherited in ((stdout, 1), (stderr, 2)):
            if spec == subprocess.STDOUT:
                continue  # stderr to where stdout goes: the child uses one descriptor for both
            if spec == subprocess.PIPE:
                ours, theirs = os.pipe()
                if inherited == 1:
                    self.stdout = _reader(ours, text)
                else:
                    self.stderr = _reader(ours, text)
                child.append(theirs)
            elif spec is None:
                child.append(os.dup(inherited))
            elif spec == subprocess.DEVNULL:
                child.append(os.open(os.devnull, os.O_WRONLY))
            else:
                child.append(os.dup(spec.fileno()))  # type: ignore[union-attr]
        request = {"args": list(args), "cwd": str(cwd), "env": env, "new_session": start_new_session, "code": code}
        try:
            self.pid = Zygote.shared().fork(request, child)
        finally:
            for fd in child:  # the zygote has its copies, the child its own
                os.close(fd)
        self._status = os.fdopen(status_r, "rb")
        self._lock = threading.Lock()

    def poll(self) -> Optional[int]:
        return self._wait(0.0)

    def _wait(self, timeout: Optional[float]) -> Optional[int]:
        if self.returncode is None and select.select([self._status], [], [], timeout)[0]:
            with self._lock:  # a watchdog thread may ask too
                if self.returncode is None:
                    line = self._status.readline()
                    self.returncode = int(line) if line else -signal.SIGKILL  # the zygote itself died
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        code = self._wait(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        """To the run unless it has ended (reaped: its pid may be another process's now)."""
        if self.returncode is None and not select.select([self._status], [], [], 0)[0]:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:  # ended this instant
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: Optional[float] = None) -> tuple[Any, Any]:
        """Everything left on stdout and stderr (read to their end) and the exit, within ``timeout``."""
        end = None if timeout is None else time.monotonic() + timeout
        results: dict[str, Any] = {}
        readers = []
        for name, stream in (("out", self.stdout), ("err", self.stderr)):
            if stream is not None and not stream.closed:
                thread = threading.Thread(target=lambda n=name, s=stream: results.__setitem__(n, s.read()), daemon=True)
                thread.start()
                readers.append(thread)
        for thread in readers:
            thread.join(None if end is None else max(0.0, end - time.monotonic()))
            if thread.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(None if end is None else max(0.0, end - time.monotonic()))
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        return results.get("out"), results.get("err")

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc: Any) -> None:
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait()


def _reader(fd: int, text: bool) -> IO[Any]:
    raw = os.fdopen(fd, "rb")
    return io.TextIOWrapper(raw, encoding="utf-8") if text else raw


def popen_arl_learn(
    args: Sequence[Any], cwd: Union[str, Path], env: Optional[dict[str, str]] = None, *,
    stdout: Target = None, stderr: Target = None, text: bool = False, start_new_session: bool = False,
    code: str = "", fresh: bool = False,
) -> Union[Forked, subprocess.Popen[Any]]:
    """``python -m ml_arl.cli.learn ARGS`` (PYTHONPATH: the repository) as ``subprocess.Popen`` starts it,
    forked by the zygote unless ``fresh``. ``code`` runs first (a patch or a limit), in the run's process."""
    args = [str(a) for a in args]
    env = dict(os.environ if env is None else env)
    env.setdefault("PYTHONPATH", str(ROOT))
    if fresh:
        command = [sys.executable, "-m", "ml_arl.cli.learn", *args]
        if code:
            command = [sys.executable, "-c", f"import sys\n{code}\nimport ml_arl.cli.learn\nml_arl.cli.run()", *args]
        return subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                text=text, start_new_session=start_new_session)
    return Forked(args, cwd, env, stdout, stderr, text, start_new_session, code)


def run_arl_learn(
    args: Sequence[Any], cwd: Union[str, Path], timeout: float = 120, *, env: Optional[dict[str, str]] = None,
    code: str = "", fresh: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` of arl-learn with its output captured as text: forked unless ``fresh``."""
    proc = popen_arl_learn(args, cwd, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, code=code,
                           fresh=fresh)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode is not None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
