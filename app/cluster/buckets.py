"""Token buckets every replica shares, in Redis: N replicas enforce the configured numbers,
not N times them.

The same bucket as ``app.api.ratelimits.KeyedBuckets`` (``capacity`` tokens, ``capacity`` more
per ``period_s``), kept in one Redis hash per key and updated by one Lua script, on Redis's
clock (``TIME``), so replicas with skewed clocks agree:

    agw:bucket:<name>:<key>   {tokens, at}, expiring once it would be full again
"""

from __future__ import annotations

from redis.asyncio import Redis

from app.cluster.redis import cluster_errors

_TAKE = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or capacity
local at = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - at) * rate)
local wait = -1
if tokens >= 1 then
  if ARGV[3] == '1' then tokens = tokens - 1 end
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / rate * 1000) + 1000)
return tostring(wait)
"""


class SharedBuckets:
    """One token bucket per key, shared by every replica; ``take`` answers None (allowed) or
    the seconds to wait, like ``KeyedBuckets``."""

    def __init__(self, redis: Redis, *, name: str, capacity: int, period_s: float) -> None:
        self.name = name
        self.capacity = capacity
        self.rate = capacity / period_s
        self._script = redis.register_script(_TAKE)

    async def acquire(self, key: str) -> float | None:
        """``take`` (the ``Buckets`` protocol's name for it)."""
        return await self.take(key)

    async def take(self, key: str) -> float | None:
        """Take one token: None when allowed, else the seconds until one is back."""
        return await self._call(key, take=True)

    async def wait_s(self, key: str) -> float | None:
        """Seconds until ``key`` may take a token, or None when it may now (nothing taken)."""
        return await self._call(key, take=False)

    async def _call(self, key: str, *, take: bool) -> float | None:
        with cluster_errors():
            wait = await self._script(
                keys=[f"agw:bucket:{self.name}:{key}"],
                args=[self.capacity, repr(self.rate), "1" if take else "0"],
            )
        seconds = float(wait)
        return None if seconds < 0 else seconds
