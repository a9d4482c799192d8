"""Background loops that never end silently: each takes what a source yields and acts on it.

    source() ──item──► act(item)     act raises:    logged, the next item taken
       │                             source raises: logged, opened again after ``restart_s``
       └ ends: the loop ends (nothing more will come)
    spawn(work): a task beside the loops (an item served while the next is taken); its
    failure is logged
    aclose(): every loop and task cancelled and awaited; nothing starts after it

The owner of the loops starts and stops them; what they consume reports by yielding values,
never by calling up into the owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

RESTART_S = 1.0
"""The pause before a source that failed is opened again (no busy loop on a lasting fault)."""


class Supervisor:
    """Loops and tasks owned by one object, each failure logged to its ``log``."""

    def __init__(self, log: logging.Logger, *, restart_s: float = RESTART_S) -> None:
        self._log = log
        self._restart_s = restart_s
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False

    def consume(
        self,
        name: str,
        source: Callable[[], AsyncGenerator[T, None]],
        act: Callable[[T], Awaitable[None]],
    ) -> None:
        """Run ``act`` on each item ``source()`` yields, one after the other, until the source
        ends or ``aclose``."""
        self._start(name, self._consume(name, source, act))

    def spawn(self, name: str, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` until it is done or ``aclose``; its failure is logged."""
        self._start(name, work)

    @property
    def running(self) -> int:
        """How many loops and tasks run now."""
        return len(self._tasks)

    async def aclose(self) -> None:
        """Cancel every loop and task and wait for them; idempotent."""
        self._stopping = True
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.difference_update(tasks)

    def _start(self, name: str, work: Coroutine[Any, Any, None]) -> None:
        if self._stopping:
            work.close()
            return
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled() or self._stopping:
            return
        error = task.exception()
        if error is not None:
            self._log.error("%s failed", task.get_name(), exc_info=error)

    async def _consume(
        self,
        name: str,
        source: Callable[[], AsyncGenerator[T, None]],
        act: Callable[[T], Awaitable[None]],
    ) -> None:
        while not self._stopping:
            try:
                async with contextlib.aclosing(source()) as opened:
                    async for item in opened:
                        try:
                            await act(item)
                        except Exception:
                            if self._stopping:
                                return
                            self._log.exception("%s: one item failed; going on", name)
                return  # the source ended: nothing more will come
            except Exception:
                if self._stopping:  # a cancelled call can surface as another error
                    return
                self._log.exception("%s failed; starting it again", name)
            await asyncio.sleep(self._restart_s)
