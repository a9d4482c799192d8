"""Session ownership: one replica at a time runs a session's CLI, under a lease in Redis.

    agw:lease:<session>   "<replica_id> <nonce>", expiring after the lease TTL unless renewed

``acquire`` takes a free lease (one Lua script: no other replica can take it between the check
and the set); the holder ``renew``s it well inside the TTL and ``release``s it when it lets
the session go. A holder that stops renewing (killed, cut off, paused) loses the lease when
its TTL runs out, and another replica can take it.

A lease alone cannot stop a holder that does not know it lost it (paused past its TTL, then
resumed) from writing. A fencing token does: whoever takes a lease then claims the session in
the store, which hands out the session's next token (``Storage.claim_session``) and refuses
events written under an older one. The tokens live in the database, not in Redis, so they
keep growing even when Redis restarts empty.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from redis.asyncio import Redis

from app.cluster.redis import cluster_errors

_TAKE_OVER = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[3] then return holder end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@dataclass(frozen=True, slots=True)
class Lease:
    """A replica's hold on a session (``nonce`` tells this hold from its other ones)."""

    session_id: str
    replica_id: str
    nonce: str

    @property
    def value(self) -> str:
        return f"{self.replica_id} {self.nonce}"


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a session's lease now."""

    replica_id: str
    nonce: str


class Leases:
    """The leases one replica (``replica_id``) takes, renews and gives back."""

    def __init__(self, redis: Redis, *, replica_id: str, ttl_s: float) -> None:
        if " " in replica_id or not replica_id:
            raise ValueError(f"a replica id is a non-empty word, not {replica_id!r}")
        self._redis = redis
        self.replica_id = replica_id
        self._ttl_ms = max(1, round(ttl_s * 1000))
        self._take_over = redis.register_script(_TAKE_OVER)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)

    async def acquire(self, session_id: str) -> Lease | Holder:
        """Take the session's lease if nobody holds it: the ``Lease``, else the ``Holder`` that
        has it (possibly this replica, through an earlier lease)."""
        lease = self._new(session_id)
        with cluster_errors():
            taken = await self._redis.set(
                _lease_key(session_id), lease.value, nx=True, px=self._ttl_ms
            )
            if taken:
                return lease
            value = await self._redis.get(_lease_key(session_id))
        if value is None:  # expired between the two calls
            return await self.acquire(session_id)
        return _holder(value)

    async def take_over(self, session_id: str, previous: Holder) -> Lease | Holder:
        """Replace the lease ``previous`` (this replica's id from an earlier run of it, which
        holds nothing now) with a new one; the ``Holder`` when the lease changed meanwhile."""
        lease = self._new(session_id)
        stale = f"{previous.replica_id} {previous.nonce}"
        with cluster_errors():
            other = await self._take_over(
                keys=[_lease_key(session_id)], args=[lease.value, self._ttl_ms, stale]
            )
        return lease if other is None else _holder(other)

    async def renew(self, lease: Lease) -> bool:
        """Extend the lease by the TTL; False when it is no longer this lease (it expired,
        and perhaps another replica holds the session now)."""
        with cluster_errors():
            renewed = await self._renew(
                keys=[_lease_key(lease.session_id)], args=[lease.value, self._ttl_ms]
            )
        return bool(renewed)

    async def release(self, lease: Lease) -> bool:
        """Give the lease back (only if it is still this one); False when it was not."""
        with cluster_errors():
            released = await self._release(keys=[_lease_key(lease.session_id)], args=[lease.value])
        return bool(released)

    async def holder(self, session_id: str) -> Holder | None:
        """Who holds the session's lease, None when nobody does."""
        with cluster_errors():
            value = await self._redis.get(_lease_key(session_id))
        return None if value is None else _holder(value)

    def _new(self, session_id: str) -> Lease:
        return Lease(session_id=session_id, replica_id=self.replica_id, nonce=secrets.token_hex(8))


def _lease_key(session_id: str) -> str:
    return f"agw:lease:{session_id}"


def _holder(value: bytes | str) -> Holder:
    text = value.decode() if isinstance(value, bytes) else value
    replica_id, _, nonce = text.rpartition(" ")
    return Holder(replica_id=replica_id, nonce=nonce)
