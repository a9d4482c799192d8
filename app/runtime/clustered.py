"""Sessions of a cluster of replicas: a ``LocalSessions`` wrapped with leases, forwarding,
loss and adoption (app/runtime/cluster.py has the leases and the signed transport).

    execute(command, issuer) at any replica
        StartTurn, Close:  hold the session (taking a free lease) ─► run it here
                           held by replica R                      ─► forward it to R
        the others:        held by replica R                      ─► forward it to R
                           else                                   ─► run it here (nothing
                                                                     waits elsewhere)
    a command forwarded here runs here, as the key that asked; a StartTurn or Close for a
    session that moved on meanwhile is ``cluster_unavailable`` (the client retries)

A forwarded command is the command itself, encoded (app/runtime/commands.py), in a signed
envelope; its answer comes back as the record the API would have got.

Between ``start`` and ``aclose`` three supervised loops consume what the cluster reports
(app/runtime/supervision.py: a failure is logged, the loop goes on):

    cluster.commands()   ─► Received     run it here (each in a task of its own) ─► answer
    cluster.losses()     ─► Lost         stop the session here, write nothing more
    cluster.adoptions()  ─► AdoptionDue  adopt the sessions of replicas that died
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar, cast

from app.errors import ClusterUnavailable, SessionClosed
from app.providers.base import ProcessInfo
from app.records import ENDED_SESSION_STATUSES, SessionRecord
from app.runtime.cluster import AdoptionDue, Cluster, Lost, Received
from app.runtime.commands import (
    Close,
    Issuer,
    SessionCommand,
    StartTurn,
    decode,
    decode_result,
    encode,
)
from app.runtime.eventlog import EventLog
from app.runtime.figures import FigureBook
from app.runtime.local import LocalSessions
from app.runtime.recovery import end_unfinished, scheduled_turns
from app.runtime.requests import SessionRequest
from app.runtime.supervision import Supervisor
from app.settings import Settings
from app.store.interface import Storage

log = logging.getLogger(__name__)

R = TypeVar("R")


class ClusteredSessions:
    """``Sessions`` on one replica of several: held here or forwarded to their holder."""

    def __init__(self, local: LocalSessions, cluster: Cluster) -> None:
        self.local = local
        self.cluster = cluster
        self.settings: Settings = local.settings
        self.store: Storage = local.store
        self.events: EventLog = local.events
        self.clock: Callable[[], datetime] = local.clock
        self.figures: FigureBook = local.figures
        self._loops = Supervisor(log)

    # --- what does not depend on where the session runs -----------------------------------

    async def create(self, request: SessionRequest) -> SessionRecord:
        return await self.local.create(request)

    async def get(self, session_id: str, *, owner: str | None = None) -> SessionRecord:
        return await self.local.get(session_id, owner=owner)

    def process_info(self, session_id: str) -> ProcessInfo | None:
        return self.local.process_info(session_id)

    async def thread_id(self, row: SessionRecord) -> str | None:
        return await self.local.thread_id(row)

    async def wait_turn(self, session_id: str) -> None:
        await self.local.wait_turn(session_id)

    async def suspend_idle(self, now: float | None = None) -> int:
        return await self.local.suspend_idle(now)

    async def aclose(self) -> None:
        """Stop the sessions here, then the loops (a command forwarded meanwhile is still
        answered, as the leases are still renewed); idempotent."""
        try:
            await self.local.aclose()
        finally:
            await self._loops.aclose()

    async def replica_of(self, session_id: str) -> str | None:
        return await self.cluster.owner(session_id)

    # --- commands -------------------------------------------------------------------------

    async def execute(self, command: SessionCommand[R], issuer: Issuer) -> R:
        """Run ``command`` here when this replica holds the session (taking it when nobody
        does, for a turn or a close), else on the replica that does."""
        row = await self.local.get(command.session_id, owner=issuer.owner)
        if isinstance(command, Close | StartTurn):
            if (ended := _ended(command, row)) is not None:
                return cast(R, ended)
            elsewhere = await self._hold_or_locate(command.session_id)
        else:
            elsewhere = await self._located_elsewhere(command.session_id)
        if elsewhere is None:
            return await self._here(command, issuer)
        kind, fields = encode(cast(Any, command))
        answer = await self.cluster.forward(elsewhere, kind, fields, issuer=issuer)
        return decode_result(command, answer)

    async def _serve(self, kind: str, fields: dict[str, Any], issuer: Issuer) -> Any:
        """Run a command another replica forwarded, as the key that asked for it (its signed
        ``issuer`` decides which sessions it may reach, nothing in its fields)."""
        command = decode(kind, fields)
        if isinstance(command, Close | StartTurn):
            row = await self.local.get(command.session_id, owner=issuer.owner)
            if (ended := _ended(command, row)) is not None:
                return ended
            holder = await self._hold_or_locate(command.session_id)
            if holder is not None:  # it moved on between the two replicas: the client retries
                raise ClusterUnavailable(
                    f"session {command.session_id} moved to replica {holder}; retry",
                    retry_after_s=1,
                )
        return await self._here(command, issuer)

    async def _here(self, command: SessionCommand[R], issuer: Issuer) -> R:
        result = await self.local.execute(command, issuer)
        if isinstance(command, Close):  # nothing runs it here any more
            await self.cluster.let_go(command.session_id)
        return result

    async def _hold_or_locate(self, session_id: str) -> str | None:
        """Hold the session here (taking it if free): None; or the replica that holds it."""
        held_before = self.cluster.holds(session_id)
        holder = await self.cluster.hold(session_id)
        if holder is not None:
            return holder.replica_id
        if not held_before:
            await self.events.take_over(session_id)
            await self.local.drop(session_id, "replica_lost")  # from an earlier hold of it
        return None

    async def _located_elsewhere(self, session_id: str) -> str | None:
        """The other replica that holds the session, if one does (nothing is taken)."""
        if self.cluster.holds(session_id):
            return None
        holder = await self.cluster.leases.holder(session_id)  # ClusterUnavailable: 503
        if holder is None or holder.replica_id == self.cluster.replica_id:
            return None
        return holder.replica_id

    # --- loss and adoption ------------------------------------------------------------------

    async def recover(self) -> None:
        """At start: adopt the sessions no live replica holds (ends what died with theirs)."""
        try:
            await self.adopt_orphans()
        except ClusterUnavailable:  # Redis away: the adoption loop tries again
            log.warning("could not look for sessions of lost replicas at start; will retry")

    async def start(self) -> None:
        """Serve forwarded commands, renew the leases held here, adopt orphans, until
        ``aclose``."""
        self._loops.consume("cluster-commands", self.cluster.commands, self._received)
        self._loops.consume("cluster-leases", self.cluster.losses, self._lost)
        self._loops.consume("cluster-adoption", self.cluster.adoptions, self._adopt)

    async def _received(self, received: Received) -> None:
        # Each in a task of its own: a slow command (a turn's start) holds up no other.
        self._loops.spawn("cluster-command", self._answer(received))

    async def _answer(self, received: Received) -> None:
        command = received.command
        try:
            result = await self._serve(command.op, command.args, command.issuer)
        except Exception as exc:  # answered, as the error or (unexpected) its id only
            await self.cluster.answer(received, error=exc)
        else:
            await self.cluster.answer(received, result=result)

    async def _lost(self, lost: Lost) -> None:
        """Another replica took the session over: stop what runs it here, write nothing."""
        await self.local.drop(lost.session_id, "replica_lost")
        self.events.let_go(lost.session_id)

    async def _adopt(self, _: AdoptionDue) -> None:
        try:
            await self.adopt_orphans()
        except ClusterUnavailable:  # Redis away: the next tick tries again
            log.warning("could not look for sessions of lost replicas; will retry")

    async def adopt_orphans(self) -> int:
        """End the in-flight turns and approvals of sessions whose replica was lost (busy in
        the store, no lease in Redis); returns how many sessions were adopted."""
        candidates = {turn.session_id for turn in await self.store.unfinished_turns()}
        candidates |= {approval.session_id for approval in await self.store.pending_approvals()}
        adopted = 0
        for session_id in sorted(candidates):
            if self.cluster.holds(session_id) or self.local.is_live(session_id):
                continue
            if await self.cluster.leases.holder(session_id) is not None:
                continue  # its replica is alive
            if await self.cluster.hold(session_id) is not None:
                continue  # another replica adopted it first
            resumed = False
            try:
                await self.events.take_over(session_id)
                now = self.clock()
                await end_unfinished(
                    self.store, self.events, now=now, reason="replica_lost", sessions={session_id}
                )
                scheduled = await scheduled_turns(self.store, {session_id})
                if scheduled:  # a wait for a usage limit's reset goes on here
                    resumed = await self.local.resume(scheduled[0])
                else:
                    await self.store.update_session(session_id, status="idle", updated_at=now)
                adopted += 1
                log.warning(
                    "adopted session %s from a lost replica: %s",
                    session_id,
                    "its turn waits here" if resumed else "its turn ended (replica_lost)",
                    extra={"session_id": session_id, "event": "cluster.adopted"},
                )
            finally:
                await self.events.flush()
                if not resumed:
                    await self.cluster.let_go(session_id)
                    self.events.let_go(session_id)
        return adopted


def _ended(command: Close | StartTurn, row: SessionRecord) -> SessionRecord | None:
    """What a close or a turn on an ended session answers without any replica taking it: the
    session itself for a close; a turn is refused. None while the session is open."""
    if row.status not in ENDED_SESSION_STATUSES:
        return None
    if isinstance(command, Close):
        return row
    raise SessionClosed(f"session {row.id} is {row.status}; create a new session")
