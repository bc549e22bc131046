"""A small hierarchical timer for run_logs/timers.json (ML-Agents' layout: name, total, count,
self, children, gauges, metadata). Each thread times into its own tree; trainer threads' trees
are merged under "trainer_threads" at the end of a run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class TimerNode:
    __slots__ = ("total", "count", "children")

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0
        self.children: dict[str, TimerNode] = {}

    def child(self, name: str) -> TimerNode:
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = TimerNode()
        return node

    def merge(self, other: TimerNode) -> None:
        self.total += other.total
        self.count += other.count
        for name, node in other.children.items():
            self.child(name).merge(node)

    def as_dict(self, name: str) -> dict[str, Any]:
        children_total = sum(c.total for c in self.children.values())
        out: dict[str, Any] = {
            "name": name,
            "total": self.total,
            "count": self.count,
            "self": max(0.0, self.total - children_total),
        }
        if self.children:
            out["children"] = {k: v.as_dict(k) for k, v in self.children.items()}
        return out


class Timers:
    def __init__(self) -> None:
        self.start = time.time()
        self._local = threading.local()
        self._roots: list[tuple[str, TimerNode]] = []
        self._lock = threading.Lock()
        self.gauges: dict[str, dict[str, float]] = {}

    def _stack(self) -> list[TimerNode]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            root = TimerNode()
            stack = self._local.stack = [root]
            with self._lock:
                self._roots.append((threading.current_thread().name, root))
        return stack

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        stack = self._stack()
        node = stack[-1].child(name)
        stack.append(node)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            node.total += time.perf_counter() - t0
            node.count += 1
            stack.pop()

    def set_gauge(self, name: str, value: float) -> None:
        with self._lock:
            g = self.gauges.get(name)
            if g is None:
                self.gauges[name] = {"value": value, "min": value, "max": value, "count": 1}
            else:
                g["value"] = value
                g["min"] = min(g["min"], value)
                g["max"] = max(g["max"], value)
                g["count"] += 1

    def as_dict(self, metadata: dict[str, Any]) -> dict[str, Any]:
        main = threading.main_thread().name
        root = TimerNode()
        threads = TimerNode()
        with self._lock:
            for thread_name, node in self._roots:
                if thread_name == main:
                    root.merge(node)
                else:
                    threads.merge(node)
        if threads.children:
            threads.total = sum(c.total for c in threads.children.values())
            threads.count = 1
            root.children["trainer_threads"] = threads
        root.total = time.time() - self.start
        root.count = 1
        out = root.as_dict("root")
        out["gauges"] = dict(self.gauges)
        out["metadata"] = metadata
        return out
