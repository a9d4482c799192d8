"""The event stream of a session: SSE, a JSON page, and the WebSocket.

SSE: ``GET /v1/sessions/{id}/events`` with ``Accept: text/event-stream``; each event is one
SSE message whose ``id:`` is its ``seq`` and whose ``data:`` is the envelope. Reconnect with
``Last-Event-ID`` (or ``?after=``) to get exactly what was missed. A closed session's stream
ends after its last event, and a reconnect past the end gets ``204`` (EventSource stops).

WebSocket: ``/v1/sessions/{id}/ws?after=<seq>``; the server sends one envelope per frame,
and answers each client command with an ``ack`` or ``error`` frame (these carry no ``seq``);
app/api/wscommands.py maps each frame to its command and its ``ack``. A dropped connection
never cancels a turn. A WebSocket checks its key again before each command: one rotated away
closes the socket (1008) and the command is not run.

Control frames, never a silent gap: ``resync_required`` (the cursor is older than the events
kept; the stream goes on from the oldest kept one), ``evicted`` (the client fell more than
``limits.subscriber_max_lag_events`` behind, or the key the stream was opened with was
rotated away, reason ``key_retired``, a WebSocket then closed with 1008; the stream ends,
reconnect from ``last_seq_sent``), ``shutdown`` (SSE; WebSockets are then closed with 1012),
``degraded`` (on a replica that does not run the session, Redis cannot be reached: the events
come from the store every ``poll_ms``, later but each once and in order) and ``recovered``
(they come live again); the last two do not end the stream. A JSON page whose cursor is
older than the events kept is ``410 cursor_expired``.
Subscribers are capped per session (429), per key (429 ``key_share_exceeded``:
``limits.max_key_share`` of the cap in all) and in all (503), each with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, Response
from fastapi.sse import KEEPALIVE_COMMENT, EventSourceResponse, format_sse_event
from pydantic import BeforeValidator, Field, TypeAdapter, ValidationError
from starlette.requests import HTTPConnection
from starlette.types import Receive, Scope, Send

from app.api.contract import problems
from app.api.deps import Manager, issuer
from app.api.problems import error_headers
from app.api.schemas import EventPage
from app.api.security import (
    KEY_RETIRED,
    Principal,
    StreamAuthenticated,
    key_still_valid,
    require_ws_token,
    watch_key,
)
from app.api.wscommands import dispatch
from app.api.wsframes import WsClientFrame
from app.errors import GatewayError, Gone, InvalidRequest, problem_for
from app.records import ENDED_SESSION_STATUSES
from app.runtime import reads
from app.runtime.sessions import Sessions
from app.runtime.subscription import (
    DIRECT_WRITER,
    Degraded,
    DirectWrite,
    Evicted,
    LoggedEvent,
    RawWriter,
    Recovered,
    ResyncRequired,
    ShuttingDown,
    StreamItem,
    Subscription,
)

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/sessions", tags=["events"])

MAX_CURSOR = 2**53
WS_EVICTED = 4000
"""WebSocket close code of a subscriber evicted for falling behind; reconnect with ``after``."""
WS_SERVICE_RESTART = 1012
WS_UNSUPPORTED_DATA = 1003
"""Close code for a binary frame: commands are JSON text frames."""
WS_POLICY = 1008
"""Close code of a WebSocket whose key was rotated away: reconnect with a valid key."""
RETIRED_REASON = "the key this connection was opened with is no longer valid; reconnect"
_CURSOR = re.compile(r"[0-9]{1,16}")
"""ASCII digits only: ``str.isdigit`` also accepts other scripts' digits and superscripts."""
_frames: TypeAdapter[WsClientFrame] = TypeAdapter(WsClientFrame)


def _cursor_text(value: object) -> object:
    """Cursor text must be 1 to 16 ASCII digits (``int()`` would also take signs, spaces,
    underscores and other scripts' digits, and an empty one reads as a mistake: leave the
    parameter out to start from the beginning)."""
    if isinstance(value, str) and not _CURSOR.fullmatch(value):
        raise ValueError("must be a non-negative integer (an event seq)")
    return value


