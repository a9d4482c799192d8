"""``POST /v1/runs``: one prompt, one answer, with fallback before any output."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from fastapi.sse import KEEPALIVE_COMMENT, EventSourceResponse, format_sse_event
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.api.deps import Manager, admit_session
from app.api.schemas import ModelName, Problem, RetryPolicyIn, TurnStatus
from app.api.security import Authenticated
from app.events import TurnError, Usage
from app.providers.base import ApprovalMode
from app.runtime.runs import Run, start_run

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/runs", tags=["runs"])


class RunCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt: Annotated[str, StringConstraints(min_length=1, max_length=512 * 1024)]
    workspace: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    provider: Annotated[str, StringConstraints(max_length=64)] | None = None
    scenario: Annotated[str, StringConstraints(max_length=64)] | None = None
    model: ModelName | None = None
    approval_mode: ApprovalMode | None = None
    retry: RetryPolicyIn | None = None
    requires: list[Annotated[str, StringConstraints(max_length=64)]] = Field(
        default=[], max_length=16
    )


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
            "as SSE (the stream ends after the run's last event)",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        401: {"model": Problem},
        422: {"model": Problem},
        429: {"model": Problem},
        503: {"model": Problem},
    },
)
async def create_run(
    body: RunCreate, request: Request, manager: Manager, principal: Authenticated
) -> Response:
    """Select a provider, run one turn; before any output, fall back along the chain."""
    async with admit_session(request, manager, principal):
        run = await start_run(
            manager,
            workspace=body.workspace,
            prompt=body.prompt,
            provider=body.provider,
            scenario=body.scenario,
            model=body.model,
            approval_mode=body.approval_mode,
            retry=body.retry.model_dump(exclude_none=True) if body.retry else None,
            requires=body.requires,
            owner=principal.name,
        )
    if "text/event-stream" not in request.headers.get("accept", ""):
        await run.finish()
        return Response(_result(run).model_dump_json(), media_type="application/json")
    task = asyncio.create_task(run.finish(), name=f"run:{run.session.id}")
    task.add_done_callback(_log_failure)
    keepalive = request.app.state.settings.server.sse_keepalive_s
    return EventSourceResponse(_stream(run, task, keepalive), headers={"Cache-Control": "no-cache"})


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("run %s failed inside the gateway", task.get_name(), exc_info=task.exception())


async def _stream(run: Run, task: asyncio.Task[Any], keepalive: float) -> AsyncIterator[bytes]:
    """The session's events until the run has ended and its last event was sent."""
    events = run.manager.events
    subscription = events.subscribe(run.session.id, after=0, heartbeat_s=min(keepalive, 1.0))
    cursor = 0
    try:
        async for event in subscription:
            if event is not None:
                cursor = event.seq
                yield format_sse_event(data_str=event.json, id=str(event.seq))
            elif not task.done():
                yield KEEPALIVE_COMMENT
            if task.done() and cursor >= await events.last_seq(run.session.id):
                break
    finally:
        with contextlib.suppress(Exception):
            await subscription.aclose()  # type: ignore[attr-defined]
        # A client that leaves does not cancel the run: the turn goes on, as for sessions.
