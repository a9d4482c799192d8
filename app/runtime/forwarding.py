"""Commands one replica forwards to the replica that holds their session, through Redis, each
with exactly one outcome: it ran and its answer comes back, or it did not run and the sender
says so.

    sender                                             holder R
    RPUSH agw:commands:R  (signed command, id C)  ──►  BLPOP; Inbox accepts it
                                                       SET agw:cmd:C running NX  (else: it was
                                                           cancelled: never run)
                                                       run it
    BLPOP agw:answer:C  ◄── RPUSH (signed answer)  ◄── SET agw:cmd:C <signed answer> XX
    every second without an answer: GET agw:cmd:C
        the answer                   ──► taken from there (the answer list was lost)
        nothing, R silent for the TTL ──► SET agw:cmd:C cancelled NX ─► ``OwnerGone``: the
                                         session is adopted here and the command runs here
    at ``cluster.command_timeout_s``:
        nothing                      ──► SET agw:cmd:C cancelled NX ─► 503, it did not run
        running                      ──► 503 saying it may have run (R died running it)

``agw:cmd:C`` is set only with ``NX`` by whichever comes first, the holder starting the
command or its sender giving up on it, so a command never runs after its sender answered that
it did not, and a lost answer (a connection cut, a list deleted) is found again. A command
that fails on its holder with an unexpected error is answered with that error's id only (the
holder logs it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

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
from app.cluster.redis import REDIS_TIMEOUT_S, cluster_errors
from app.errors import ClusterUnavailable, GatewayError, internal_error
from app.observability.metrics import GatewayMetrics
from app.observability.tracing import OFF, Tracer

log = logging.getLogger(__name__)

T = TypeVar("T")

DEADLINE_GRACE_S = 5.0
"""Clock skew between replicas tolerated before a forwarded command counts as expired."""
CHECK_S = 1.0
"""How often a sender waiting for an answer looks at the command's state (and its holder)."""
RUNNING = b"running"
CANCELLED = b"cancelled"

