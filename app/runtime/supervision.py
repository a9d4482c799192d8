"""Background loops that never end silently: each takes what a source yields and acts on it.

    source() ──item──► act(item)     act raises:    logged, the next item taken
       │                             source raises: logged, opened again after ``restart_s``
       └ ends: the loop ends (nothing more will come)
    spawn(work): a task beside the loops (an item served while the next is taken); its
    failure is logged
    every failure is also counted by the loop's name (``counted``: a metric)
    aclose(): every loop and task cancelled and awaited; nothing starts after it

A fault that lasts (Redis or the database away) makes a loop fail again and again; it is
logged once per outage, not once per try (``Failures``): the first failure with its traceback
(an ``Unavailable`` one, which ``app.outages`` already explains, as one line), repeats of the
same error type at DEBUG, another type as a first failure, and one line when it works again.

The owner of the loops starts and stops them; what they consume reports by yielding values,
never by calling up into the owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from app.errors import Unavailable

T = TypeVar("T")

RESTART_S = 1.0
"""The pause before a source that failed is opened again (no busy loop on a lasting fault)."""


class Failures:
    """How one loop's failures of one kind (its source, or its items) are logged."""

    def __init__(self, log: logging.Logger, what: str) -> None:
        self._log = log
        self._what = what
        self._kind: type[BaseException] | None = None
        self._repeats = 0

    @property
    def failing(self) -> bool:
        return self._kind is not None

    def failed(self, error: BaseException, doing: str) -> None:
        """Log ``error`` (``doing``: what the loop does next) unless the same type of error
        was the last one, which is logged at DEBUG."""
        if type(error) is self._kind:
            self._repeats += 1
            self._log.debug("%s failed again (%s); %s", self._what, error, doing)
            return
        self._kind, self._repeats = type(error), 0
        if isinstance(error, Unavailable):
            self._log.warning("%s failed: %s; %s", self._what, error, doing)
        else:
            self._log.error("%s failed; %s", self._what, doing, exc_info=error)

    def worked(self) -> None:
        """It worked: say so once if it was failing."""
        if self._kind is None:
            return
        self._log.info(
            "%s works again (after %d more failures of %s)",
            self._what,
            self._repeats,
            self._kind.__name__,
        )
        self._kind, self._repeats = None, 0


class Supervisor:
    """Loops and tasks owned by one object, each failure logged to its ``log``."""

    def __init__(
        self,
        log: logging.Logger,
        *,
        restart_s: float = RESTART_S,
        counted: Callable[[str], None] | None = None,
    ) -> None:
        self._log = log
        self._restart_s = restart_s
        self._counted = counted
        """Counts each failure by the loop's or task's name (a metric)."""
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
            self._count(task.get_name())
            self._log.error("%s failed", task.get_name(), exc_info=error)

    def _count(self, name: str) -> None:
        if self._counted is not None:
            self._counted(name)

    async def _consume(
        self,
        name: str,
        source: Callable[[], AsyncGenerator[T, None]],
        act: Callable[[T], Awaitable[None]],
    ) -> None:
        opening = Failures(self._log, name)
        acting = Failures(self._log, f"{name}: an item")
        while not self._stopping:
            try:
                async with contextlib.aclosing(source()) as opened:
                    async for item in opened:
                        opening.worked()
                        try:
                            await act(item)
                        except Exception as error:
                            if self._stopping:
                                return
                            self._count(name)
                            acting.failed(error, "going on")
                        else:
                            acting.worked()
                return  # the source ended: nothing more will come
            except Exception as error:
                if self._stopping:  # a cancelled call can surface as another error
                    return
                self._count(name)
                opening.failed(error, "starting it again")
            await asyncio.sleep(self._restart_s)
