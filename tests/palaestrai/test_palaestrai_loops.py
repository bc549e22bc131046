"""The private event loop of palaestrAI environments: tasks an environment leaves pending at its
shutdown (as a mosaik world does) are cancelled and end before the loop closes, so asyncio logs
no "Task was destroyed but it is pending!"; a task that will not end is named in one warning."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Optional

import pytest

from ml_arl.palaestrai import loops


async def _forever() -> None:
    await asyncio.Event().wait()


async def _stubborn() -> None:
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            continue  # refuses to end


async def _start(names: list[str], stubborn: bool = False) -> None:
    for name in names:
        asyncio.get_running_loop().create_task(_stubborn() if stubborn else _forever(), name=name)


def test_tasks_left_pending_are_drained_before_the_loop_closes(caplog: pytest.LogCaptureFixture) -> None:
    holder: list[Optional[asyncio.AbstractEventLoop]] = [None]
    loops.run_awaited(holder, _start(["world", "queue-get"]))
    loop = holder[0]
    assert loop is not None and len(asyncio.all_tasks(loop)) == 2
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        loops.close_loop(holder)
        gc.collect()
    assert holder[0] is None and loop.is_closed()
    assert "Task was destroyed" not in caplog.text


def test_without_the_drain_asyncio_would_complain(caplog: pytest.LogCaptureFixture) -> None:
    """What the drain prevents (the check above would pass vacuously if asyncio never said it)."""
    holder: list[Optional[asyncio.AbstractEventLoop]] = [None]
    loops.run_awaited(holder, _start(["world"]))
    loop = holder[0]
    assert loop is not None
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        loop.close()
        holder[0] = None
        del loop
        gc.collect()
    assert "Task was destroyed but it is pending" in caplog.text


def test_a_task_that_ignores_its_cancellation_is_given_up_with_a_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loops, "DRAIN_TIMEOUT_S", 0.2)
    holder: list[Optional[asyncio.AbstractEventLoop]] = [None]
    loops.run_awaited(holder, _start(["stubborn-sim"], stubborn=True))
    with caplog.at_level(logging.WARNING):
        loops.drain(holder)
    assert "1 asyncio task(s) left by the environment did not end within 0.2 s" in caplog.text
    assert "stubborn-sim" in caplog.text
    loop = holder[0]
    assert loop is not None
    loop.close()  # the task that would not end is destroyed here, not in a later test
    holder[0] = None
    del loop
    gc.collect()