Refusals = Callable[[str], None]
"""Counts a refused command or answer by its reason (a metric)."""
Alive = Callable[[str], Awaitable[bool]]
"""Whether a replica has sent a heartbeat within the TTL (False also when it cannot be told)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Received:
    """A forwarded command this replica accepted: signed for it, within the window, never run
    before, not past its deadline, not cancelled by its sender. Its ``op`` and ``args`` are a
    command as app/runtime/commands.py encodes it, to run as its ``issuer``."""

    command: Command


class OwnerGone(Exception):
    """The replica a command was forwarded to has stopped sending heartbeats and never started
    it; it never will (cancelled): the sender may adopt the session and run it itself."""

    def __init__(self, replica_id: str) -> None:
        super().__init__(f"replica {replica_id} stopped sending heartbeats")
        self.replica_id = replica_id


class Forwarder:
    """The signed command transport of one replica."""

    def __init__(
        self,
        redis: Redis,
        waiting: Redis,
        *,
        replica_id: str,
        signing_secrets: list[bytes],
        window_s: float,
        timeout_s: float,
        alive: Alive,
        refused: Refusals | None = None,
        metrics: GatewayMetrics | None = None,
        tracer: Tracer = OFF,
    ) -> None:
        self._redis = redis
        self._tracer = tracer
        """A forwarded command carries the span that sent it (``Command.trace``)."""
        self._waiting = waiting
        """For waiting on answers longer than ``redis``'s read deadline allows."""
        self._replica_id = replica_id
        self._signer = Signer(signing_secrets)
        self._inbox = Inbox(self._signer, replica_id=replica_id, window_s=window_s)
        self._window_ms = round(window_s * 1000)
        self._timeout_s = timeout_s
        self._alive = alive
        self._count_refused = refused
        self._metrics = metrics
        self.closing = False

    # --- sending ------------------------------------------------------------------------------

    async def forward(
        self, replica_id: str, kind: str, fields: Mapping[str, Any], *, issuer: Issuer
    ) -> Any:
        """Run the command ``kind`` with ``fields`` on ``replica_id``, as the key ``issuer``:
        its answer, or its error raised; ``OwnerGone`` when that replica died before it began."""
        attributes = {"gateway.command": kind, "gateway.replica": replica_id}
        with self._tracer.span(f"forward {kind}", attributes, kind="client"):
            return await self._forward_counted(replica_id, kind, fields, issuer=issuer)

    async def _forward_counted(
        self, replica_id: str, kind: str, fields: Mapping[str, Any], *, issuer: Issuer
    ) -> Any:
        began = time.monotonic()
        try:
            result = await self._forward(replica_id, kind, fields, issuer=issuer)
        except _Answered as answered:
            self._count(kind, "error")
            raise answered.error from None
        except OwnerGone:
            self._count(kind, "owner_gone")
            raise
        except ClusterUnavailable as exc:
            self._count(kind, "not_run" if exc.fields.get("ran") is False else "unconfirmed")
            raise
        self._count(kind, "answered")
        if self._metrics is not None:
            self._metrics.cluster_forward_seconds.labels(op=kind).observe(time.monotonic() - began)
        return result

    async def _forward(
        self, replica_id: str, kind: str, fields: Mapping[str, Any], *, issuer: Issuer
    ) -> Any:
        now = time.time()
        command = Command(
            id=secrets.token_hex(16),
            op=kind,
            args=dict(fields),
            issuer=issuer,
            to=replica_id,
            issued_at=now,
            deadline=now + self._timeout_s,
            trace=self._tracer.inject(),
        )
        sealed = self._signer.seal("command", encode_command(command, _json_default))
        loop = asyncio.get_running_loop()
        until = loop.time() + self._timeout_s
        await _again_once(lambda: self._push(replica_id, sealed))
        while (left := until - loop.time()) > 0:
            reply = await self._wait_answer(command.id, min(left, CHECK_S))
            if reply is None:
                state = await self._state(command.id)
                if state is None and not await self._alive(replica_id):
                    if await self._cancel(command.id):
                        raise OwnerGone(replica_id)
                    continue
                if state in (None, RUNNING, CANCELLED):
                    continue
                reply = state
            try:
                body = open_answer(self._signer, command.id, reply)
            except Refused as refused:  # not from the holder: wait for the real one
                self._refused(refused, "an answer to a forwarded command")
                continue
            return _result(body)
        if await self._cancel(command.id):
            raise ClusterUnavailable(
                f"replica {replica_id}, which runs this session, did not take the command "
                f"within cluster.command_timeout_s ({self._timeout_s:g} s); it did not run: "
                "retry",
                retry_after_s=5,
                ran=False,
            )
        state = await self._state(command.id)
        if state not in (None, RUNNING, CANCELLED):
            return _result(open_answer(self._signer, command.id, state))
        raise ClusterUnavailable(
            f"replica {replica_id}, which runs this session, began the command but did not "
            f"answer within cluster.command_timeout_s ({self._timeout_s:g} s); it may have run: "
            "look at the session before you retry",
            retry_after_s=5,
        )

    async def _push(self, replica_id: str, sealed: bytes) -> None:
        # Pushed twice when the first push's reply was lost: the holder's Inbox refuses the
        # second as a replay.
        with cluster_errors():
            await self._redis.rpush(_commands_key(replica_id), sealed)
            await self._redis.expire(_commands_key(replica_id), 3600)

    async def _wait_answer(self, command_id: str, timeout_s: float) -> bytes | None:
        """The answer pushed for the command within ``timeout_s``, or None (also when the
        wait's connection broke: the command's state holds the answer too)."""
        try:
            with cluster_errors():
                async with asyncio.timeout(timeout_s + REDIS_TIMEOUT_S):
                    reply = await self._waiting.blpop(
                        [f"agw:answer:{command_id}"], timeout=max(timeout_s, 0.01)
                    )
        except ClusterUnavailable:
            _raise_if_cancelled()
            await asyncio.sleep(min(timeout_s, CHECK_S / 4))  # a Redis away answers at once
            return None
        return None if reply is None else _bytes(reply[1])

    async def _state(self, command_id: str) -> bytes | None:
        """What the command's state key says: running, cancelled, its signed answer, or None
        (nobody took it yet, or Redis cannot be reached)."""
        try:
            with cluster_errors():
                value = await self._redis.get(_state_key(command_id))
        except ClusterUnavailable:
            return None
        return None if value is None else _bytes(value)

    async def _cancel(self, command_id: str) -> bool:
        """Make sure the command never runs, unless its holder has begun it: whether it was
        cancelled (False: it had begun, or Redis cannot be reached to tell)."""
        return await self._mark(command_id, CANCELLED)

    async def _mark(self, command_id: str, state: bytes) -> bool:
        """Set the command's state to ``state`` unless it has one: whether this call set it
        (False also when Redis cannot be reached)."""

        async def mark() -> bool:
            with cluster_errors():
                return bool(
                    await self._redis.set(
                        _state_key(command_id), state, nx=True, px=self._window_ms
                    )
                )

        try:
            return await _again_once(mark)
        except ClusterUnavailable:
            return False

    # --- receiving ----------------------------------------------------------------------------

    async def commands(self) -> AsyncGenerator[Received, None]:
        """The commands forwarded to this replica, as they arrive, each accepted by the
        ``Inbox`` (a refused one is logged, counted and never yielded) and begun (none its
        sender has given up on); answer each with ``answer``. Waits out a Redis that cannot
        be reached; ends when the cluster closes."""
        key = _commands_key(self._replica_id)
        while not self.closing:
            _raise_if_cancelled()
            try:
                with cluster_errors():
                    item = await self._redis.blpop([key], timeout=1)
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
            if not await self._begin(command):
                log.info("a forwarded %s was cancelled by its sender; not run", command.op)
                continue
            yield Received(command=command)

    async def _begin(self, command: Command) -> bool:
        # Redis away: its sender cannot be answered either, and reports that it did not run.
        return await self._mark(command.id, RUNNING)

    async def answer(
        self, received: Received, *, result: Any = None, error: Exception | None = None
    ) -> None:
        """Send ``received``'s signed answer to the replica that forwarded it, and keep it in
        the command's state (found there if the answer itself is lost): its ``result``, or its
        ``error`` (an unexpected one as its id only, the rest logged here)."""
        command = received.command
        if error is None:
            body: dict[str, Any] = {"result": result}
        elif isinstance(error, GatewayError):
            body = {"error": error_body(error)}
        else:  # the caller gets its id, the log here the rest
            body = {"error": error_body(internal_error(log, f"forwarded {command.op}", error))}
        sealed = seal_answer(self._signer, command.id, body, _json_default)
        key = f"agw:answer:{command.id}"

        async def send() -> None:
            with cluster_errors():
                async with self._redis.pipeline(transaction=True) as pipe:
                    pipe.set(_state_key(command.id), sealed, xx=True, px=self._window_ms)
                    pipe.rpush(key, sealed)
                    pipe.expire(key, 60)
                    await pipe.execute()

        try:
            await _again_once(send)
        except ClusterUnavailable:
            log.warning("could not answer a forwarded %s: Redis cannot be reached", command.op)

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

    def _count(self, op: str, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.cluster_forwarded.labels(op=op, outcome=outcome).inc()


async def _again_once(call: Callable[[], Awaitable[T]]) -> T:
    """``call``, made once more when Redis could not be reached: a connection the pool kept
    across a Redis restart fails once and is replaced."""
    try:
        return await call()
    except ClusterUnavailable:
        _raise_if_cancelled()
        return await call()


class _Answered(Exception):
    """The holder ran the command and answered with an error."""

    def __init__(self, error: GatewayError) -> None:
        super().__init__(str(error))
        self.error = error


def _result(body: Mapping[str, Any]) -> Any:
    if "error" in body:
        raise _Answered(error_from(body["error"]))
    return body.get("result")


def _raise_if_cancelled() -> None:
    """Raise ``CancelledError`` in a task asked to stop: a Redis client can swallow the
    cancellation of a call (it returns nothing, or fails as a connection error), and the loop
    that made it would go on."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _commands_key(replica_id: str) -> str:
    return f"agw:commands:{replica_id}"


def _state_key(command_id: str) -> str:
    return f"agw:cmd:{command_id}"


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
