"""N worker processes, each stepping one environment with its muscles.

Protocol: one duplex Pipe per worker. The main process sends commands (``ml_arl.acting.worker_protocol``:
StepCommand, ResetCommand, SetParametersCommand, CloseCommand); a worker answers every command
with a reply (StepReply, ResetReply, or FailedReply) that says whether
it succeeded. Step results from all workers are read as one stream, in arrival order, by
``multiprocessing.connection.wait`` over the workers' pipes and process sentinels: the main
process blocks with a deadline, never polls, and notices a killed worker at once. (A shared
multiprocessing.Queue has one write lock for all workers; a worker killed while holding it
would freeze the others, so replies travel on each worker's own pipe.)

First-ready stepping: an idle worker is sent STEP (with any newer policy weights) right away,
so a slow environment never holds back a fast one.

A failing worker ships (worker id, exception type, message, traceback) and closes its env in
``finally``. Shutdown asks (CLOSE), waits up to 10 s, then terminates and finally kills.

Deadlines: a worker has ``2 x --timeout-wait + start_grace_s`` to start (an env's own waits,
e.g. a Unity build's handshake and first reset, take up to --timeout-wait each), and
``--timeout-wait + REPLY_GRACE_S`` (ml_arl.envs.backends.pipelined) to answer a step or a reset (the grace lets an env that has
its own --timeout-wait, a Unity build, report its own timeout first). A worker past its deadline
is killed and handed to ``handle_failure`` like any other failure.

Parameters that change without a reset (a curriculum lesson) ride along with each worker's next
StepCommand, as new policies do.

Resets (``reset()``: a self-play team change; ``set_environment_parameters()``: a phase switch,
a lesson with require_reset) first finish the steps in flight of every worker at once, then reset every worker at once; a
worker that fails or times out in either part is killed and restarted within the restart quota
after the others have reset. A restarted worker starts with the current environment parameters
and a fresh reset (``_await_specs``), so the reset completes for everyone.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any, Optional

import cloudpickle

from ml_arl.acting import observation_slots
from ml_arl.acting.worker_protocol import CloseCommand, ResetReply, StepCommand, StepReply, WorkerCommand, WorkerReply
from ml_arl.core.env_factory import EnvFactory
from ml_arl.core.exceptions import EnvironmentSourceError, WorkerError
from ml_arl.core.experience import StepBatch
from ml_arl.envs.backends.env_manager import WorkerErrorLog
from ml_arl.envs.backends.forkserver import WorkerProcess, fork_server, retire
from ml_arl.envs.backends.pipelined import PIPELINE_DEPTH, SHUTDOWN_TIMEOUT_S, PipelinedEnvManager, worker_died
from ml_arl.settings import EnvSettings

logger = logging.getLogger(__name__)



class _Worker:
    """Main-process handle of a worker. Large requests (new weights) go out through a sender
    thread, so the main process never blocks in send: a large request and a large reply
    (trajectories) can cross in the pipes without both sides waiting on each other. Small
    requests, which always fit in the pipe buffer, go out directly unless a large one is still
    on its way (order is kept)."""

    def __init__(self, worker_id: int, process: WorkerProcess, conn: Connection, shared_prefix: str = ""):
        self.worker_id = worker_id
        self.shared_prefix = shared_prefix  # its observation files' names (ml_arl.acting.observation_slots)
        self.process = process
        self.conn = conn
        self._outbox: queue.SimpleQueue[Optional[WorkerCommand]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._queued = 0  # requests handed to the sender thread and not yet sent
        self._sender = threading.Thread(target=self._send_loop, name=f"send-worker-{worker_id}", daemon=True)
        self._sender.start()
        self.sent: deque[float] = deque()  # send times of the STEP requests not answered yet
        self.last_reply = time.monotonic()
        self.policy_versions: dict[str, int] = {}
        self.parameters_serial = 0  # the manager's parameters_serial this worker's environment has

    def send(self, request: WorkerCommand, large: bool = False) -> None:
        with self._lock:
            if not large and self._queued == 0:
                try:
                    self.conn.send(request)
                except (OSError, ValueError):
                    pass  # the worker is gone; its sentinel tells the main loop
                return
            self._queued += 1
        self._outbox.put(request)

    def stop_sending(self) -> None:
        self._outbox.put(None)

    def _send_loop(self) -> None:
        while True:
            request = self._outbox.get()
            if request is None:
                return
            try:
                self.conn.send(request)
            except (OSError, ValueError):
                return  # the worker is gone (its sentinel tells the main loop) or the pipe was closed
            with self._lock:
                self._queued -= 1

    def step_deadline(self, timeout: float) -> Optional[float]:
        """When the oldest outstanding request must be answered: requests queue up in the worker,
        so the clock for one starts when it was sent or when the one before it was answered."""
        if not self.sent:
            return None
        return max(self.sent[0], self.last_reply) + timeout


def pickled_factory(factory: EnvFactory) -> bytes:
    """The factory as the workers receive it (cloudpickle: a class or function of the script or a
    notebook travels by value); one that cannot be pickled is a one-line EnvironmentSourceError."""
    try:
        return cloudpickle.dumps(factory)
    except Exception as err:  # noqa: BLE001 - whatever the user's objects raise when pickled
        first = (str(err).strip().splitlines() or [""])[0]
        raise EnvironmentSourceError(
            f"--env {factory.description}: cannot be sent to the worker processes ({type(err).__name__}: {first}); "
            "build what cannot be pickled (a lock, an open file, a connection) inside the factory, or set "
            "env_settings.manager: inprocess"
        ) from None


class SubprocessEnvManager(PipelinedEnvManager[_Worker]):
    def __init__(self, factory: EnvFactory, settings: EnvSettings, seed: int, error_log: Optional[WorkerErrorLog] = None):
        super().__init__(settings, error_log)
        self.factory_bytes = pickled_factory(factory)
        self.preload = tuple(getattr(factory, "preload", ()))
        self.seed = seed
        self.workers: list[_Worker] = []
        self._close_asked = False  # finish_stepping() sent the workers their CloseCommand
        self._starts = 0  # workers started, restarts included: each start's shared files have a name of their own

    @property
    def num_workers(self) -> int:
        return len(self.workers)

    def _spawn(self, worker_id: int) -> _Worker:
        cap = self.settings.observation_memory_mb * 2**20
        prefix = observation_slots.worker_prefix(worker_id, self._starts) if cap else ""
        self._starts += 1
        args = (self.factory_bytes, worker_id, self.seed + worker_id, self.settings.steps_per_message, self.settings.worker_nice,
                prefix, cap)
        proc, conn = fork_server().start_worker(f"arl-worker-{worker_id}", args, self.preload)
        return _Worker(worker_id, proc, conn, prefix)

    def _members(self) -> list[_Worker]:
        return self.workers

    def _timed_out(self, worker: _Worker, what: str, timeout: float) -> WorkerError:
        worker.process.kill()
        worker.sent.clear()
        return WorkerError(
            worker.worker_id,
            f"worker {worker.worker_id}: environment did not {what} within {timeout:g} s "
            f"(--timeout-wait {self.settings.timeout_wait} s; hung?); raise --timeout-wait if it is just slow",
            restartable=True,
        )

    def _first_reply(self, worker: _Worker) -> Optional[WorkerReply]:
        return self._recv(worker) if wait([worker.conn, worker.process.sentinel], timeout=self.start_timeout) else None

    def _ask(self, worker: _Worker, command: WorkerCommand) -> Optional[WorkerReply]:
        worker.send(command)
        return self._recv(worker) if wait([worker.conn, worker.process.sentinel], timeout=self.reply_timeout) else None

    def _ask_many(self, asks: list[tuple[_Worker, WorkerCommand]]) -> list[Optional[WorkerReply]]:
        for worker, command in asks:
            worker.send(command)  # all step at once
        deadline = time.monotonic() + self.reply_timeout
        return [
            self._recv(worker) if wait([worker.conn, worker.process.sentinel], timeout=max(deadline - time.monotonic(), 0.0))
            else None
            for worker, _ in asks
        ]

    def launch(self) -> None:
        if not self.workers:
            observation_slots.remove_stale()
            self.workers = [self._spawn(i) for i in range(self.settings.num_envs)]

    def restart_worker(self, worker_id: int) -> None:
        old = self.workers[worker_id]
        self._kill(old)
        new = self._spawn(worker_id)
        self.workers[worker_id] = new
        self._await_specs(new)

    def _recv(self, worker: _Worker) -> WorkerReply:
        try:
            return worker.conn.recv()
        except (EOFError, OSError, ConnectionResetError):
            worker.process.join(timeout=1.0)
            code = worker.process.exitcode
            how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            return worker_died(worker.worker_id, f"worker process died ({how})")

    def _send_step(self, worker: _Worker) -> None:
        updates = self.policy_updates(worker.policy_versions)
        parameters = None
        if worker.parameters_serial != self.parameters_serial:
            parameters, worker.parameters_serial = self.parameters, self.parameters_serial
        worker.send(StepCommand(updates, parameters), large=bool(updates))
        worker.sent.append(time.monotonic())

    def step(self) -> list[StepBatch]:
        if self.settings.deterministic:  # one request per worker, all answered, in worker order
            for worker in self.workers:
                if not worker.sent:
                    self._send_step(worker)
            return self._answers_in_worker_order()
        for worker in self.workers:
            while len(worker.sent) < PIPELINE_DEPTH:
                self._send_step(worker)
        by_handle: dict[Any, _Worker] = {}
        for worker in self.workers:
            by_handle[worker.conn] = worker
            by_handle[worker.process.sentinel] = worker
        ready = wait(list(by_handle), timeout=max(0.0, self._next_step_deadline() - time.monotonic()))
        batches: list[StepBatch] = []
        failed: list[WorkerError] = []
        seen: set[int] = set()
        for handle in ready:
            worker = by_handle[handle]
            if worker.worker_id in seen:
                continue
            seen.add(worker.worker_id)
            while worker.sent:
                reply = self._recv(worker)
                worker.sent.popleft()
                worker.last_reply = time.monotonic()
                if not isinstance(reply, StepReply):
                    worker.sent.clear()
                    failed.append(self._failure(worker, reply))
                    break
                batches.append(reply.batch)
                if not worker.conn.poll():
                    break
        self._fail_overdue(seen, failed)
        return batches

    def _answers_in_worker_order(self) -> list[StepBatch]:
        """Await every step request in flight (each worker against its own deadline); returns the
        batches ordered by worker, then by request; failed workers are handled (restarted within the quota)."""
        answers: dict[int, list[StepBatch]] = {}
        failed: dict[int, WorkerError] = {}

        def answered(worker: _Worker, reply: WorkerReply) -> None:
            worker.sent.popleft()
            worker.last_reply = time.monotonic()
            if isinstance(reply, StepReply):
                answers.setdefault(worker.worker_id, []).append(reply.batch)

        self._await_replies(
            StepReply, {w.worker_id: len(w.sent) for w in self.workers}, self._step_deadline, answered,
            failed, "answer a step",
        )
        for worker_id in sorted(failed):
            self.workers[worker_id].sent.clear()  # never answered now
            self.handle_failure(failed[worker_id])
        return [batch for worker_id in sorted(answers) for batch in answers[worker_id]]

    def _step_deadline(self, worker: _Worker) -> float:
        deadline = worker.step_deadline(self.reply_timeout)
        assert deadline is not None  # a worker waited on has a step in flight
        return deadline

    def _reset_all(self, command: WorkerCommand, during: str) -> None:
        failed: dict[int, WorkerError] = {}

        def step_answered(worker: _Worker, reply: WorkerReply) -> None:
            worker.sent.popleft()
            worker.last_reply = time.monotonic()

        outstanding = {w.worker_id: len(w.sent) for w in self.workers}
        self._await_replies(StepReply, outstanding, self._step_deadline, step_answered, failed, "answer a step")
        for worker in self.workers:
            worker.sent.clear()  # the failed ones' steps will never be answered
        reset_deadlines: dict[int, float] = {}
        for worker in self.workers:
            if worker.worker_id not in failed:
                worker.send(command)
                reset_deadlines[worker.worker_id] = time.monotonic() + self.reply_timeout
        self._await_replies(
            ResetReply, dict.fromkeys(reset_deadlines, 1), lambda w: reset_deadlines[w.worker_id],
            lambda w, reply: None, failed, "answer a reset", during,
        )
        for worker_id in sorted(failed):
            self.handle_failure(failed[worker_id])

    def _await_replies(
        self,
        expected: type[StepReply] | type[ResetReply],
        outstanding: dict[int, int],
        deadline_of: Callable[[_Worker], float],
        answered: Callable[[_Worker, WorkerReply], None],
        failed: dict[int, WorkerError],
        what: str,
        during: str = "",
    ) -> None:
        """Read ``outstanding[worker_id]`` replies of kind ``expected`` from every worker, in
        arrival order (one ``wait`` over all pipes and process sentinels, up to the earliest
        deadline). A worker that answers otherwise or dies goes to ``failed``; one past its
        deadline is killed and goes there too."""
        pending = {wid: n for wid, n in outstanding.items() if n > 0 and wid not in failed}
        while pending:
            by_handle: dict[Any, _Worker] = {}
            for wid in pending:
                worker = self.workers[wid]
                by_handle[worker.conn] = worker
                by_handle[worker.process.sentinel] = worker
            deadline = min(deadline_of(self.workers[wid]) for wid in pending)
            ready = wait(list(by_handle), timeout=max(0.0, deadline - time.monotonic()))
            heard: set[int] = set()
            for handle in ready:
                worker = by_handle[handle]
                wid = worker.worker_id
                if wid in heard:
                    continue
                heard.add(wid)
                reply = self._recv(worker)
                answered(worker, reply)
                if not isinstance(reply, expected):
                    failed[wid] = self._failure(worker, reply, during)
                    del pending[wid]
                    continue
                pending[wid] -= 1
                if not pending[wid]:
                    del pending[wid]
            now = time.monotonic()
            for wid in list(pending):
                worker = self.workers[wid]
                if wid not in heard and now >= deadline_of(worker):
                    failed[wid] = self._timed_out(worker, what, self.reply_timeout)
                    del pending[wid]

    def _kill(self, worker: _Worker) -> None:
        """Terminate the worker (ask, wait, kill), then whatever it left in its process group."""
        worker.stop_sending()
        if worker.process.is_alive():
            worker.process.terminate()
            worker.process.join(timeout=2.0)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(timeout=2.0)
        worker.process.close()
        worker.conn.close()
        if worker.shared_prefix:
            observation_slots.forget(worker.shared_prefix)  # nothing more is read from it

    def finish_stepping(self) -> None:
        """Ask every worker to close now, and the fork server to exit once they are gone;
        ``close`` waits for them."""
        for worker in self.workers:
            worker.send(CloseCommand())
        self._close_asked = True
        retire()

    def close(self) -> None:
        """Ask every worker to close, wait up to 10 s for all, then terminate the stragglers."""
        if not self._close_asked:
            for worker in self.workers:
                worker.send(CloseCommand())
        deadline = time.monotonic() + SHUTDOWN_TIMEOUT_S
        pending = {w.worker_id: w for w in self.workers if w.process.is_alive()}
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            handles: list[Any] = []
            for w in pending.values():
                handles += [w.process.sentinel, w.conn]
            ready = wait(handles, timeout=remaining)
            for worker in list(pending.values()):
                if worker.conn in ready:
                    try:
                        worker.conn.recv()  # drop late answers so a worker blocked in send can exit
                    except Exception:  # noqa: BLE001 - a half-read message after Ctrl-C; the kill below ends it
                        pending.pop(worker.worker_id, None)
                        continue
                if worker.process.sentinel in ready:
                    worker.process.join(timeout=0)
                    del pending[worker.worker_id]
        if pending:
            logger.warning(
                "SubprocessEnvManager: workers %s did not shut down within %.0f s; terminating them",
                sorted(pending), SHUTDOWN_TIMEOUT_S,
            )
        for worker in self.workers:
            self._kill(worker)
        self.workers = []
