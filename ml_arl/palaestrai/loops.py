"""The private asyncio loop palaestrAI environments' coroutines run on, in a worker or (to read
what an environment offers) in the main process: run a value, awaited when it is awaitable; drain
the tasks an environment left pending; close the loop. No torch."""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Optional

logger = logging.getLogger(__name__)


def run_awaited(loop_holder: list[Optional[asyncio.AbstractEventLoop]], value: Any) -> Any:
    """``value``, or its result when it is awaitable (on the loop in ``loop_holder``, made on first use)."""
    if inspect.isawaitable(value):
        loop = loop_holder[0]
        if loop is None:
            loop = loop_holder[0] = asyncio.new_event_loop()
        return loop.run_until_complete(value)
    return value


DRAIN_TIMEOUT_S = 10.0  # how long the tasks an environment left behind have to end once cancelled


def drain(loop_holder: list[Optional[asyncio.AbstractEventLoop]]) -> None:
    """Cancel the tasks an environment left pending on the private loop (a mosaik world's, after
    its ``shutdown()``) and let them end, so that none is destroyed pending (asyncio's "Task was
    destroyed but it is pending!"). A task that ignores its cancellation is given up after
    DRAIN_TIMEOUT_S, with a warning naming it."""
    loop = loop_holder[0]
    if loop is None or loop.is_closed():
        return
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    _, pending = loop.run_until_complete(asyncio.wait(tasks, timeout=DRAIN_TIMEOUT_S))
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: an error it ended with is not logged as "never retrieved"
    if pending:
        logger.warning("%d asyncio task(s) left by the environment did not end within %g s of their cancellation: %s",
                       len(pending), DRAIN_TIMEOUT_S, ", ".join(sorted(t.get_name() for t in pending)))


def close_loop(loop_holder: list[Optional[asyncio.AbstractEventLoop]]) -> None:
    """Drain the private loop, end its async generators and close it."""
    loop = loop_holder[0]
    if loop is None:
        return
    try:
        if not loop.is_closed():
            drain(loop_holder)
            loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()
        loop_holder[0] = None


