"""What the ACP agent answers with: JSON-RPC errors for refused commands, and the answers of
a turn that ended (``session/prompt``, ``_agentGateway/awaitTurn``)."""

from __future__ import annotations

from typing import Any

from acp import RequestError
from acp.schema import PromptResponse, StopReason

from app.api.acp.endings import TurnFailure, stop_reason
from app.api.acp.options import GATEWAY_META, invalid_params
from app.errors import GatewayError, problem_for
from app.masking import SecretMask
from app.records import SessionRecord, TurnRecord

RESOURCE_NOT_FOUND = -32002


class Refusals:
    """Turns a ``GatewayError`` raised inside it into the JSON-RPC error it answers with."""

    def __init__(self, mask: SecretMask) -> None:
        self._mask = mask

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, GatewayError):
            raise rpc_error(exc, self._mask) from None


def rpc_error(exc: GatewayError, mask: SecretMask) -> RequestError:
    """The JSON-RPC error a refused command answers with."""
    problem = mask.values(problem_for(exc))
    if exc.status == 404:
        code = RESOURCE_NOT_FOUND
    elif 400 <= exc.status < 500 and exc.status != 429:
        code = -32602
    else:
        code = -32603
    return RequestError(code, str(problem.get("detail") or exc.title), problem)


def after_of(meta: dict[str, Any], *, default: int) -> int:
    after = meta.get("after", default)
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise invalid_params({"detail": f"_meta.{GATEWAY_META}.after: a seq (an integer >= 0)"})
    return after


def title_of(row: SessionRecord) -> str | None:
    title = (row.metadata or {}).get("title")
    return title if isinstance(title, str) else None


def prompt_response(reason: StopReason | TurnFailure, turn_id: str, seq: int) -> PromptResponse:
    """What ``session/prompt`` answers for a turn that ended with ``reason`` at ``seq``."""
    if isinstance(reason, TurnFailure):
        raise reason.request_error()
    return PromptResponse(
        stop_reason=reason, field_meta={GATEWAY_META: {"turnId": turn_id, "seq": seq}}
    )


def answer_of(end: dict[str, Any]) -> dict[str, Any]:
    """The result ``session/prompt`` answers for the turn that ``end`` (its end event, in
    its wire form) ended; raises the error of a failed turn."""
    response = prompt_response(stop_reason(end), end["turn_id"], end["seq"])
    return response.model_dump(mode="json", by_alias=True, exclude_none=True)


def ended(turn: TurnRecord) -> dict[str, Any]:
    """The answer to ``awaitTurn`` for a turn that has ended, from its record (when the log
    no longer holds its end)."""
    if turn.status == "failed":
        error = turn.error or {}
        raise RequestError(
            -32603,
            str(error.get("message") or "the turn failed"),
            {"type": "turn_failed", "failure": error},
        )
    reason = "cancelled" if turn.status == "interrupted" else "end_turn"
    return {"stopReason": reason, "_meta": {GATEWAY_META: {"turnId": turn.id}}}
