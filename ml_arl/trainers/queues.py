"""The queues between the env side and a trainer: trajectories in, policy snapshots out.

The run loop (ml_arl.training.router) puts each behavior's trajectories on its trainer's
trajectory queue; the trainer publishes its ``PolicySnapshot``s on its policy queue.
"""

from __future__ import annotations

import queue
from typing import Generic, Optional, TypeVar

T = TypeVar("T")


class AgentManagerQueue(Generic[T]):
    """A thread-safe FIFO between the env side and a trainer. ``maxlen`` 0 = unbounded.

    ``put`` blocks while the queue is full, up to ``timeout`` seconds (then raises queue.Full),
    which gives a threaded trainer back-pressure instead of dropping data.
    """

    def __init__(self, behavior: str, maxlen: int = 0):
        self.behavior = behavior
        self._queue: queue.Queue[T] = queue.Queue(maxsize=maxlen)

    def put(self, item: T, timeout: Optional[float] = None) -> None:
        self._queue.put(item, timeout=timeout)

    def get(self, timeout: float) -> T:
        return self._queue.get(timeout=timeout)

    def qsize(self) -> int:
        return self._queue.qsize()

    def empty(self) -> bool:
        return self._queue.empty()

    def drain(self, limit: Optional[int] = None) -> list[T]:
        items: list[T] = []
        n = self._queue.qsize() if limit is None else limit
        for _ in range(n):
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return items
