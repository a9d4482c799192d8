"""Reading asyncio queues on hot paths."""

from __future__ import annotations

import asyncio
from typing import TypeVar

T = TypeVar("T")


async def next_item(queue: asyncio.Queue[T], wait_s: float | None) -> T:
    """The queue's next item, waiting at most ``wait_s`` (None: forever) for one; raises
    ``TimeoutError``. ``asyncio.wait_for`` costs a task per call, so it is used only when
    the queue is empty: a reader that keeps up with a streaming CLI rarely finds it so."""
    if not queue.empty():
        return queue.get_nowait()
    return await asyncio.wait_for(queue.get(), wait_s)
