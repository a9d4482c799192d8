"""``POST /v1/runs``: one prompt, one answer, failing over along the chain with a hand-off.

With ``Accept: text/event-stream`` the answer is the run session's event stream, a subscriber
like ``GET /v1/sessions/{id}/events``: capped (429 per session, 503 in all, checked before the
session is created), and ended visibly by the ``evicted`` and ``shutdown`` control frames
(``resync_required`` where events were pruned). An evicted client resumes on
``GET /v1/sessions/{session_id}/events`` with ``Last-Event-ID``; the run goes on meanwhile.

With ``Idempotency-Key`` (app/api/idempotency.py) a run sent again gets the first answer: the
result, once the run has ended (409 while it runs); a streamed run's events again from its
first (the key is kept as soon as the run has started).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, StringConstraints

from app.api.contract import links, problems
from app.api.deps import Manager, admit_session, issuer
from app.api.events import SubscriptionResponse, sse_message
from app.api.idempotency import (
    IN_FLIGHT,
    REPLAY_HEADERS,
    REPLAYED,
    REUSED,
    IdempotencyKey,
    begin,
    finish,
    once,
)
from app.api.schemas import SessionOptions, TurnStatus
from app.api.security import Authenticated, Principal
from app.errors import GatewayError
from app.events import TERMINAL_TURN_EVENTS, TurnError, Usage
from app.runtime.commands import Close
from app.runtime.idempotency import Stored
from app.runtime.runs import Run, start_run
from app.runtime.sessions import Sessions
from app.runtime.subscription import LoggedEvent, ResyncRequired, Subscription

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/runs", tags=["runs"])
SSE = "text/event-stream"


class RunCreate(SessionOptions):
    prompt: Annotated[str, StringConstraints(min_length=1, max_length=512 * 1024)]


class ProviderSwitch(BaseModel):
    from_provider: str
    to_provider: str
    reason: str


class RunResult(BaseModel):
    session_id: str
    turn_id: str
    provider: str
    status: TurnStatus
    attempts: int
    final_text: str | None
    usage: Usage | None
    error: TurnError | None
    switches: list[ProviderSwitch]


def _result(run: Run) -> RunResult:
    turn = run.turn
    assert turn is not None
    return RunResult(
        session_id=run.session.id,
        turn_id=turn.id,
        provider=run.session.provider,
        status=turn.status,
        attempts=turn.attempts,
        final_text=turn.final_text,
        usage=Usage.model_validate(turn.usage) if turn.usage else None,
        error=TurnError.model_validate(turn.error) if turn.error else None,
        switches=[
            ProviderSwitch(from_provider=s["from"], to_provider=s["to"], reason=s["reason"])
            for s in run.switches
        ],
    )


@router.post(
    "",
    operation_id="createRun",
    response_model=RunResult,
    responses={
        200: {
            "description": "The result, or with `Accept: text/event-stream` the run's events "
            "as SSE, like `GET /v1/sessions/{id}/events` (the stream ends after the run's last "
            "event, or with an `evicted` or `shutdown` control frame)",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
            **links("getSession", "getEvents", "listTurns", session_id="session_id"),
            **REPLAY_HEADERS,
        },
        **problems(
            notes={
                409: f"A run with this Idempotency-Key {IN_FLIGHT}",
                422: "Invalid request: a workspace outside the roots or missing, an unknown "
                "provider or capability, an approval mode or retry strategy not enabled, a "
                f"usage-limit wait above the gateway's ceiling; or {REUSED}",
                429: "The key's budget for this day or month is spent (`key_budget_exceeded`), "
                "creation rate or open-session cap of this key reached, this key's share "
                "of the live processes or (SSE) subscribers (`key_share_exceeded`), (SSE) the "
                "session's subscriber cap, or too many failed authentications from this "
                "address (see Retry-After)",
                503: "No provider available, every live-process or (SSE) subscriber slot is "
                "taken, or the database cannot be written now (see Retry-After)",
            }
        ),
    },
)
async def create_run(
    body: RunCreate,
    request: Request,
    manager: Manager,
    principal: Authenticated,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Select a provider, run one turn; a provider that fails for good hands over to the next."""
    streaming = "text/event-stream" in request.headers.get("accept", "")
    asked = {"request": "createRun", "stream": streaming, "body": body.model_dump(mode="json")}
    if not streaming:

        async def produce() -> RunResult:
            async with admit_session(request, manager, principal):
                run = await start_run(
                    manager, body.session_request(owner=principal.name), body.prompt
                )
            await run.finish()
            return _result(run)

        answered = await once(
            manager,
            principal,
            idempotency_key,
            request="createRun",
            asked=asked,
            status=200,
            produce=produce,
        )
        return answered.response()
    claim = None
    if idempotency_key is not None:
        begun = await begin(manager, principal, idempotency_key, request="createRun", asked=asked)
        if isinstance(begun, Stored):  # the same run's events again, from its start
            return await _replay(manager, principal, begun, request)
        claim = begun
    try:
        # Refused before any session is created or CLI started.
        manager.events.check_capacity(issuer(principal))
        async with admit_session(request, manager, principal):
            run = await start_run(manager, body.session_request(owner=principal.name), body.prompt)
        keepalive = request.app.state.settings.server.sse_keepalive_s
        subscription = await _subscribe(run, principal, heartbeat_s=min(keepalive, 1.0))
    except BaseException:
        if claim is not None:
            await claim.release()
        raise
    if claim is not None:
        kept = json.dumps({"session_id": run.session.id})
        await finish(claim, Stored(status=200, media_type=SSE, body=kept))
    task = asyncio.create_task(run.finish(), name=f"run:{run.session.id}")
    task.add_done_callback(_log_failure)
    return SubscriptionResponse(
        _stream(run, task, subscription),
        subscription,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _replay(
    manager: Sessions, principal: Principal, kept: Stored, request: Request
) -> Response:
    """A streamed run sent again with its key: its session's events from the first, live
    while the run goes on, until its turn's end."""
    session_id = json.loads(kept.body)["session_id"]
    manager.events.check_capacity(issuer(principal))
    keepalive = request.app.state.settings.server.sse_keepalive_s
    subscription = await manager.events.open(
        session_id,
        after=0,
        heartbeat_s=min(keepalive, 1.0),
        transport="runs",
        holder=issuer(principal),
    )
    return SubscriptionResponse(
        _until_turn_end(subscription),
        subscription,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", REPLAYED: "true"},
    )


async def _until_turn_end(subscription: Subscription) -> AsyncIterator[bytes]:
    try:
        async for item in subscription:
            yield sse_message(item)
            if isinstance(item, LoggedEvent) and item.type in TERMINAL_TURN_EVENTS:
                break
    finally:
        with contextlib.suppress(Exception):
            await subscription.aclose()


async def _subscribe(run: Run, principal: Principal, *, heartbeat_s: float) -> Subscription:
    """The stream's subscription; if it is refused, the new session is closed again (no turn
    has started in it): another stream took the last slot, or shutdown began, meanwhile."""
    try:
        return await run.manager.events.open(
            run.session.id,
            after=0,
            heartbeat_s=heartbeat_s,
            transport="runs",
            holder=issuer(principal),
        )
    except GatewayError:
        try:
            await run.manager.execute(Close(session_id=run.session.id), issuer(principal))
        except GatewayError:
            log.warning("could not close session %s of a refused run stream", run.session.id)
        raise


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("run %s failed inside the gateway", task.get_name(), exc_info=task.exception())


def _over(run: Run, task: asyncio.Task[Any]) -> bool:
    """The run has ended, so its stream ends once its last event was sent. A run that the
    gateway's shutdown stopped is not: its stream goes on to the ``shutdown`` frame."""
    if not task.done():
        return False
    return task.cancelled() or task.exception() is not None or not run.ended_by_shutdown


async def _stream(
    run: Run, task: asyncio.Task[Any], subscription: Subscription
) -> AsyncIterator[bytes]:
    """The session's events and control frames until the run has ended and its last event
    was sent; ``evicted`` and ``shutdown`` end it earlier."""
    events = run.manager.events
    cursor = 0
    try:
        async for item in subscription:
            match item:
                case LoggedEvent(seq=seq):
                    cursor = seq
                case ResyncRequired(first_seq=first):
                    cursor = first - 1
            if item is not None or not task.done():
                yield sse_message(item)
            if _over(run, task) and cursor >= await events.last_seq(run.session.id):
                break
    finally:
        with contextlib.suppress(Exception):
            await subscription.aclose()
        # A client that leaves does not cancel the run: the turn goes on, as for sessions.
