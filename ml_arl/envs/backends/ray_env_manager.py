"""Environment workers as Ray actors, anywhere in a Ray cluster (env_settings.manager: ray).

Each worker is one actor (``ray_actor.EnvActor``, one CPU, spread over the nodes) holding an ``EnvRunner``; it speaks the worker
protocol of ``ml_arl.acting.worker_protocol`` through actor calls instead of a pipe: ``start()`` answers a
SpecsReply (naming its node), ``call(command)`` a StepReply (``steps_per_message`` steps with
the worker-side muscles), a ResetReply or a FailedReply carrying the exception's traceback. So the
trainer side sees the same StepBatch stream as with subprocess workers, and the same first-ready
stepping: each actor has up to ``PIPELINE_DEPTH`` step calls queued, and ``step()`` returns the
replies that are ready.

Weights: a changed policy is put in Ray's object store once (``ray.put``, lazily when the first
step call after the change goes out); every actor's next step call carries the reference, which
Ray resolves on the actor's node (once per node). The trainer never sends weights per worker.

Failures: every wait has a deadline (``ray.wait`` with a timeout: ``2 x --timeout-wait + 5 s``
to start, ``--timeout-wait + 2 s`` to answer, as the subprocess workers). A FailedReply, a dead
actor (its process killed, its node lost: Ray's RayActorError) or an actor past its deadline is a
failed worker: ``handle_failure`` restarts it within the restart quota (a new actor, on another
node where there is one: a lost node may look alive for seconds; the log names the node of both),
or the run stops with one line.

Ray itself: with ``ray_address`` (``auto``, ``host:port``, ``ray://host:port``) the manager joins
that cluster; without, it starts a local Ray instance on loopback (every Ray server on
127.0.0.1, Ray's token authentication as Ray sets it up). A process that has already called
``ray.init`` (a test, a notebook) keeps its Ray: the manager uses it and leaves it running.
Every node needs ml_arl (and the environment's code) importable, as the driver has it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import deque
from typing import Any, Optional

import cloudpickle

from ml_arl.acting.ray_actor import EnvActor
from ml_arl.acting.worker_protocol import (
    FailedReply,
    ResetReply,
    SpecsReply,
    StepCommand,
    StepReply,
    WorkerCommand,
    WorkerFailure,
    WorkerReply,
)
from ml_arl.core.env_factory import EnvFactory
from ml_arl.core.exceptions import ArlError, WorkerError
from ml_arl.core.experience import StepBatch
from ml_arl.envs.backends.env_manager import WorkerErrorLog
from ml_arl.envs.backends.pipelined import PIPELINE_DEPTH, SHUTDOWN_TIMEOUT_S, PipelinedEnvManager, worker_died
from ml_arl.settings import EnvSettings

logger = logging.getLogger(__name__)

# An actor's start is Ray placing it and starting a Python worker process for it, which imports the
# environment's code: seconds on an idle machine, several times that on a loaded one. The grace
# keeps a slow start from counting as a hang (and spending a restart) when --timeout-wait is short.
START_GRACE_S = 30.0
LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0" before Ray is imported: a local instance on 127.0.0.1


class RayBackendError(ArlError):
    """Ray could not be started or joined."""


class _Handle:
    """Main-process handle of one actor: its step calls in flight (object reference, sent at)."""

    def __init__(self, worker_id: int, actor: Any, life: int):
        self.worker_id = worker_id
        self.actor = actor
        self.life = life
        self.node = "(not known before it starts)"
        self.start_ref: Any = None
        self.pending: deque[tuple[Any, float]] = deque()
        self.last_reply = time.monotonic()
        self.policy_serials: dict[str, int] = {}
        self.parameters_serial = 0

    def step_deadline(self, timeout: float) -> Optional[float]:
        if not self.pending:
            return None
        return max(self.pending[0][1], self.last_reply) + timeout


def check_reachable(address: str, timeout: float) -> None:
    """A ``host:port`` (or ``ray://host:port``) address answers a TCP connect within ``timeout``:
    Ray itself retries an unreachable address for minutes, with a log line every few seconds."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # auto, or something Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as err:
        raise RayBackendError(
            f"--ray-address {address}: nothing answers there ({err.strerror or err}); start the head node "
            "(ray start --head) or fix the address"
        ) from err


def connect(address: Optional[str], num_envs: int, timeout: float = 10.0) -> bool:
    """Ray ready in this process; True when this call started it (and close() shuts it down)."""
    if address is not None:
        check_reachable(address, timeout)
    if address is None:
        os.environ.setdefault(LOCAL_ONLY_ENV, "0")  # read when Ray is first imported
    import ray

    if ray.is_initialized():
        return False
    common: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING, "namespace": "ml_arl"}
    try:
        if address is None:
            ray.init(address="local", num_cpus=max(os.cpu_count() or 1, num_envs), **common)
        else:
            ray.init(address=address, **common)
    except Exception as exc:  # noqa: BLE001 - Ray raises several kinds; each becomes one line
        where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        hint = "; is it running (ray start --head) and is its auth token set?" if address else ""
        raise RayBackendError(f"cannot start or join {where}: {type(exc).__name__}: {first}{hint}") from exc
    return True


