"""Session ownership: one replica at a time runs a session's CLI, under a lease in Redis.

    agw:fence:<session>   a counter; each lease taken gets the next value, its fencing token
    agw:lease:<session>   "<replica_id> <token>", expiring after the lease TTL unless renewed

``acquire`` takes a free lease (one Lua script: no other replica can take it between the check
and the set) and returns its token; the holder ``renew``s it well inside the TTL and
``release``s it when it lets the session go. A holder that stops renewing (killed, cut off,
paused) loses the lease when its TTL runs out, and the next ``acquire`` gets a greater token.

A lease alone cannot stop a holder that does not know it lost it (paused past its TTL, then
resumed) from writing: the token does. The store records the newest token that claimed a
session and refuses events written under an older one (see ``Storage``), so once another
replica has taken over, the old holder can never append again, whatever it believes.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from app.cluster.redis import cluster_errors

_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder then return {0, holder} end
local token = redis.call('INCR', KEYS[2])
local value = ARGV[1] .. ' ' .. token
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
return {token, value}
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
    """A replica's hold on a session; ``token`` grows with every lease of that session."""

    session_id: str
    replica_id: str
    token: int

    @property
    def value(self) -> str:
        return f"{self.replica_id} {self.token}"


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a session's lease now."""

    replica_id: str
    token: int


class Leases:
    """The leases one replica (``replica_id``) takes, renews and gives back."""

    def __init__(self, redis: Redis, *, replica_id: str, ttl_s: float) -> None:
        if " " in replica_id or not replica_id:
            raise ValueError(f"a replica id is a non-empty word, not {replica_id!r}")
        self._redis = redis
        self.replica_id = replica_id
        self._ttl_ms = max(1, round(ttl_s * 1000))
        self._acquire = redis.register_script(_ACQUIRE)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)

    async def acquire(self, session_id: str) -> Lease | Holder:
        """Take the session's lease if nobody holds it: the ``Lease`` (with a new token), else
        the ``Holder`` that has it (possibly this replica, through an earlier lease)."""
        keys = [_lease_key(session_id), _fence_key(session_id)]
        with cluster_errors():
            token, value = await self._acquire(keys=keys, args=[self.replica_id, self._ttl_ms])
        if int(token):
            return Lease(session_id=session_id, replica_id=self.replica_id, token=int(token))
        return _holder(value)

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


def _lease_key(session_id: str) -> str:
    return f"agw:lease:{session_id}"


def _fence_key(session_id: str) -> str:
    return f"agw:fence:{session_id}"


def _holder(value: bytes | str) -> Holder:
    text = value.decode() if isinstance(value, bytes) else value
    replica_id, _, token = text.rpartition(" ")
    return Holder(replica_id=replica_id, token=int(token))
