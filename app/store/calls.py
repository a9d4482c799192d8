"""Store calls that a cancelled caller waits for rather than abandons half-way."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


async def run_to_completion(step: Coroutine[Any, Any, T]) -> T:
    """Run ``step`` to its end even if the caller is cancelled meanwhile; the cancellation is
    raised once it has finished."""
    task = asyncio.ensure_future(step)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            if task.done():
                raise
            cancelled = exc
        else:
            break
    if cancelled is not None:
        raise cancelled
    return result


def uninterrupted(
    method: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """A store call that a cancelled caller waits for rather than abandons half-way.

    SQLAlchemy and aiosqlite do not survive a cancellation that lands inside a statement or
    a commit: the connection can go back to the pool still inside its transaction, holding
    SQLite's write lock, and every other writer then waits out the busy timeout (seen when
    sessions were deleted while their turns were writing). So each call runs whole in a
    task of its own; the caller's cancellation is raised when it is done.
    """

    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> T:
        return await run_to_completion(method(*args, **kwargs))

    return call
