"""This replica's part in a cluster (``[cluster] redis_url``): the sessions it holds, the
commands it forwards to other holders, and what arrives for it from the others, reported as
values (app/runtime/clustered.py consumes them and acts; nothing here calls up into it).

Who runs a session is decided in PostgreSQL (app/store/ownership.py), never in Redis:

    a command (turn, approval, interrupt, delete) for session S, at any replica
    (app/runtime/clustered.py decides; this module claims and carries):
        S free, or held by a replica silent for the TTL ──► claim it (a new fencing token),
                                                           run here
        held by this one                                ──► run here
        held by replica R, alive                        ──► forward to R through Redis
                                                           (app/runtime/forwarding.py)

    what arrives, each an async generator its consumer drives:
        commands()   ──► Received     a command forwarded here; ``answer(received, …)`` replies
        losses()     ──► Lost         a session another replica has claimed since
        adoptions()  ──► AdoptionDue  time to adopt the sessions of replicas that died

``losses`` sends this replica's heartbeat every third of ``cluster.lease_ttl_s`` and then
checks that every session it holds still names it with its token: one another replica claimed
meanwhile (this one was paused or cut off past the TTL) is Lost, and stopped here at once.
Any write refused for a session (``fenced``) reports it Lost as well, without waiting for the
next heartbeat. A replica adopts another's sessions only when that one has sent no heartbeat
for the TTL *and* this one has been sending its own without a break for the TTL: after an
outage of the database every replica's heartbeat is old, and nobody adopts before the owners
have had the time to send theirs again. Redis restarting empty changes no owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

from redis.asyncio import Redis

from app.cluster.commands import Issuer
from app.cluster.fanout import Fanout
from app.cluster.redis import connect
from app.cluster_settings import ClusterSettings
from app.errors import NotFound, StorageUnavailable
from app.observability.metrics import GatewayMetrics
from app.observability.tracing import OFF, Tracer
from app.runtime.forwarding import Forwarder, Received, Refusals
from app.store.interface import Storage
from app.store.ownership import HeldBy

log = logging.getLogger(__name__)

__all__ = ["AdoptionDue", "Cluster", "Lost", "Received"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Lost:
    """Another replica took over a session held here: nothing may run it here any more."""

    session_id: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class AdoptionDue:
    """Time to look for the sessions of replicas that died, and adopt them."""


class Cluster:
    """Ownership, forwarding and adoption for one replica."""

    def __init__(
        self,
        redis: Redis,
        settings: ClusterSettings,
        store: Storage,
        *,
        waiting: Redis | None = None,
        refused: Refusals | None = None,
        metrics: GatewayMetrics | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        tracer: Tracer = OFF,
    ) -> None:
        self.redis = redis
        self._waiting = waiting or connect(
            str(settings.redis_url), blocking=True, name=f"agw:{settings.replica_id}:waiting"
        )
        self.settings = settings
        self.replica_id = settings.replica_id
        self.ttl_s = settings.lease_ttl_s
        self.fanout = Fanout(redis)
        self._store = store
        self._metrics = metrics
        self._monotonic = monotonic
        self._held: dict[str, int] = {}
        """Sessions held here: their fencing token."""
        self._claiming: set[str] = set()
        self._fenced: asyncio.Queue[str] = asyncio.Queue()
        self._beating_since: float | None = None
        """When this replica's unbroken run of heartbeats began (None: the last one failed)."""
        self._last_beat: float | None = None
        self._closing = False
        self.forwarder = Forwarder(
            redis,
            self._waiting,
            replica_id=settings.replica_id,
            signing_secrets=settings.signing_secrets(),
            window_s=settings.command_window_s,
            timeout_s=settings.command_timeout_s,
            alive=self._alive,
            refused=refused,
            metrics=metrics,
            tracer=tracer,
        )
        self.tracer = tracer
        """Where a command forwarded here is traced, under the span that sent it."""

    # --- ownership ------------------------------------------------------------------------

    async def hold(self, session_id: str, *, adopt: bool = False) -> str | None:
        """Claim the session unless another replica holds it: None when this replica holds it
        now (under a new fencing token), else the replica that does. A holder silent for the
        TTL is taken over only with ``adopt`` (the caller ends what died with it) and when
        this replica may adopt (``may_adopt``)."""
        if session_id in self._held:
            return None
        self._claiming.add(session_id)
        try:
            got = await self._store.claim_session(
                session_id,
                holder=self.replica_id,
                stale_after_s=self.ttl_s,
                take_stale=adopt and self.may_adopt(),
            )
            if got is None:
                raise NotFound(f"session {session_id} does not exist")
            if isinstance(got, HeldBy):
                return got.replica_id
            self._held[session_id] = got.token
        finally:
            self._claiming.discard(session_id)
        self._count_held()
        log.info("holding session %s (fencing token %d)", session_id, got.token)
        return None

    def token(self, session_id: str) -> int | None:
        """The fencing token this replica writes the session's events under, if it holds it."""
        return self._held.get(session_id)

    def holds(self, session_id: str) -> bool:
        return session_id in self._held

    def held(self) -> list[str]:
        return list(self._held)

    async def let_go(self, session_id: str) -> None:
        """Give the session back (nothing runs it here any more): anyone may claim it."""
        token = self._held.get(session_id)
        if token is None:
            return
        try:  # held until released: no adoption here takes it for an earlier run's meanwhile
            with contextlib.suppress(StorageUnavailable):  # the next claim takes it as stale
                await self._store.release_session(session_id, holder=self.replica_id)
        finally:
            if self._held.get(session_id) == token:
                del self._held[session_id]
                self._count_held()

    def fenced(self, session_id: str) -> None:
        """A write for the session was refused: another replica claimed it since. It is no
        longer held here, and ``losses`` reports it at once."""
        if self._metrics is not None:
            self._metrics.cluster_fenced.inc()
        if self._held.pop(session_id, None) is not None:
            self._count_held()
            log.warning("session %s was claimed by another replica; stopping it here", session_id)
            self._fenced.put_nowait(session_id)

    async def owner(self, session_id: str) -> str | None:
        """The replica that runs the session now (alive), or None (also when it cannot be told)."""
        if session_id in self._held:
            return self.replica_id
        try:
            return await self._store.live_holder(session_id, stale_after_s=self.ttl_s)
        except StorageUnavailable:
            return None

    async def holder_elsewhere(self, session_id: str) -> str | None:
        """The other replica named as the session's holder, alive or not (nothing is taken)."""
        if session_id in self._held:
            return None
        holder, _ = (await self._store.holders([session_id])).get(session_id, (None, 0))
        return None if holder in (None, self.replica_id) else holder

    async def live_replicas(self) -> list[str]:
        """The replicas, this one included, that sent a heartbeat within the TTL."""
        return await self._store.live_replicas(stale_after_s=self.ttl_s)

    async def orphans(self) -> list[str]:
        """The sessions nobody alive runs (not those this replica holds or is claiming)."""
        found = await self._store.orphaned_sessions(me=self.replica_id, stale_after_s=self.ttl_s)
        return [s for s in found if s not in self._held and s not in self._claiming]

    def may_adopt(self) -> bool:
        """This replica has sent its heartbeat without a break for the TTL: an owner it sees as
        silent really was (it is not this replica that was cut off)."""
        since = self._beating_since
        return since is not None and self._monotonic() - since >= self.ttl_s

    async def _alive(self, replica_id: str) -> bool:
        if not self.may_adopt():
            return True  # this replica cannot tell: treat the other one as alive
        try:
            return replica_id in await self.live_replicas()
        except StorageUnavailable:
            return True

    def _count_held(self) -> None:
        if self._metrics is not None:
            self._metrics.cluster_held.set(len(self._held))

    # --- heartbeats, losses, adoption -------------------------------------------------------

    async def beat(self) -> bool:
        """Send this replica's heartbeat; whether the database took it."""
        try:
            await self._store.heartbeat(self.replica_id)
        except StorageUnavailable:
            self._beating_since = None
            return False
        now, last = self._monotonic(), self._last_beat
        if self._beating_since is None or (last is not None and now - last > self.ttl_s):
            self._beating_since = now  # the run began again (after a failure, or a pause)
        self._last_beat = now
        return True

    async def losses(self) -> AsyncGenerator[Lost, None]:
        """Every ``lease_ttl_s / 3``: the heartbeat, then each session held here that another
        replica has claimed since; at once, each session whose write was refused. Ends when
        the cluster closes."""
        period = self.ttl_s / 3
        while not self._closing:
            try:
                async with asyncio.timeout(period):
                    session_id = await self._fenced.get()
                yield Lost(session_id=session_id)
                continue
            except TimeoutError:
                pass
            if not await self.beat() or not self._held:
                continue
            try:
                found = await self._store.holders(list(self._held))
            except StorageUnavailable:
                continue
            for session_id, token in list(self._held.items()):
                holder, fence = found.get(session_id, (None, 0))
                if (holder, fence) == (self.replica_id, token):
                    continue
                if self._held.get(session_id) != token:
                    continue  # let go or claimed again meanwhile
                del self._held[session_id]
                self._count_held()
                log.warning(
                    "lost session %s to %s", session_id, holder or "nobody (it was deleted)"
                )
                yield Lost(session_id=session_id)

    async def adoptions(self) -> AsyncGenerator[AdoptionDue, None]:
        """Every ``lease_ttl_s / 3`` while this replica may adopt: time to adopt the sessions of
        replicas that died."""
        period = self.ttl_s / 3
        while not self._closing:
            await asyncio.sleep(period)
            if self.may_adopt():
                yield AdoptionDue()

    def count_adopted(self) -> None:
        if self._metrics is not None:
            self._metrics.cluster_adoptions.inc()

    # --- commands -----------------------------------------------------------------------------

    async def forward(
        self, replica_id: str, kind: str, fields: Mapping[str, Any], *, issuer: Issuer
    ) -> Any:
        """Run the command on ``replica_id`` (app/runtime/forwarding.py)."""
        return await self.forwarder.forward(replica_id, kind, fields, issuer=issuer)

    def commands(self) -> AsyncGenerator[Received, None]:
        return self.forwarder.commands()

    async def answer(
        self, received: Received, *, result: Any = None, error: Exception | None = None
    ) -> None:
        await self.forwarder.answer(received, result=result, error=error)

    # --- lifecycle ----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Give the sessions held here back and disconnect; after whoever consumes ``commands``,
        ``losses`` and ``adoptions`` has stopped."""
        self._closing = self.forwarder.closing = True
        for session_id in list(self._held):
            await self.let_go(session_id)
        await self.redis.aclose()
        await self._waiting.aclose()
