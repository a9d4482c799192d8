"""This replica's part in a cluster (``[cluster] redis_url``): the sessions it holds, the
commands it forwards to other holders, and what arrives for it from the others, reported as
values (app/runtime/clustered.py consumes them and acts; nothing here calls up into it).

    a command (turn, approval, interrupt, delete) for session S, at any replica
    (app/runtime/clustered.py decides; this module leases and carries):
        S's lease free      ──► take it (a new fencing token, claimed in the store), run here
        held by this one    ──► run here
        held by replica R   ──► forward to R through Redis, answer with R's answer

    what arrives, each an async generator its consumer drives:
        commands()   ──► Received   a command forwarded here; ``answer(received, …)`` replies
        losses()     ──► Lost       a session whose lease another replica took
        adoptions()  ──► AdoptionDue  time to adopt the sessions of replicas that died

``losses`` renews the leases held here every third of ``cluster.lease_ttl_s``. A replica that
learns it lost a lease (it was cut off past the TTL and another replica took the session)
stops that session at once; the fencing token keeps it from writing even before it learns.
One whose Redis is unreachable keeps its sessions running (nobody else can take them
meanwhile) and renews when Redis is back. Every ``lease_ttl_s / 3`` each replica also looks
for sessions that are busy in the store but whose lease has expired (their owner died) and
adopts them: ends the in-flight turn once, as ``interrupted`` with reason ``replica_lost``,
and expires its approvals, as a restart does.

Commands travel on a Redis list per replica (``agw:commands:<replica>``, ``BLPOP``), answers
on a list per command (``agw:answer:<id>``), both signed with ``cluster.secret`` and carrying
the key that asked (app/cluster/commands.py): a replica runs a command only as that key, and
refuses (logs, counts, never yields, never answers) one that is unsigned, signed with another
secret, stale or replayed. A command nobody answers within ``cluster.command_timeout_s`` is
``cluster_unavailable``. A command that fails on its owner with an unexpected error is
answered with that error's id only (the owner logs it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from datetime import datetime
from typing import Any

from redis.asyncio import Redis

from app.cluster.commands import (
    Command,
    Inbox,
    Issuer,
    Refused,
    Signer,
    encode_command,
    open_answer,
    seal_answer,
)
from app.cluster.fanout import Fanout
from app.cluster.leases import Holder, Lease, Leases
from app.cluster.redis import REDIS_TIMEOUT_S, cluster_errors, connect
from app.cluster_settings import ClusterSettings
from app.errors import ClusterUnavailable, GatewayError, NotFound, internal_error
from app.store.interface import Storage

log = logging.getLogger(__name__)

DEADLINE_GRACE_S = 5.0
"""Clock skew between replicas tolerated before a forwarded command counts as expired."""

Refusals = Callable[[str], None]
"""Counts a refused command or answer by its reason (a metric)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Received:
    """A forwarded command this replica accepted: signed for it, within the window, never run
    before, not past its deadline. Its ``op`` and ``args`` are a command as
    app/runtime/commands.py encodes it, to run as its ``issuer``."""

    command: Command


@dataclasses.dataclass(frozen=True, kw_only=True)
class Lost:
    """Another replica took over a session held here: nothing may run it here any more."""

    session_id: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class AdoptionDue:
    """Time to look for the sessions of replicas that died, and adopt them."""