Cursor = Annotated[Annotated[int, Field(ge=0, le=MAX_CURSOR)] | None, BeforeValidator(_cursor_text)]
"""A ``Last-Event-ID`` / ``after`` value: an event seq, or nothing (from the start)."""


def parse_cursor(raw: str | None, *, name: str) -> int | None:
    """A ``Last-Event-ID`` / ``after`` value: a non-negative integer, or 422 saying so."""
    if raw is None:
        return None
    if not _CURSOR.fullmatch(raw) or int(raw) > MAX_CURSOR:
        raise InvalidRequest(
            f"{name} must be a non-negative integer (an event seq)", value=raw[:40]
        )
    return int(raw)


async def _checked_cursor(manager: Sessions, session_id: str, cursor: int) -> int:
    last = await manager.events.last_seq(session_id)
    if cursor > last:
        raise InvalidRequest(
            f"cursor {cursor} is past the newest event of this session ({last}); "
            "resume from a seq you received",
            last_seq=last,
        )
    return last


@router.get(
    "/{session_id}/events",
    operation_id="getEvents",
    response_model=EventPage,
    responses={
        200: {
            "description": "A JSON page of events, or with `Accept: text/event-stream` an SSE "
            "stream whose messages carry one `Event` each",
            "content": {
                "text/event-stream": {
                    "schema": {
                        "type": "string",
                        "description": "SSE messages: `id` is the event's seq, `data` one Event "
                        "envelope (the items of EventPage.events); named messages "
                        "`resync_required`, `evicted`, `shutdown`, `degraded` and `recovered` "
                        "are control frames",
                    }
                },
            },
        },
        204: {"description": "The session is closed and the cursor is at its last event"},
        **problems(
            notes={
                404: "No such session (or not yours)",
                410: "The cursor is older than the events kept (`first_seq` is the oldest "
                "kept one)",
                422: "Invalid request, or a cursor past the session's newest event",
                429: "The session has its maximum of subscribers, this key holds its share "
                "of the gateway's subscribers (`key_share_exceeded`), or too many failed "
                "authentications from this address (see Retry-After)",
                503: "The gateway has its maximum of subscribers (for a key that is not an "
                "admin key: all but the admin reserve), or the database cannot be read now "
                "(see Retry-After)",
            }
        ),
    },
)
async def get_events(
    session_id: str,
    request: Request,
    manager: Manager,
    principal: StreamAuthenticated,
    after: Annotated[Cursor, Query(description="Return events with seq > after")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    last_event_id: Annotated[
        Cursor,
        Header(alias="Last-Event-ID", description="Like `after`; it wins when both are sent"),
    ] = None,
) -> Response:
    """Events after a cursor: a JSON page, or with ``Accept: text/event-stream`` a live SSE
    stream (browsers' EventSource may send the key as ``?access_token=``). A page holds up to
    ``limit`` events, fewer where it would pass ``limits.max_page_bytes`` (at least one):
    continue with ``after`` = ``next_after`` while it is below ``last_seq``."""
    row = await manager.get(session_id, owner=principal.owner_filter)
    cursor = last_event_id if last_event_id is not None else after or 0
    last = await _checked_cursor(manager, session_id, cursor)
    if "text/event-stream" not in request.headers.get("accept", ""):
        length = await reads.event_page_length(manager, session_id, after=cursor, limit=limit)
        page = await manager.events.page(session_id, after=cursor, limit=length or limit)
        _check_kept(page, cursor, last)
        next_after = page[-1].seq if page else cursor
        # Events stored while the page was read are in it: last_seq is never behind it.
        last = max(last, next_after)
        body = (
            '{"events":['
            + ",".join(e.json for e in page)
            + f'],"next_after":{next_after},"last_seq":{last}}}'
        )
        return Response(body, media_type="application/json")
    ended = row.status in ENDED_SESSION_STATUSES
    if ended:
        await manager.events.close(session_id)
        if cursor >= last:
            return Response(status_code=204)
    keepalive = request.app.state.settings.server.sse_keepalive_s
    subscription = await manager.events.open(
        session_id,
        after=cursor,
        heartbeat_s=keepalive,
        transport="sse",
        holder=issuer(principal),
    )
    return SubscriptionResponse(
        _sse(subscription, request.scope.get("extensions", {}).get(DIRECT_WRITER)),
        subscription,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _check_kept(page: list[LoggedEvent], cursor: int, last: int) -> None:
    """410 when events right after the cursor were pruned: a page never skips silently."""
    first = page[0].seq if page else last + 1
    if first > cursor + 1 and (page or cursor < last):
        raise Gone(
            f"events after {cursor} are no longer kept (storage.max_events_per_session); the "
            f"oldest kept event is {first}: reload the session's state, then continue with "
            f"after={first - 1}",
            first_seq=first,
            after=cursor,
        )


class SubscriptionResponse(EventSourceResponse):
    """An SSE response that gives its subscriber slot back however the response ends, and
    ends when the key it was opened with stops being valid (also the ``POST /v1/runs``
    stream's)."""

    def __init__(
        self, content: AsyncIterator[bytes], subscription: Subscription, **kwargs: Any
    ) -> None:
        super().__init__(content, **kwargs)
        self._subscription = subscription

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A stream opened with a key that is rotated away ends (``evicted``, key_retired).
        unwatch = watch_key(HTTPConnection(scope), lambda: self._subscription.end(KEY_RETIRED))
        try:
            await super().__call__(scope, receive, send)
        finally:
            unwatch()
            self._subscription.release()


def _control(kind: str, **fields: int | str) -> str:
    return json.dumps({"type": kind, **fields}, separators=(",", ":"))


async def _sse(subscription: Subscription, writer: RawWriter | None) -> AsyncIterator[bytes]:
    yield format_sse_event(comment="connected", retry=2000)
    if writer is not None:  # the response is streaming now: live events may go straight out
        frame = writer.frame
        subscription.write_directly(
            DirectWrite(writer, lambda events: frame(b"".join(e.sse for e in events)))
        )
    async for batch in subscription.batches():  # one write for whatever is ready
        yield b"".join(sse_message(item) for item in batch)


def sse_message(item: StreamItem) -> bytes:
    """One stream item on the wire: an event, a named control frame, or a keep-alive."""
    match item:
        case None:
            return KEEPALIVE_COMMENT
        case LoggedEvent():
            return item.sse
        case ResyncRequired(first_seq=first, after=after):
            # The id moves the client's Last-Event-ID past the gap it was told about.
            data = _control("resync_required", first_seq=first, after=after)
            return format_sse_event(event="resync_required", data_str=data, id=str(first - 1))
        case Evicted(last_seq_sent=sent, reason=reason):
            data = _control("evicted", last_seq_sent=sent, reason=reason)
            return format_sse_event(event="evicted", data_str=data)
        case ShuttingDown(retry_ms=retry_ms):
            data = _control("shutdown", reason="gateway_shutdown", retry_ms=retry_ms)
            return format_sse_event(event="shutdown", data_str=data, retry=retry_ms)
        case Degraded() | Recovered():
            return format_sse_event(event=_notice_name(item), data_str=_notice(item))


def _notice_name(notice: Degraded | Recovered) -> str:
    return "degraded" if isinstance(notice, Degraded) else "recovered"


def _notice(notice: Degraded | Recovered) -> str:
    """A ``degraded`` or ``recovered`` control frame's JSON (the same on SSE and WebSocket)."""
    if isinstance(notice, Degraded):
        return _control("degraded", reason=notice.reason, poll_ms=notice.poll_ms)
    return _control("recovered")


@router.websocket("/{session_id}/ws", name="session_ws")
async def session_ws(
    websocket: WebSocket,
    session_id: str,
    after: str | None = None,
) -> None:
    manager: Sessions = websocket.app.state.manager
    try:
        principal = await require_ws_token(websocket)
        await manager.get(session_id, owner=principal.owner_filter)
        cursor = parse_cursor(after, name="after") or 0
        await _checked_cursor(manager, session_id, cursor)
        subscription = await manager.events.open(
            session_id, after=cursor, transport="ws", holder=issuer(principal)
        )
    except GatewayError as exc:
        log.info(
            "refused websocket for session %s: %s (%d)",
            session_id[:64],
            exc.type,
            exc.status,
            extra={"event": "websocket.refused"},
        )
        await websocket.send_denial_response(
            JSONResponse(
                problem_for(exc),
                status_code=exc.status,
                media_type="application/problem+json",
                headers=error_headers(exc),
            )
        )
        return
    try:
        await websocket.accept()
        writer: RawWriter | None = websocket.scope.get("extensions", {}).get(DIRECT_WRITER)
        if writer is not None:
            frame = writer.frame
            subscription.write_directly(
                DirectWrite(writer, lambda events: b"".join(frame(e.utf8) for e in events))
            )
        sender = asyncio.create_task(_send_events(websocket, subscription))
        unwatch = watch_key(websocket, lambda: subscription.end(KEY_RETIRED))
        try:
            await _receive_commands(websocket, manager, session_id, principal)
        except WebSocketDisconnect:
            pass
        finally:
            unwatch()
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
    finally:
        subscription.release()


async def _send_events(websocket: WebSocket, subscription: Subscription) -> None:
    async for item in subscription:
        match item:
            case LoggedEvent(json=envelope):
                await websocket.send_text(envelope)
            case ResyncRequired(first_seq=first, after=after):
                await websocket.send_text(_control("resync_required", first_seq=first, after=after))
            case Evicted(last_seq_sent=sent, reason=reason):
                await websocket.send_text(_control("evicted", last_seq_sent=sent, reason=reason))
                if reason == KEY_RETIRED:
                    await websocket.close(code=WS_POLICY, reason=RETIRED_REASON)
                else:
                    await websocket.close(code=WS_EVICTED, reason=f"evicted ({reason}); reconnect")
                return
            case ShuttingDown(retry_ms=retry_ms):
                await websocket.send_text(
                    _control("shutdown", reason="gateway_shutdown", retry_ms=retry_ms)
                )
                await websocket.close(code=WS_SERVICE_RESTART, reason="gateway shutting down")
                return
            case Degraded() | Recovered():
                await websocket.send_text(_notice(item))
    await websocket.close(code=1000, reason="session closed")


async def _receive_commands(
    websocket: WebSocket, manager: Sessions, session_id: str, principal: Principal
) -> None:
    limit = websocket.app.state.settings.server.ws_max_message_bytes
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            raise WebSocketDisconnect(message.get("code", 1000))
        text = message.get("text")
        if text is None:  # a binary frame: commands are JSON text
            await websocket.close(
                code=WS_UNSUPPORTED_DATA, reason="send commands as JSON in text frames"
            )
            return
        if len(text) > limit:
            await _send_error(
                websocket, None, InvalidRequest(f"frames are limited to {limit} bytes")
            )
            continue
        try:
            # Decoded like a request body (json.loads), so text that is not valid Unicode is
            # refused by the frame's own validator, which names the field (app/api/text.py).
            frame = _frames.validate_python(json.loads(text))
        except (json.JSONDecodeError, RecursionError) as exc:
            why = "nests too deeply" if isinstance(exc, RecursionError) else f"is not JSON ({exc})"
            await _send_error(websocket, None, InvalidRequest(f"invalid frame: the frame {why}"))
            continue
        except ValidationError as exc:
            detail = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'frame'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            await _send_error(websocket, None, InvalidRequest(f"invalid frame: {detail}"))
            continue
        if not key_still_valid(websocket):  # rotated away since the socket opened
            log.info("closing a websocket of session %s: its key was rotated away", session_id)
            await websocket.close(code=WS_POLICY, reason=RETIRED_REASON)
            return
        try:
            reply = await dispatch(websocket, manager, session_id, frame, principal)
        except GatewayError as exc:
            await _send_error(websocket, frame.type, exc)
            continue
        await websocket.send_text(json.dumps({"type": "ack", "request": frame.type, **reply}))


async def _send_error(websocket: WebSocket, request: str | None, exc: GatewayError) -> None:
    shown = websocket.app.state.mask.values(problem_for(exc))  # a problem may quote a secret
    await websocket.send_text(json.dumps({"type": "error", "request": request, "problem": shown}))
