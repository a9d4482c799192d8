"""The Redis connection the replicas coordinate through, and its faults as ``ClusterUnavailable``.

Every call has a deadline (``socket_timeout``): a Redis that stops answering fails the call,
it never hangs a request. A call that fails because Redis cannot be reached (refused, reset,
timed out, loading, read-only replica) raises ``ClusterUnavailable`` (503, ``Retry-After``);
any other Redis error is a bug and is raised as it is.

Such failures are logged once per outage, not once per call (``app.outages.REDIS``): the first
one as "redis unreachable: <why>", then, at the first call that succeeds, "redis reachable
again after N s".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

from redis import exceptions
from redis.asyncio import Redis

from app.errors import ClusterUnavailable
from app.outages import REDIS

log = logging.getLogger(__name__)

REDIS_TIMEOUT_S = 5.0
"""The longest one Redis call (or connect) may take before it fails as unavailable."""
CLUSTER_RETRY_AFTER_S = 5.0
"""``Retry-After`` of a request refused because Redis cannot be reached."""
PING_TIMEOUT_S = 2.0
"""How long ``ping`` waits for Redis's answer (a readiness check, a follower looking whether
Redis is back)."""

_UNREACHABLE = (
    exceptions.ConnectionError,  # refused, reset, closed (includes BusyLoadingError)
    exceptions.TimeoutError,
    exceptions.ReadOnlyError,  # a replica that was promoted away from, or a read-only one
    OSError,
)
_BUSY = exceptions.LockError
"""A lock still held by another replica after its wait: Redis answered, this call failed."""


def connect(
    url: str, *, timeout_s: float = REDIS_TIMEOUT_S, blocking: bool = False, name: str | None = None
) -> Redis:
    """A client for ``url`` (``redis://host:port/db``); connects on first use.

    ``blocking``: for calls that wait on the server longer than ``timeout_s`` (``BLPOP`` for
    a forwarded command's answer): no read deadline of its own, so the caller bounds each
    call (``asyncio.timeout``); connecting still has ``timeout_s``. ``name``: the connections'
    name in Redis (``CLIENT LIST``), ``agw:<replica>:<role>``."""
    return Redis.from_url(
        url,
        socket_timeout=None if blocking else timeout_s,
        socket_connect_timeout=timeout_s,
        health_check_interval=30,
        decode_responses=False,
        client_name=name,
    )


@contextlib.contextmanager
def cluster_errors(*, answers: bool = True) -> Iterator[None]:
    """Turn a Redis that cannot be reached into ``ClusterUnavailable`` (503, Retry-After),
    reporting each call's outcome to ``app.outages.REDIS``.

    ``answers=False``: the block succeeding does not show that Redis answered (a command only
    sent, a wait on a subscription that stayed quiet), so it ends no outage."""
    try:
        yield
    except _BUSY as exc:
        log.warning("redis lock busy: %s", exc)
        raise _unavailable() from exc
    except _UNREACHABLE as exc:
        REDIS.failed(unreachable_reason(exc))
        raise _unavailable() from exc
    if answers:
        REDIS.answered()


def _unavailable() -> ClusterUnavailable:
    return ClusterUnavailable(
        "the replicas cannot reach Redis, which they coordinate through; retry shortly",
        retry_after_s=CLUSTER_RETRY_AFTER_S,
    )


def unreachable_reason(exc: BaseException) -> str:
    """Why a call found Redis unreachable, in a few words (its error, or its type)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def ping(client: Redis, *, timeout_s: float = PING_TIMEOUT_S) -> None:
    """Return once Redis answers a PING within ``timeout_s``; raise ``ClusterUnavailable``
    (caused by what failed) otherwise."""
    with cluster_errors():
        try:
            async with asyncio.timeout(timeout_s):
                await client.ping()
        except TimeoutError as exc:  # the deadline here (the client was still retrying)
            why = f"no answer to PING within {timeout_s:g} s"
            if REDIS.reason is not None:
                why += f" (last error: {REDIS.reason})"
            raise exceptions.TimeoutError(why) from exc
