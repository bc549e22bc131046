"""A process and everything it started, read from /proc: its pids, and the peak of their summed
memory while it runs (PSS: a page shared by several processes counted once, in shares; RSS: counted
in each). Linux only; elsewhere the figures are 0."""

from __future__ import annotations

import os
import threading


def children(pid: int) -> list[int]:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants, as they are now."""
    return [p for p, _depth in tree_depths(pid)]


def tree_depths(pid: int) -> list[tuple[int, int]]:
    """``pid`` and its descendants with their depth below it (0: ``pid`` itself)."""
    seen, todo = [], [(pid, 0)]
    while todo:
        p, depth = todo.pop()
        seen.append((p, depth))
        todo += [(c, depth + 1) for c in children(p)]
    return seen


def memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in kB from /proc/<pid>/smaps_rollup; (0, 0) for a process that is gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


class PeakMemory(threading.Thread):
    """Samples the tree of ``pid`` every ``interval_s`` until ``stop()``: ``peak_pss_mb``, ``peak_rss_mb``,
    and ``peak_parts``: each process's (depth below ``pid``, PSS in kB) when the tree's PSS peaked."""

    def __init__(self, pid: int, interval_s: float = 0.02):
        super().__init__(daemon=True)
        self.pid, self.interval_s = pid, interval_s
        self.peak_pss_kb = self.peak_rss_kb = 0
        self.peak_parts: list[tuple[int, int]] = []
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.interval_s):
            rss = pss = 0
            parts = []
            for p, depth in tree_depths(self.pid):
                r, s = memory_kb(p)
                rss, pss = rss + r, pss + s
                parts.append((depth, s))
            self.peak_rss_kb = max(self.peak_rss_kb, rss)
            if pss > self.peak_pss_kb:
                self.peak_pss_kb, self.peak_parts = pss, parts

    def stop(self) -> None:
        self._done.set()
        self.join()

    @property
    def peak_pss_mb(self) -> float:
        return self.peak_pss_kb / 1024

    @property
    def peak_rss_mb(self) -> float:
        return self.peak_rss_kb / 1024
