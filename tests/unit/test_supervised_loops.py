"""A supervised loop never ends silently: an item that fails is logged and the next one taken,
a source that fails is logged and opened again, a task beside the loops is logged when it
fails, and closing stops them all."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator

import pytest

from app.errors import StorageUnavailable
from app.runtime.supervision import Supervisor

log = logging.getLogger("tests.supervised")


class Logged(logging.Handler):
    """Sets ``error`` when an error is logged."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.error = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.error.set()


async def numbers(upto: int) -> AsyncGenerator[int, None]:
    for number in range(upto):
        yield number


async def test_an_item_that_fails_is_logged_and_the_next_one_taken(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counted: list[str] = []
    loops = Supervisor(log, counted=counted.append)
    seen: list[int] = []
    done = asyncio.Event()

    async def act(number: int) -> None:
        if number == 1:
            raise RuntimeError("one item went wrong")
        seen.append(number)
        if number == 3:
            done.set()

    loops.consume("numbers", lambda: numbers(4), act)
    await asyncio.wait_for(done.wait(), timeout=5)
    await loops.aclose()
    assert seen == [0, 2, 3]
    assert counted == ["numbers"]  # every failure counted (a metric), by loop
    failed = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(failed) == 1
    assert "numbers" in failed[0].getMessage()
    assert failed[0].exc_info is not None


async def test_a_source_that_fails_is_logged_and_opened_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counted: list[str] = []
    loops = Supervisor(log, restart_s=0.01, counted=counted.append)
    opened = 0
    again = asyncio.Event()

    async def flaky() -> AsyncGenerator[int, None]:
        nonlocal opened
        opened += 1
        if opened == 2:
            again.set()
        yield opened
        raise ConnectionError("the source broke")

    async def act(_: int) -> None:
        return None

    loops.consume("flaky", flaky, act)
    await asyncio.wait_for(again.wait(), timeout=5)
    await loops.aclose()
    assert opened >= 2
    assert counted[:1] == ["flaky"]
    assert any("flaky failed" in r.getMessage() for r in caplog.records)


async def test_a_task_beside_the_loops_that_fails_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counted: list[str] = []
    loops = Supervisor(log, counted=counted.append)
    logged = Logged()
    log.addHandler(logged)

    async def broken() -> None:
        raise RuntimeError("served badly")

    try:
        loops.spawn("command", broken())
        await asyncio.wait_for(logged.error.wait(), timeout=5)
    finally:
        log.removeHandler(logged)
    await loops.aclose()
    failed = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in failed] == ["command failed"]
    assert counted == ["command"]
    assert failed[0].exc_info is not None


async def test_closing_stops_every_loop_and_nothing_starts_after_it() -> None:
    loops = Supervisor(log)
    forever = asyncio.Event()

    async def endless() -> AsyncGenerator[int, None]:
        while True:
            await forever.wait()
            yield 0

    async def act(_: int) -> None:
        return None

    async def waiting() -> None:
        await forever.wait()

    loops.consume("endless", endless, act)
    loops.spawn("waiting", waiting())
    assert loops.running == 2
    await asyncio.wait_for(loops.aclose(), timeout=5)
    assert loops.running == 0
    loops.spawn("late", waiting())  # closed, never run
    assert loops.running == 0
    await loops.aclose()  # idempotent


async def test_a_lasting_fault_is_logged_once_then_briefly_and_its_end_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=log.name)
    loops = Supervisor(log, restart_s=0.001)
    opened = 0
    healed = asyncio.Event()

    async def outage() -> AsyncGenerator[int, None]:
        nonlocal opened
        opened += 1
        if opened <= 5:
            raise ConnectionError(f"refused ({opened})")
        yield opened
        healed.set()
        await asyncio.Event().wait()

    async def act(_: int) -> None:
        return None

    loops.consume("outage", outage, act)
    await asyncio.wait_for(healed.wait(), timeout=5)
    await loops.aclose()
    mine = [r for r in caplog.records if r.name == log.name]
    loud = [r for r in mine if r.levelno >= logging.WARNING]
    assert len(loud) == 1  # the first failure, with its traceback
    assert loud[0].exc_info is not None
    assert "refused (1)" in str(loud[0].exc_info[1])
    assert [r.levelno for r in mine].count(logging.DEBUG) == 4  # the repeats, briefly
    assert all(r.exc_info is None for r in mine if r.levelno == logging.DEBUG)
    [works] = [r for r in mine if r.levelno == logging.INFO]
    assert works.getMessage() == "outage works again (after 4 more failures of ConnectionError)"


async def test_an_unavailable_dependency_is_one_line_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    loops = Supervisor(log)
    done = asyncio.Event()

    async def act(number: int) -> None:
        if number < 3:
            raise StorageUnavailable("the database cannot be reached")
        if number == 4:  # after the first that worked
            done.set()

    loops.consume("adoption", lambda: numbers(5), act)
    await asyncio.wait_for(done.wait(), timeout=5)
    await loops.aclose()
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in loud] == [
        "adoption: an item failed: the database cannot be reached; going on"
    ]
    assert loud[0].exc_info is None
    assert any("works again" in r.getMessage() for r in caplog.records)
