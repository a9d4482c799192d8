"""The Redis connection the replicas coordinate through, and its faults as ``ClusterUnavailable``.

Every call has a deadline (``socket_timeout``): a Redis that stops answering fails the call,
it never hangs a request. A call that fails because Redis cannot be reached (refused, reset,
timed out, loading, read-only replica) raises ``ClusterUnavailable`` (503, ``Retry-After``);
any other Redis error is a bug and is raised as it is.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from redis import exceptions
from redis.asyncio import Redis

from app.errors import ClusterUnavailable

log = logging.getLogger(__name__)

REDIS_TIMEOUT_S = 5.0
"""The longest one Redis call (or connect) may take before it fails as unavailable."""
CLUSTER_RETRY_AFTER_S = 5.0
"""``Retry-After`` of a request refused because Redis cannot be reached."""

_UNREACHABLE = (
    exceptions.ConnectionError,  # refused, reset, closed (includes BusyLoadingError)
    exceptions.TimeoutError,
    exceptions.ReadOnlyError,  # a replica that was promoted away from, or a read-only one
    exceptions.LockError,  # a lock still held by another replica after its wait
    OSError,
)


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
def cluster_errors() -> Iterator[None]:
    """Turn a Redis that cannot be reached into ``ClusterUnavailable`` (503, Retry-After)."""
    try:
        yield
    except _UNREACHABLE as exc:
        log.warning("redis unavailable: %s", exc)
        raise ClusterUnavailable(
            "the replicas cannot reach Redis, which they coordinate through; retry shortly",
            retry_after_s=CLUSTER_RETRY_AFTER_S,
        ) from exc
