"""Token buckets per key (an API key's name, a client address), and the session-creation quota.

A bucket holds up to ``capacity`` tokens and regains ``capacity`` per ``period_s``; taking
from an empty bucket is refused with the seconds until a token is back, which the API sends
as ``Retry-After``. The clock is injected, so tests take no time. With several replicas the
buckets live in Redis (``app.cluster.buckets.SharedBuckets``) and the open-session cap is
checked under a Redis lock, so N replicas enforce the configured numbers once, not N times.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from redis.asyncio import Redis

from app.cluster.redis import cluster_errors
from app.errors import TooManyRequests
from app.settings import LimitsSettings

Monotonic = Callable[[], float]

MAX_IDLE_KEYS = 10_000
"""Past this many keys, full buckets (keys that have been quiet) are forgotten."""


@dataclass
class _Bucket:
    tokens: float
    at: float


class KeyedBuckets:
    """One token bucket per key; ``take`` answers None (allowed) or the seconds to wait."""

    def __init__(
        self, *, capacity: int, period_s: float, monotonic: Monotonic = time.monotonic
    ) -> None:
        self.capacity = capacity
        self.rate = capacity / period_s
        self.monotonic = monotonic
        self._buckets: dict[str, _Bucket] = {}

    def _refilled(self, key: str) -> _Bucket:
        now = self.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_IDLE_KEYS:
                self._forget_full(now)
            bucket = self._buckets[key] = _Bucket(tokens=float(self.capacity), at=now)
        else:
            bucket.tokens = min(self.capacity, bucket.tokens + (now - bucket.at) * self.rate)
            bucket.at = now
        return bucket

    def wait_s(self, key: str) -> float | None:
        """Seconds until ``key`` may take a token, or None when it may now (nothing taken)."""
        bucket = self._refilled(key)
        return None if bucket.tokens >= 1 else (1 - bucket.tokens) / self.rate

    async def acquire(self, key: str) -> float | None:
        """``take``, as every kind of bucket offers it (``Buckets``)."""
        return self.take(key)

    def take(self, key: str) -> float | None:
        """Take one token: None when allowed, else the seconds until one is back."""
        bucket = self._refilled(key)
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return None
        return (1 - bucket.tokens) / self.rate

    def _forget_full(self, now: float) -> None:
        for key, bucket in list(self._buckets.items()):
            if bucket.tokens + (now - bucket.at) * self.rate >= self.capacity:
                del self._buckets[key]


class Buckets(Protocol):
    """Token buckets per key, in this process (``KeyedBuckets``) or shared (``SharedBuckets``)."""

    capacity: int

    async def acquire(self, key: str) -> float | None: ...


KeyLock = Callable[[str], AbstractAsyncContextManager[object]]
"""Holds a key's creation slot while one session is created (``SessionQuota``)."""


def redis_lock(redis: Redis) -> KeyLock:
    """A creation slot every replica respects: a Redis lock per key (expires after 30 s)."""

    def lock(key: str) -> AbstractAsyncContextManager[object]:
        held: AbstractAsyncContextManager[object] = redis.lock(
            f"agw:lock:creates:{key}", timeout=30, blocking_timeout=30
        )
        return held

    return lock


@contextlib.asynccontextmanager
async def _holding(lock: AbstractAsyncContextManager[object]) -> AsyncIterator[None]:
    """Hold ``lock``; a Redis lock that cannot be taken is ``ClusterUnavailable`` (only the
    taking: what runs under the lock raises as it is)."""
    with cluster_errors():
        await lock.__aenter__()
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # a Redis lock that cannot be freed expires
            await lock.__aexit__(None, None, None)


OPEN_CAP_RETRY_S = 60.0
"""``Retry-After`` hint for a key at its open-session cap (a slot frees when one is closed)."""


class SessionQuota:
    """Per key: at most ``session_creates_per_minute`` creations and ``max_open_sessions_per_key``
    sessions that are not closed or failed."""

    def __init__(
        self,
        limits: LimitsSettings,
        *,
        monotonic: Monotonic = time.monotonic,
        creates: Buckets | None = None,
        lock: KeyLock | None = None,
    ) -> None:
        self.max_open = limits.max_open_sessions_per_key
        self.creates: Buckets = creates or KeyedBuckets(
            capacity=limits.session_creates_per_minute, period_s=60.0, monotonic=monotonic
        )
        self._locks: dict[str, asyncio.Lock] = {}
        self._lock = lock

    @contextlib.asynccontextmanager
    async def admit(
        self, key: str, count_open: Callable[[], Awaitable[int]]
    ) -> AsyncIterator[None]:
        """Hold the key's creation slot while the session is created, or raise 429.

        Creations by one key are serialised so two concurrent requests cannot both take the
        last open-session slot.
        """
        lock = self._lock(key) if self._lock else self._locks.setdefault(key, asyncio.Lock())
        async with _holding(lock):
            open_now = await count_open()
            if open_now >= self.max_open:
                raise TooManyRequests(
                    f"this key already has {open_now} open sessions (limits.max_open_sessions_"
                    f"per_key = {self.max_open}); close one with DELETE /v1/sessions/{{id}}",
                    retry_after_s=OPEN_CAP_RETRY_S,
                    limit="max_open_sessions_per_key",
                )
            wait = await self.creates.acquire(key)
            if wait is not None:
                raise TooManyRequests(
                    "too many sessions created by this key in the last minute "
                    f"(limits.session_creates_per_minute = {self.creates.capacity}); "
                    "retry after the time in Retry-After",
                    retry_after_s=wait,
                    limit="session_creates_per_minute",
                )
            yield
