"""Sessions of a cluster of replicas: a ``LocalSessions`` wrapped with claims, forwarding,
loss, adoption and hand-back (app/runtime/cluster.py has ownership and the signed transport).

    execute(command, issuer) at any replica
        StartTurn, Revert, hold the session (claiming it if free) ─► run it here
        Fork, Configure,   held by replica R                      ─► forward it to R
        Close:             (a fork or a configure runs where the session's turns run: no
                           turn starts elsewhere meanwhile)
        the others:        held by replica R                      ─► forward it to R
                           else                                   ─► run it here (nothing
                                                                     waits elsewhere)
        R died and never began it (``OwnerGone``)                 ─► adopt the session, run here
        this replica shutting down: a StartTurn or Close          ─► its session handed back,
                                                                     the command sent to another
    a command forwarded here runs here, as the key that asked; one of the first group for a
    session that moved on meanwhile is ``cluster_unavailable`` (the client retries)

A forwarded command is the command itself, encoded (app/runtime/commands.py), in a signed
envelope; its answer comes back as the record the API would have got.

Between ``start`` and ``aclose`` three supervised loops consume what the cluster reports
(app/runtime/supervision.py: a failure is logged, the loop goes on):

    cluster.commands()   ─► Received     run it here (each in a task of its own) ─► answer
    cluster.losses()     ─► Lost         stop the session's CLI here at once, write nothing
    cluster.adoptions()  ─► AdoptionDue  adopt the sessions of replicas that died

Whenever this replica claims a session (a turn, a close, an adoption), what its last holder
left unfinished is settled once (app/runtime/recovery.py ``settle_session``), so the log and
the rows tell the same end of every turn.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar, cast

from app.errors import (
    ClusterUnavailable,
    GatewayError,
    NotFound,
    SessionClosed,
    StorageUnavailable,
    Unavailable,
)
from app.providers.base import ProcessInfo
from app.records import ENDED_SESSION_STATUSES, SessionRecord
from app.runtime.cluster import AdoptionDue, Cluster, Lost, Received
from app.runtime.commands import (
    Close,
    Configure,
    Fork,
    Issuer,
    Revert,
    SessionCommand,
    StartTurn,
    decode,
    decode_result,
    encode,
)
from app.runtime.eventlog import EventLog
from app.runtime.figures import FigureBook
from app.runtime.forwarding import OwnerGone
from app.runtime.history import WorkspaceHistory
from app.runtime.local import LocalSessions
from app.runtime.recovery import settle_session
from app.runtime.requests import SessionRequest
from app.runtime.supervision import Supervisor
from app.runtime.turns import GATEWAY_SHUTDOWN
from app.runtime.worktrees import remove_worktree
from app.settings import Settings
from app.store.interface import Storage

log = logging.getLogger(__name__)

R = TypeVar("R")

Held = Close | StartTurn | Revert | Fork | Configure
"""The commands that run only on the replica holding the session (claiming it if free)."""


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
        self.history: WorkspaceHistory = local.history
        metrics = local.metrics
        self._loops = Supervisor(
            log,
            counted=None
            if metrics is None
            else lambda loop: metrics.background_failures.labels(loop=loop).inc(),
        )
        self._closing = False
        self._handing_back: dict[str, asyncio.Task[None]] = {}
        local.fenced = cluster.fenced  # a write refused for a session: it is lost here

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

    async def replica_of(self, session_id: str) -> str | None:
        return await self.cluster.owner(session_id)

    # --- commands -------------------------------------------------------------------------

    async def execute(self, command: SessionCommand[R], issuer: Issuer) -> R:
        """Run ``command`` here when this replica holds the session (taking it when nobody
        does, for a turn or a close), else on the replica that does; while this replica
        shuts down, a turn or a close goes to another one."""
        session_id = command.session_id
        row = await self.local.get(session_id, owner=issuer.owner)
        if isinstance(command, Held):
            if (ended := _ended(command, row)) is not None:
                await self._tidy(command, ended)
                return cast(R, ended)
            if self._closing:
                await self._hand_back(session_id)
                elsewhere: str | None = await self._another_replica()
            else:
                elsewhere = await self._hold_or_locate(session_id)
        else:
            elsewhere = await self.cluster.holder_elsewhere(session_id)
        if elsewhere is None:
            return await self._here(command, issuer)
        kind, fields = encode(cast(Any, command))
        try:
            answer = await self.cluster.forward(elsewhere, kind, fields, issuer=issuer)
        except OwnerGone:  # it died and never began the command: adopt the session, run here
            if self._closing or not await self.adopt(session_id):
                raise ClusterUnavailable(
                    f"replica {elsewhere}, which ran session {session_id}, stopped; another "
                    "replica is taking the session over: retry",
                    retry_after_s=1,
                ) from None
            return await self._here(command, issuer)
        return decode_result(command, answer)

    async def _serve(self, kind: str, fields: dict[str, Any], issuer: Issuer) -> Any:
        """Run a command another replica forwarded, as the key that asked for it (its signed
        ``issuer`` decides which sessions it may reach, nothing in its fields)."""
        command = decode(kind, fields)
        if isinstance(command, Held):
            row = await self.local.get(command.session_id, owner=issuer.owner)
            if (ended := _ended(command, row)) is not None:
                await self._tidy(command, ended)
                return ended
            if self._closing:
                raise ClusterUnavailable(
                    f"replica {self.cluster.replica_id} is shutting down; retry", retry_after_s=1
                )
            holder = await self._hold_or_locate(command.session_id)
            if holder is not None:  # it moved on between the two replicas: the client retries
                raise ClusterUnavailable(
                    f"session {command.session_id} moved to replica {holder}; retry",
                    retry_after_s=1,
                )
        return await self._here(command, issuer)

    async def _tidy(self, command: Held, ended: SessionRecord) -> None:
        """A close of an ended session (failed, or closed by retention) removes its worktree
        if it still has one: no replica runs anything in it."""
        if isinstance(command, Close):
            await remove_worktree(self.local.settings, ended)

    async def _here(self, command: SessionCommand[R], issuer: Issuer) -> R:
        result = await self.local.execute(command, issuer)
        if isinstance(command, Close):  # nothing runs it here any more
            await self.cluster.let_go(command.session_id)
        return result

    async def _hold_or_locate(self, session_id: str) -> str | None:
        """Hold the session here (claiming it if free): None; or the replica that holds it.
        A session newly held here first has what died with its last holder ended."""
        if self.cluster.holds(session_id):
            return None
        holder = await self.cluster.hold(session_id)
        if holder is not None:
            return holder
        await self._taken(session_id)
        return None

    async def _taken(self, session_id: str) -> bool:
        """This replica has just claimed the session: number its events from the store, drop
        what an earlier hold of it left here, and settle what its last holder left unfinished
        (nothing, when that one let it go cleanly). Whether a turn's wait for a usage limit
        goes on here. Not settled (a failure): the session is let go, so that whoever claims
        it next settles it."""
        try:
            await self.events.take_over(session_id)
            await self.local.drop(session_id, "replica_lost", quiet=True)  # settled just below
            scheduled = await settle_session(self.store, self.events, session_id, now=self.clock())
            return scheduled is not None and await self.local.resume(scheduled)
        except BaseException:
            await self.events.flush()
            await self.cluster.let_go(session_id)
            raise

    async def _another_replica(self) -> str:
        """A live replica other than this one (shutting down), for a turn or a close."""
        others = [r for r in await self.cluster.live_replicas() if r != self.cluster.replica_id]
        if not others:
            raise Unavailable(
                "this replica is shutting down and no other replica is alive; retry shortly",
                retry_after_s=5,
            )
        return secrets.choice(others)

    # --- loss and adoption ------------------------------------------------------------------

    async def recover(self) -> None:
        """At start: send the first heartbeat, then adopt what this replica's earlier run left
        (and, once it may adopt, the sessions no live replica holds)."""
        await self.cluster.beat()
        try:
            await self.adopt_orphans()
        except StorageUnavailable:  # the adoption loop tries again (the outage is logged once)
            log.debug("could not look for sessions of lost replicas at start; will retry")

    async def start(self) -> None:
        """Serve forwarded commands, send heartbeats and watch the sessions held here, adopt
        orphans, until ``aclose``."""
        self._loops.consume("cluster-commands", self.cluster.commands, self._received)
        self._loops.consume("cluster-heartbeat", self.cluster.losses, self._lost)
        self._loops.consume("cluster-adoption", self.cluster.adoptions, self._adopt)

    async def _received(self, received: Received) -> None:
        # Each in a task of its own: a slow command (a turn's start) holds up no other.
        self._loops.spawn("cluster-command", self._answer(received))

    async def _answer(self, received: Received) -> None:
        command = received.command
        # Under the span that forwarded it: what runs here joins the sender's trace.
        attributes = {"gateway.command": command.op, "gateway.replica": self.cluster.replica_id}
        with self.cluster.tracer.span(
            f"command {command.op}", attributes, kind="server", carrier=command.trace
        ) as span:
            try:
                result = await self._serve(command.op, command.args, command.issuer)
            except Exception as exc:  # answered, as the error or (unexpected) its id only
                span.fail(exc.type if isinstance(exc, GatewayError) else type(exc).__name__)
                await self.cluster.answer(received, error=exc)
            else:
                await self.cluster.answer(received, result=result)

    async def _lost(self, lost: Lost) -> None:
        """Another replica took the session over: stop its CLI here at once, write nothing."""
        await self.local.drop(lost.session_id, "replica_lost", quiet=True)
        self.events.let_go(lost.session_id)

    async def _adopt(self, _: AdoptionDue) -> None:
        try:
            await self.adopt_orphans()
        except StorageUnavailable:  # the next tick tries again (the outage is logged once)
            log.debug("could not look for sessions of lost replicas; will retry")

    async def adopt_orphans(self) -> int:
        """Adopt the sessions nobody alive runs (app/store/ownership.py); how many."""
        adopted = 0
        if self._closing:  # handing its own sessions back: it adopts nothing more
            return 0
        for session_id in await self.cluster.orphans():
            if await self.adopt(session_id):
                adopted += 1
        return adopted

    async def adopt(self, session_id: str) -> bool:
        """Claim a session whose holder died (or that nobody holds) and end what died with it,
        once. The session stays held here (its next command runs here, never caught between
        this replica letting it go and another claiming it), as every session does with the
        replica that last ran it. Whether this replica adopted it (False: another one was
        first, or its holder is alive after all)."""
        if self.cluster.holds(session_id):
            return True
        try:
            holder = await self.cluster.hold(session_id, adopt=True)
        except NotFound:
            return False
        if holder is not None:
            return False
        resumed = await self._taken(session_id)
        await self.events.flush()
        self.cluster.count_adopted()
        log.warning(
            "adopted session %s from a lost replica%s",
            session_id,
            ": its turn waits here" if resumed else "",
            extra={"session_id": session_id, "event": "cluster.adopted"},
        )
        return True

    # --- shutdown -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Hand every session held here back (each as soon as its CLI is stopped and its last
        events are stored), then stop the loops; turns and closes that arrive meanwhile go to
        another replica. Idempotent."""
        self._closing = True
        try:
            await asyncio.gather(
                *(self._hand_back(s) for s in self.cluster.held()), return_exceptions=True
            )
            await self.local.aclose()
        finally:
            await self._loops.aclose()

    async def _hand_back(self, session_id: str) -> None:
        """Stop the session here (its turn ends as interrupted, ``gateway_shutdown``), store
        its last events, then let the session go: another replica may claim it at once."""
        task = self._handing_back.get(session_id)
        if task is None:
            task = asyncio.ensure_future(self._give_back(session_id))
            self._handing_back[session_id] = task
        await asyncio.shield(task)

    async def _give_back(self, session_id: str) -> None:
        await self.local.drop(session_id, GATEWAY_SHUTDOWN, at_once=True)
        await self.events.flush()
        await self.cluster.let_go(session_id)


def _ended(
    command: Held,
    row: SessionRecord,
) -> SessionRecord | None:
    """What a close, a turn, a revert, a fork or a configure of an ended session answers
    without any replica taking it: the session itself for a close; the others are refused.
    None while the session is open."""
    if row.status not in ENDED_SESSION_STATUSES:
        return None
    if isinstance(command, Close):
        return row
    if isinstance(command, Fork | Configure):
        doing = "forked" if isinstance(command, Fork) else "configured"
        raise SessionClosed(f"session {row.id} is {row.status}; it cannot be {doing}")
    raise SessionClosed(f"session {row.id} is {row.status}; create a new session")
