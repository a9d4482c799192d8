"""Live events across replicas: the owner publishes each stored batch, every replica tails it.

    agw:events:<session>   a Redis pub/sub channel; one message per stored batch, its events'
                           wire forms (``Event`` JSON, which holds no raw newline) one per line

Pub/sub delivers to whoever listens, at most once: a message published while a replica was
not subscribed, or dropped with a connection, is simply not seen. So a tail is never the only
source. A reader on another replica subscribes first, then reads the store from its cursor,
then follows the tail, dropping what it already has and reading any gap from the store
(``app.runtime.remote``): the store is the truth, the tail only says "there is more, and here
it is".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from app.cluster.redis import cluster_errors
from app.outages import REDIS


@dataclass(frozen=True, slots=True)
class Published:
    """One event as it crossed Redis: its seq and its wire form."""

    seq: int
    json: str


def encode(events: Sequence[tuple[int, str]]) -> bytes:
    """A batch of ``(seq, wire JSON)`` as one message."""
    return "\n".join(json for _, json in events).encode()


def decode(message: bytes) -> list[Published]:
    """The events of one message, their seqs read from the envelope's leading ``{"seq":N``."""
    found = []
    for line in message.decode().split("\n"):
        head = line[:32]
        if not head.startswith('{"seq":'):
            continue
        digits = head[7:].split(",", 1)[0]
        if digits.isdigit():
            found.append(Published(seq=int(digits), json=line))
    return found


class Fanout:
    """Publishes a replica's stored events and opens tails of other replicas' sessions."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def publish(self, session_id: str, events: Sequence[tuple[int, str]]) -> int:
        """Send a stored batch to every replica tailing the session; how many received it."""
        if not events:
            return 0
        with cluster_errors():
            return int(await self._redis.publish(channel(session_id), encode(events)))

    @contextlib.asynccontextmanager
    async def tail(self, session_id: str) -> AsyncIterator[Tail]:
        """Subscribe to the session's events; subscribed once this is entered."""
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        try:
            with cluster_errors(answers=False):  # sent, not answered yet
                await pubsub.subscribe(channel(session_id))
            yield Tail(pubsub)
        finally:
            with contextlib.suppress(Exception):  # Redis gone: nothing left to unsubscribe
                await pubsub.aclose()  # type: ignore[no-untyped-call]


class Tail:
    """What the session's owner publishes from the moment of subscribing."""

    def __init__(self, pubsub: PubSub) -> None:
        self._pubsub = pubsub

    async def next(self, timeout_s: float) -> list[Published] | None:
        """The events of the next message, or None when none came within ``timeout_s``."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return None
            # Quiet is not an answer: a Redis that hangs is quiet too.
            with cluster_errors(answers=False):
                message = await self._pubsub.get_message(timeout=left)
            if message is not None:
                REDIS.answered()
                if message.get("type") == "message":
                    return decode(message["data"])


def channel(session_id: str) -> str:
    return f"agw:events:{session_id}"
