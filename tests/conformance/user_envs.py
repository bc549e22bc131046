"""Environments as users write them, each doing one thing a worker must allow: start a process of
its own, start a thread, run an asyncio event loop, print to stdout, take long to start. Each is
the built-in Reach with that one thing added; the factories take ``worker_id`` and ``seed``."""

from __future__ import annotations

import asyncio
import multiprocessing
import sys
import threading
import time
from typing import Any

from ml_arl.envs.games.builtin import Reach

SLOW_START_S = 10.0


def _helper_process(conn: Any) -> None:
    """A helper process (a simulator, a writer): answers pings until told to stop or its pipe closes."""
    try:
        while True:
            message = conn.recv()
            if message == "stop":
                return
            conn.send(message)
    except EOFError:
        return


class StartsProcess(Reach):
    """Starts a non-daemonic multiprocessing.Process (as palaestrAI's MIDAS store does) with the
    default start method, talks to it every reset, stops it at close."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self.conn, theirs = multiprocessing.Pipe()
        self.helper = multiprocessing.Process(target=_helper_process, args=(theirs,), name="user-helper")
        self.helper.start()
        theirs.close()

    def reset(self) -> None:
        self.conn.send("ping")
        assert self.conn.recv() == "ping"
        super().reset()

    def close(self) -> None:
        try:
            self.conn.send("stop")
        except OSError:
            pass
        self.helper.join(timeout=10)
        super().close()


class StartsThread(Reach):
    """Starts a (non-daemon) thread that works beside the steps, stops it at close."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self.stop = threading.Event()
        self.ticks = 0
        self.thread = threading.Thread(target=self._tick, name="user-ticker")
        self.thread.start()

    def _tick(self) -> None:
        while not self.stop.wait(0.01):
            self.ticks += 1

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        super().close()


class RunsAsyncio(Reach):
    """Keeps an asyncio event loop of its own and runs a coroutine on it every step (as mosaik
    worlds do), with a background task that lives from start to close."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self.loop = asyncio.new_event_loop()
        self.background = self.loop.create_task(self._forever())

    async def _forever(self) -> None:
        while True:
            await asyncio.sleep(3600)

    async def _one_turn(self) -> None:
        await asyncio.sleep(0)

    def step(self) -> None:
        self.loop.run_until_complete(self._one_turn())
        super().step()

    def close(self) -> None:
        self.background.cancel()
        self.loop.run_until_complete(asyncio.gather(self.background, return_exceptions=True))
        self.loop.close()
        super().close()


class PrintsToStdout(Reach):
    """Prints a line at every reset and every 50th step (as many research environments do)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self.steps = 0
        print(f"PrintsToStdout: started with seed {seed}", flush=True)

    def reset(self) -> None:
        print("PrintsToStdout: reset", flush=True)
        super().reset()

    def step(self) -> None:
        self.steps += 1
        if self.steps % 50 == 0:
            sys.stdout.write(f"PrintsToStdout: step {self.steps}\n")
        super().step()


class SlowStart(Reach):
    """Takes SLOW_START_S to start (a simulator loading its model)."""

    def __init__(self, seed: int = 0) -> None:
        time.sleep(SLOW_START_S)
        super().__init__(seed=seed)


def starts_process(seed: int = 0) -> Reach:
    return StartsProcess(seed)


def starts_thread(seed: int = 0) -> Reach:
    return StartsThread(seed)


def runs_asyncio(seed: int = 0) -> Reach:
    return RunsAsyncio(seed)


def prints_to_stdout(seed: int = 0) -> Reach:
    return PrintsToStdout(seed)


def slow_start(seed: int = 0) -> Reach:
    return SlowStart(seed)