class RayEnvManager(PipelinedEnvManager[_Handle]):
    start_grace_s = START_GRACE_S

    def __init__(
        self, factory: EnvFactory, settings: EnvSettings, seed: int, error_log: Optional[WorkerErrorLog] = None,
        run_id: str = "run",
    ):
        super().__init__(settings, error_log)
        self.factory_bytes = cloudpickle.dumps(factory)
        self.seed = seed
        self.run_id = run_id
        self.handles: list[_Handle] = []
        self.owns_ray = False
        self._actor_class: Any = None
        self._policy_refs: dict[str, tuple[int, Any]] = {}  # behavior -> (serial, object reference)
        self.puts = 0  # weights put in the object store (one per changed policy)

    @property
    def num_workers(self) -> int:
        return len(self.handles)

    def _members(self) -> list[_Handle]:
        return self.handles

    def actor_name(self, worker_id: int, life: int) -> str:
        return f"arl:{self.run_id}:worker-{worker_id}:{life}"

    def _spawn(self, worker_id: int, life: int, avoid: str = "") -> _Handle:
        import ray

        if self._actor_class is None:
            # SPREAD: workers go to different nodes where they can (a node lost takes fewer of them)
            self._actor_class = ray.remote(num_cpus=1, max_restarts=0, scheduling_strategy="SPREAD")(EnvActor)
        name = self.actor_name(worker_id, life)
        options: dict[str, Any] = {"name": name}
        elsewhere = self._other_node(avoid) if avoid else None
        if elsewhere is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(elsewhere, soft=True)
        try:
            actor = self._actor_class.options(**options).remote(
                self.factory_bytes, worker_id, self.seed + worker_id, self.settings.steps_per_message,
                self.settings.worker_nice, "steps_per_message" not in self.settings.model_fields_set,
            )
        except ValueError as err:  # the name is taken: another run with this run id on the cluster
            raise RayBackendError(
                f"cannot create the Ray actor {name!r} ({err}); is another run with --run-id {self.run_id} using "
                "this Ray cluster?"
            ) from err
        handle = _Handle(worker_id, actor, life)
        handle.start_ref = actor.start.remote()
        return handle

    def launch(self) -> None:
        if self.handles:
            return
        self.owns_ray = connect(self.settings.ray_address, self.settings.num_envs, min(10.0, self.settings.timeout_wait))
        self.handles = [self._spawn(i, 1) for i in range(self.settings.num_envs)]

    # ------------------------------------------------------------------ replies

    def _get(self, handle: _Handle, ref: Any) -> WorkerReply:
        """The reply behind a ready reference; a dead actor or lost node is a FailedReply."""
        import ray
        from ray.exceptions import RayError, RayTaskError

        try:
            reply: WorkerReply = ray.get(ref, timeout=self.reply_timeout)
            return reply
        except RayTaskError as err:  # the actor's own code raised outside its handler (a bug, an unpicklable reply)
            text = str(err)
            return FailedReply(handle.worker_id, WorkerFailure(type(err).__name__, text.splitlines()[-1] if text else "", text, False))
        except RayError as err:
            first = (str(err).strip().splitlines() or [""])[0]
            message = f"Ray actor on node {handle.node} died ({type(err).__name__}: {first})"
            # Ray's whole account (exit type, the node's fate) goes where tracebacks go
            return worker_died(handle.worker_id, message, str(err))

    def _timed_out(self, handle: _Handle, what: str, timeout: float) -> WorkerError:
        self._kill(handle)
        return WorkerError(
            handle.worker_id,
            f"worker {handle.worker_id}: the Ray actor on node {handle.node} did not {what} within {timeout:g} s "
            f"(--timeout-wait {self.settings.timeout_wait} s; hung, or no node with a free CPU?); "
            "raise --timeout-wait if it is just slow",
            restartable=True,
        )

    def _kill(self, handle: _Handle) -> None:
        import ray

        handle.pending.clear()
        try:
            ray.kill(handle.actor, no_restart=True)
        except Exception as exc:  # noqa: BLE001 - already gone
            logger.debug("ray.kill of worker %d: %s", handle.worker_id, exc)

    def _reply_within(self, handle: _Handle, ref: Any, timeout: float) -> Optional[WorkerReply]:
        import ray

        ready, _ = ray.wait([ref], timeout=timeout)
        return self._get(handle, ref) if ready else None

    def _first_reply(self, handle: _Handle) -> Optional[WorkerReply]:
        return self._reply_within(handle, handle.start_ref, self.start_timeout)

    def _ask(self, handle: _Handle, command: WorkerCommand) -> Optional[WorkerReply]:
        return self._reply_within(handle, handle.actor.call.remote(command), self.reply_timeout)

    def _ask_many(self, asks: list[tuple[_Handle, WorkerCommand]]) -> list[Optional[WorkerReply]]:
        refs = [(handle, handle.actor.call.remote(command)) for handle, command in asks]  # all step at once
        return [self._reply_within(handle, ref, self.reply_timeout) for handle, ref in refs]

    def _started(self, handle: _Handle, reply: SpecsReply) -> None:
        handle.node = reply.node
        logger.debug("worker %d runs on Ray node %s", handle.worker_id, handle.node)

    def _other_node(self, avoid: str) -> Optional[str]:
        """A live node with CPUs other than the one ``avoid`` names (its log name), the one with
        the fewest of our workers: a worker restarted after its node was lost must not land on that
        node before Ray has noticed the loss. None if there is no other node."""
        import ray

        counts: dict[str, int] = {}
        for handle in self.handles:
            counts[handle.node] = counts.get(handle.node, 0) + 1
        choices = []
        for node in ray.nodes():
            node_id = str(node.get("NodeID", ""))
            if not node.get("Alive") or node.get("Resources", {}).get("CPU", 0) < 1 or f"({node_id[:8]})" in avoid:
                continue
            mine = sum(n for name, n in counts.items() if f"({node_id[:8]})" in name)
            choices.append((mine, node_id))
        return min(choices)[1] if choices else None

    def restart_worker(self, worker_id: int) -> None:
        old = self.handles[worker_id]
        self._kill(old)
        new = self._spawn(worker_id, old.life + 1, avoid=old.node if old.node.endswith(")") else "")
        self.handles[worker_id] = new
        self._await_specs(new)
        logger.info("worker[%d] restarted on Ray node %s (it ran on %s)", worker_id, new.node, old.node)

    # ------------------------------------------------------------------ stepping

    def _policy_ref(self, behavior: str) -> Any:
        """The object reference of the behavior's current policy: one ray.put per change."""
        import ray

        serial = self.policy_serials[behavior]
        known = self._policy_refs.get(behavior)
        if known is None or known[0] != serial:
            known = self._policy_refs[behavior] = (serial, ray.put(self.policies[behavior]))
            self.puts += 1
        return known[1]

    def _send_step(self, handle: _Handle) -> None:
        names = tuple(self.policy_updates(handle.policy_serials))
        refs = [self._policy_ref(b) for b in names]
        parameters = None
        if handle.parameters_serial != self.parameters_serial:
            parameters, handle.parameters_serial = self.parameters, self.parameters_serial
        ref = handle.actor.call.remote(StepCommand({}, parameters), names, *refs)
        handle.pending.append((ref, time.monotonic()))

    def step(self) -> list[StepBatch]:
        import ray

        for handle in self.handles:
            while len(handle.pending) < PIPELINE_DEPTH:
                self._send_step(handle)
        by_ref = {h.pending[0][0]: h for h in self.handles}
        deadline = self._next_step_deadline()
        ray.wait(list(by_ref), num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
        ready, _ = ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)
        batches: list[StepBatch] = []
        failed: list[WorkerError] = []
        heard: set[int] = set()
        for ref in ready:
            handle = by_ref[ref]
            heard.add(handle.worker_id)
            while handle.pending:
                head = handle.pending[0][0]
                if head is not ref and not ray.wait([head], timeout=0)[0]:
                    break
                handle.pending.popleft()
                handle.last_reply = time.monotonic()
                reply = self._get(handle, head)
                if not isinstance(reply, StepReply):
                    handle.pending.clear()
                    failed.append(self._failure(handle, reply))
                    break
                batches.append(reply.batch)
        self._fail_overdue(heard, failed)
        return batches

    # ------------------------------------------------------------------ resets

    def _reset_all(self, command: WorkerCommand, during: str) -> None:
        failed: dict[int, WorkerError] = {}
        timeout = self.reply_timeout
        last_steps = {h.worker_id: h.pending[-1][0] for h in self.handles if h.pending}
        step_deadlines = {h.worker_id: d for h in self.handles if (d := h.step_deadline(timeout)) is not None}
        # an actor answers in order: its last step call answered means every one before it was
        self._await_all(last_steps, step_deadlines, StepReply, failed, "answer a step", "")
        for handle in self.handles:
            handle.pending.clear()
            handle.last_reply = time.monotonic()
        resets = {h.worker_id: h.actor.call.remote(command) for h in self.handles if h.worker_id not in failed}
        now = time.monotonic()
        self._await_all(resets, dict.fromkeys(resets, now + timeout), ResetReply, failed, "answer a reset", during)
        for worker_id in sorted(failed):
            self.handle_failure(failed[worker_id])

    def _await_all(
        self, refs: dict[int, Any], deadlines: dict[int, float], expected: type, failed: dict[int, WorkerError],
        what: str, during: str,
    ) -> None:
        import ray

        pending = {wid: ref for wid, ref in refs.items() if wid not in failed}
        while pending:
            deadline = min(deadlines[wid] for wid in pending)
            ready, _ = ray.wait(list(pending.values()), num_returns=len(pending), timeout=max(0.0, deadline - time.monotonic()))
            ready_set = set(ready)
            for wid, ref in list(pending.items()):
                handle = self.handles[wid]
                if ref in ready_set:
                    del pending[wid]
                    reply = self._get(handle, ref)
                    if not isinstance(reply, expected):
                        failed[wid] = self._failure(handle, reply, during)
                elif time.monotonic() >= deadlines[wid]:
                    del pending[wid]
                    failed[wid] = self._timed_out(handle, what, self.reply_timeout)

    # ------------------------------------------------------------------ shutdown

    def close(self) -> None:
        """Ask every actor to close its environment (up to 10 s for all), then kill the actors; a
        Ray instance this manager started is shut down."""
        if not self.handles and not self.owns_ray:
            return  # nothing launched (Ray is not even imported then)
        import ray

        if not ray.is_initialized():
            self.handles = []
            return
        closing = [h.actor.close.remote() for h in self.handles]
        if closing:
            ray.wait(closing, num_returns=len(closing), timeout=SHUTDOWN_TIMEOUT_S)
        for handle in self.handles:
            self._kill(handle)
        self.handles = []
        if self.owns_ray:
            ray.shutdown()
            self.owns_ray = False

