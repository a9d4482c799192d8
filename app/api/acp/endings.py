"""How a turn's end answers the ``session/prompt`` that started it (pure).

| the turn's end | the answer |
|---|---|
| ``turn.completed`` | ``end_turn``; ``max_tokens`` when the agent stopped at its output limit (Claude Code's and ACP agents' ``max_tokens``, OpenCode's ``length``); ``refusal`` when the model declined (an ACP agent's ``refusal``, Claude's ``refusal``, a provider's content filter); an ACP agent's ``max_turn_requests`` as it is |
| ``turn.interrupted`` | ``cancelled`` |
| ``turn.failed`` | a JSON-RPC error ``-32603`` whose ``data`` is the gateway's problem: ``type``, ``title``, ``detail`` and ``failure`` (the turn's error) |

A failed turn is never a ``refusal``: the failure kinds do not single refusals out (a Codex
policy refusal is an ``agent_error`` like a sandbox error), so it is reported as the failure
it is.
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from acp import RequestError
from acp.schema import StopReason
from pydantic import JsonValue

from app.api.acp.envelopes import EventInput, read_event
from app.errors import PROBLEM_BASE
from app.events import TurnCompletedEvent, TurnError, TurnFailedEvent, TurnInterruptedEvent

__all__ = ["TurnFailure", "stop_reason"]

_STOPS: Mapping[str, StopReason] = {
    "max_tokens": "max_tokens",
    "length": "max_tokens",
    "max_output_tokens": "max_tokens",
    "refusal": "refusal",
    "content_filter": "refusal",
    "content-filter": "refusal",
    "max_turn_requests": "max_turn_requests",
}
"""A completed turn's ``stop_reason`` (as each CLI words it) that is not ``end_turn``."""


@dataclass(frozen=True, kw_only=True)
class TurnFailure:
    """A failed turn, as the JSON-RPC error that answers its ``session/prompt``."""

    CODE: ClassVar[int] = -32603
    TYPE: ClassVar[str] = PROBLEM_BASE + "turn_failed"
    TITLE: ClassVar[str] = "The turn failed"

    turn_id: str | None
    error: TurnError

    @property
    def detail(self) -> str:
        return self.error.message or f"the turn failed ({self.error.kind})"

    def data(self) -> dict[str, JsonValue]:
        """The error's ``data``: the problem document of the failure."""
        return {
            "type": self.TYPE,
            "title": self.TITLE,
            "detail": self.detail,
            "turn_id": self.turn_id,
            "failure": self.error.model_dump(mode="json", exclude_none=True),
        }

    def request_error(self) -> RequestError:
        """The error to raise from the ``session/prompt`` handler."""
        return RequestError(self.CODE, self.detail, self.data())


def stop_reason(event: EventInput) -> StopReason | TurnFailure:
    """How the turn's end ``event`` answers ``session/prompt``; raises ``ValueError`` for an
    event that does not end a turn."""
    match read_event(event):
        case TurnCompletedEvent(data=data):
            return _STOPS.get(data.stop_reason or "", "end_turn")
        case TurnInterruptedEvent():
            return "cancelled"
        case TurnFailedEvent(turn_id=turn_id, data=data):
            return TurnFailure(turn_id=turn_id, error=data.error)
        case other:
            raise ValueError(f"{other.type} does not end a turn")
