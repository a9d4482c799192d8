"""Who runs each session, decided in the database: replicas' heartbeats, claims and fences.

    replicas(id, seen_at)        each replica's last heartbeat, by the database's clock
    sessions.holder, .fence      the replica that runs the session, and its claim's token

A replica *claims* a session before it runs its CLI: one ``UPDATE`` that succeeds only when
nobody holds the session, this replica does, or (``take_stale``) its holder has been silent
for ``stale_after_s``; it names the new holder and hands out the next fencing token. From
then on everything an old holder writes for the session is refused with ``SessionFenced``:
its events (their token is older, ``insert_events``), and, on a store built with ``holder``,
its turn rows, session status, approvals, questions and bindings (``_fence``: the session
row is read ``FOR SHARE`` in the write's own transaction, so a claim waits for the write and
a write after the claim sees it).

Redis holds none of this: an empty Redis after a restart changes no owner.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, delete, exists, literal_column, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import SessionFenced
from app.records import BUSY_SESSION_STATUSES, LIVE_TURN_STATUSES
from app.store.calls import uninterrupted
from app.store.tables import ApprovalRow, ReplicaRow, SessionRow, TurnRow
from app.store.transactions import Transactions

FORGET_AFTER_S = 86400.0
"""A replica silent this long is removed from ``replicas`` (its sessions long adopted)."""


@dataclass(frozen=True, slots=True)
class Claimed:
    """This replica holds the session now, under ``token``."""

    token: int


@dataclass(frozen=True, slots=True)
class HeldBy:
    """Another replica holds the session (and is alive, or was not to be taken over)."""

    replica_id: str


class Ownership(Transactions):
    """Heartbeats, claims and the fence on an owner's writes."""

    def _now_s(self) -> ColumnElement[float]:
        """Seconds since the epoch by the database's clock."""
        if self.engine.url.get_backend_name() == "sqlite":
            return literal_column("((julianday('now') - 2440587.5) * 86400.0)")
        return literal_column("extract(epoch from clock_timestamp())")

    def _alive(self, stale_after_s: float) -> ColumnElement[bool]:
        """The session's holder has sent a heartbeat within ``stale_after_s``."""
        return exists().where(
            ReplicaRow.id == SessionRow.holder, ReplicaRow.seen_at > self._now_s() - stale_after_s
        )

    @uninterrupted
    async def heartbeat(self, replica_id: str) -> None:
        """Record that ``replica_id`` is alive now."""
        async with self._write() as db:
            now = float(await db.scalar(select(self._now_s())) or 0.0)
            found = await db.execute(
                update(ReplicaRow).where(ReplicaRow.id == replica_id).values(seen_at=now)
            )
            if not getattr(found, "rowcount", 0):
                db.add(ReplicaRow(id=replica_id, seen_at=now, started_at=now))
            # Replicas gone for a day are forgotten (a replica id often names a process).
            await db.execute(delete(ReplicaRow).where(ReplicaRow.seen_at < now - FORGET_AFTER_S))

    @uninterrupted
    async def live_replicas(self, *, stale_after_s: float) -> list[str]:
        """The replicas that sent a heartbeat within ``stale_after_s``."""
        query = select(ReplicaRow.id).where(ReplicaRow.seen_at > self._now_s() - stale_after_s)
        async with self._read() as db:
            return sorted(await db.scalars(query))

    @uninterrupted
    async def claim_session(
        self, session_id: str, *, holder: str, stale_after_s: float, take_stale: bool = True
    ) -> Claimed | HeldBy | None:
        """Make ``holder`` the session's holder under a new fencing token if nobody holds it,
        ``holder`` does, or (``take_stale``) its holder has been silent for
        ``stale_after_s``; else who holds it. None when there is no such session."""
        free = or_(SessionRow.holder.is_(None), SessionRow.holder == holder)
        if take_stale:
            free = or_(free, ~self._alive(stale_after_s))
        async with self._write() as db:
            token = await db.scalar(
                update(SessionRow)
                .where(SessionRow.id == session_id, free)
                .values(fence=SessionRow.fence + 1, holder=holder)
                .returning(SessionRow.fence)
            )
            if token is not None:
                return Claimed(int(token))
            found = (
                await db.execute(select(SessionRow.holder).where(SessionRow.id == session_id))
            ).first()
        if found is None:
            return None
        return HeldBy(str(found[0]))

    @uninterrupted
    async def release_session(self, session_id: str, *, holder: str) -> None:
        """``holder`` no longer runs the session (if it still held it): anyone may claim it."""
        async with self._write() as db:
            await db.execute(
                update(SessionRow)
                .where(SessionRow.id == session_id, SessionRow.holder == holder)
                .values(holder=None)
            )

    @uninterrupted
    async def holders(self, session_ids: Sequence[str]) -> dict[str, tuple[str | None, int]]:
        """Each existing session's holder and fencing token now."""
        if not session_ids:
            return {}
        query = select(SessionRow.id, SessionRow.holder, SessionRow.fence).where(
            SessionRow.id.in_(list(session_ids))
        )
        async with self._read() as db:
            return {sid: (holder, int(fence)) for sid, holder, fence in await db.execute(query)}

    @uninterrupted
    async def live_holder(self, session_id: str, *, stale_after_s: float) -> str | None:
        """The replica holding the session, if it sent a heartbeat within ``stale_after_s``."""
        query = select(SessionRow.holder).where(
            SessionRow.id == session_id, self._alive(stale_after_s)
        )
        async with self._read() as db:
            return await db.scalar(query)

    @uninterrupted
    async def orphaned_sessions(self, *, me: str, stale_after_s: float) -> list[str]:
        """Sessions nobody alive runs: held by a replica silent for ``stale_after_s``, held
        by ``me`` (an earlier run of this replica: the caller leaves out what it holds now),
        or held by nobody while something of them is unfinished."""
        unfinished = or_(
            SessionRow.status.in_(BUSY_SESSION_STATUSES),
            exists().where(
                TurnRow.session_id == SessionRow.id, TurnRow.status.in_(LIVE_TURN_STATUSES)
            ),
            exists().where(
                ApprovalRow.session_id == SessionRow.id, ApprovalRow.status == "pending"
            ),
        )
        query = select(SessionRow.id).where(
            or_(
                and_(SessionRow.holder.is_not(None), SessionRow.holder == me),
                and_(SessionRow.holder.is_not(None), ~self._alive(stale_after_s)),
                and_(SessionRow.holder.is_(None), unfinished),
            )
        )
        async with self._read() as db:
            return sorted(await db.scalars(query))

    async def _fence(
        self,
        db: AsyncSession,
        *,
        session_id: str | None = None,
        turn_id: str | None = None,
        approval_id: str | None = None,
        exclusive: bool = False,
    ) -> None:
        """On a store that writes as a session's holder: lock the session's row for the rest
        of this transaction and refuse the write (``SessionFenced``) unless this replica
        holds it. ``exclusive``: the write updates that row itself, so it is locked for update
        at once (two transactions sharing the lock and both upgrading it would deadlock, as
        with the event writer's)."""
        if self.holder is None:
            return
        if session_id is None and turn_id is not None:
            session_id = await db.scalar(select(TurnRow.session_id).where(TurnRow.id == turn_id))
        if session_id is None and approval_id is not None:
            session_id = await db.scalar(
                select(ApprovalRow.session_id).where(ApprovalRow.id == approval_id)
            )
        if session_id is None:
            return  # nothing of it exists: the write itself finds nothing either
        holder = await db.scalar(
            select(SessionRow.holder)
            .where(SessionRow.id == session_id)
            .with_for_update(read=not exclusive)
        )
        if holder != self.holder:
            raise SessionFenced([session_id])