class Cluster:
    """Leases, forwarding and adoption for one replica."""

    def __init__(
        self,
        redis: Redis,
        settings: ClusterSettings,
        store: Storage,
        *,
        waiting: Redis | None = None,
        refused: Refusals | None = None,
    ) -> None:
        self.redis = redis
        self._waiting = waiting or connect(str(settings.redis_url), blocking=True)
        """For waiting on answers longer than ``redis``'s read deadline allows."""
        self.settings = settings
        self.replica_id = settings.replica_id
        self.leases = Leases(redis, replica_id=settings.replica_id, ttl_s=settings.lease_ttl_s)
        self.fanout = Fanout(redis)
        self._store = store
        self._held: dict[str, tuple[Lease, int]] = {}
        """Sessions held here: their lease and fencing token."""
        self._closing = False
        self._signer = Signer(settings.signing_secrets())
        self._inbox = Inbox(
            self._signer, replica_id=settings.replica_id, window_s=settings.command_window_s
        )
        self._count_refused = refused

    # --- leases ---------------------------------------------------------------------------

    async def hold(self, session_id: str) -> Holder | None:
        """Take the session's lease unless another replica holds it: None when this replica
        holds it now (claimed in the store under a new fencing token), else who does."""
        if session_id in self._held:
            return None
        return await self._take(session_id)

    async def _take(self, session_id: str) -> Holder | None:
        got = await self.leases.acquire(session_id)
        if isinstance(got, Holder):
            if got.replica_id != self.replica_id:
                return got
            # This replica's id, from an earlier run of it (restarted with the same id).
            got = await self.leases.take_over(session_id, got)
            if isinstance(got, Holder):
                return got
        token = await self._store.claim_session(session_id)
        if token is None:
            await self.leases.release(got)
            raise NotFound(f"session {session_id} does not exist")
        self._held[session_id] = (got, token)
        log.info("holding session %s (fencing token %d)", session_id, token)
        return None

    def token(self, session_id: str) -> int | None:
        """The fencing token this replica writes the session's events under, if it holds it."""
        held = self._held.get(session_id)
        return None if held is None else held[1]

    def holds(self, session_id: str) -> bool:
        return session_id in self._held

    async def let_go(self, session_id: str) -> None:
        """Give the session's lease back (nothing runs it here any more)."""
        held = self._held.pop(session_id, None)
        if held is not None:
            with contextlib.suppress(ClusterUnavailable):  # it expires on its own
                await self.leases.release(held[0])

    async def owner(self, session_id: str) -> str | None:
        """The replica that holds the session now, or None (also when Redis cannot tell)."""
        if session_id in self._held:
            return self.replica_id
        try:
            holder = await self.leases.holder(session_id)
        except ClusterUnavailable:
            return None
        return None if holder is None else holder.replica_id

    # --- commands ---------------------------------------------------------------------------

    async def forward(
        self, replica_id: str, kind: str, fields: Mapping[str, Any], *, issuer: Issuer
    ) -> Any:
        """Run the command ``kind`` with ``fields`` on ``replica_id``, as the key ``issuer``,
        and return its answer, or raise its error."""
        now = time.time()
        command = Command(
            id=secrets.token_hex(16),
            op=kind,
            args=dict(fields),
            issuer=issuer,
            to=replica_id,
            issued_at=now,
            deadline=now + self.settings.command_timeout_s,
        )
        sealed = self._signer.seal("command", encode_command(command, _json_default))
        answer_key = f"agw:answer:{command.id}"
        loop = asyncio.get_running_loop()
        until = loop.time() + self.settings.command_timeout_s
        with cluster_errors():
            await self.redis.rpush(_commands_key(replica_id), sealed)
            await self.redis.expire(_commands_key(replica_id), 3600)
            while (left := until - loop.time()) > 0:
                async with asyncio.timeout(left + REDIS_TIMEOUT_S):
                    reply = await self._waiting.blpop([answer_key], timeout=max(left, 0.01))
                if reply is None:
                    break
                try:
                    body = open_answer(self._signer, command.id, reply[1])
                except Refused as refused:  # not from the owner: wait for the real one
                    self._refused(refused, "an answer to a forwarded command")
                    continue
                if "error" in body:
                    raise error_from(body["error"])
                return body.get("result")
        raise ClusterUnavailable(
            f"replica {replica_id}, which runs this session, did not answer within "
            f"cluster.command_timeout_s ({self.settings.command_timeout_s:g} s); retry",
            retry_after_s=5,
        )

    def _refused(self, refused: Refused, what: str) -> None:
        # Never the content: it may be anyone's, crafted for the log.
        log.warning(
            "refused %s from Redis (%s); it was not acted on",
            what,
            refused.reason,
            extra={"event": "cluster.refused", "reason": refused.reason},
        )
        if self._count_refused is not None:
            self._count_refused(refused.reason)

    async def aclose(self) -> None:
        """Give the leases held here back and disconnect; after whoever consumes ``commands``,
        ``losses`` and ``adoptions`` has stopped."""
        self._closing = True
        for session_id in list(self._held):
            await self.let_go(session_id)
        await self.redis.aclose()
        await self._waiting.aclose()

    async def commands(self) -> AsyncGenerator[Received, None]:
        """The commands forwarded to this replica, as they arrive, each accepted by the
        ``Inbox`` (a refused one is logged, counted and never yielded); answer each with
        ``answer``. Waits out a Redis that cannot be reached; ends when the cluster closes."""
        key = _commands_key(self.replica_id)
        while not self._closing:
            _raise_if_cancelled()
            try:
                with cluster_errors():
                    item = await self.redis.blpop([key], timeout=1)
            except ClusterUnavailable:
                _raise_if_cancelled()
                await asyncio.sleep(1)
                continue
            if item is None:
                continue
            try:
                command = self._inbox.accept(item[1])
            except Refused as refused:
                self._refused(refused, "a forwarded command")
                continue
            if time.time() > command.deadline + DEADLINE_GRACE_S:
                # Its sender gave up long ago (this replica was down): running it now would
                # surprise everyone, a turn started an hour late.
                log.warning("dropped a forwarded %s past its deadline", command.op)
                continue
            yield Received(command=command)

    async def answer(
        self, received: Received, *, result: Any = None, error: Exception | None = None
    ) -> None:
        """Send ``received``'s signed answer to the replica that forwarded it: its ``result``,
        or its ``error`` (an unexpected one as its id only, the rest logged here). An answer
        Redis cannot take is dropped (its sender reports ``cluster_unavailable``)."""
        command = received.command
        if error is None:
            body: dict[str, Any] = {"result": result}
        elif isinstance(error, GatewayError):
            body = {"error": error_body(error)}
        else:  # the caller gets its id, the log here the rest
            body = {"error": error_body(internal_error(log, f"forwarded {command.op}", error))}
        key = f"agw:answer:{command.id}"
        with contextlib.suppress(ClusterUnavailable), cluster_errors():
            await self.redis.rpush(key, seal_answer(self._signer, command.id, body, _json_default))
            await self.redis.expire(key, 60)

    async def losses(self) -> AsyncGenerator[Lost, None]:
        """Renew the leases held here every ``lease_ttl_s / 3``, yielding each session whose
        lease another replica took (no longer held here by then). A Redis that cannot be
        reached keeps them all (nobody else can take them); ends when the cluster closes."""
        period = self.settings.lease_ttl_s / 3
        while not self._closing:
            await asyncio.sleep(period)
            for session_id, held in list(self._held.items()):
                _raise_if_cancelled()
                try:
                    renewed = await self.leases.renew(held[0])
                    if not renewed:  # expired while Redis was away: take it again if free
                        renewed = await self._retake(session_id)
                except ClusterUnavailable:
                    _raise_if_cancelled()
                    continue  # nobody can take it while Redis is away; renew when it is back
                if not renewed and self._held.get(session_id) is held:
                    del self._held[session_id]
                    log.warning("lost session %s to another replica", session_id)
                    yield Lost(session_id=session_id)

    async def _retake(self, session_id: str) -> bool:
        try:
            return await self._take(session_id) is None
        except NotFound:  # deleted meanwhile
            return False

    async def adoptions(self) -> AsyncGenerator[AdoptionDue, None]:
        """Every ``lease_ttl_s / 3``: time to adopt the sessions of replicas that died."""
        period = self.settings.lease_ttl_s / 3
        while not self._closing:
            await asyncio.sleep(period)
            yield AdoptionDue()


