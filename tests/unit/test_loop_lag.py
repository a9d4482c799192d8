"""The event-loop lag probe records how long a callback held the loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from app.observability.looplag import watch_loop_lag

pytestmark = pytest.mark.uvloop


class Samples:
    def __init__(self) -> None:
        self.values: list[float] = []
        self.changed = asyncio.Event()

    def record(self, lag_s: float) -> None:
        self.values.append(lag_s)
        self.changed.set()

    async def until(self, count: int) -> None:
        while len(self.values) < count:
            self.changed.clear()
            await self.changed.wait()


async def test_a_callback_that_holds_the_loop_shows_up_as_lag() -> None:
    samples = Samples()
    watcher = asyncio.create_task(watch_loop_lag(samples.record, interval_s=0.005))
    try:
        async with asyncio.timeout(10):
            await samples.until(3)
            before = len(samples.values)
            time.sleep(0.06)  # noqa: ASYNC251 - a callback that holds the loop for 60 ms
            await samples.until(before + 1)
    finally:
        watcher.cancel()
    # The sample taken across the stall is at least 50 ms late (60 ms held, one 5 ms tick
    # of it could have been waited anyway).
    assert samples.values[before] >= 0.05
    assert all(value >= 0 for value in samples.values)