def _raise_if_cancelled() -> None:
    """Raise ``CancelledError`` in a task asked to stop: a Redis client can swallow the
    cancellation of a call (it returns nothing, or fails as a connection error), and the loop
    that made it would go on."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _commands_key(replica_id: str) -> str:
    return f"agw:commands:{replica_id}"


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"cannot send {type(value).__name__} to another replica")


def error_body(error: GatewayError) -> dict[str, Any]:
    return {
        "status": error.status,
        "type": error.type,
        "title": error.title,
        "detail": error.detail,
        "retry_after_s": error.retry_after_s,
        "fields": error.fields,
    }


def error_from(body: Mapping[str, Any]) -> GatewayError:
    """The error another replica raised, as the same class (by its ``type``) here."""
    key = (str(body.get("type")), int(body.get("status", 500)))
    cls = _error_types().get(key, GatewayError)
    fields = body.get("fields") or {}
    error = cls(str(body.get("detail", "")), retry_after_s=body.get("retry_after_s"), **fields)
    if cls is GatewayError:
        error.status = int(body.get("status", 500))
        error.type = str(body.get("type", "internal"))
        error.title = str(body.get("title", "Internal error"))
    return error


def _error_types() -> dict[tuple[str, int], type[GatewayError]]:
    found: dict[tuple[str, int], type[GatewayError]] = {}
    pending: list[type[GatewayError]] = [GatewayError]
    while pending:
        cls = pending.pop()
        found.setdefault((cls.type, cls.status), cls)
        pending += cls.__subclasses__()
    return found
