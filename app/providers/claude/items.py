"""What the Claude normalizer hands the provider besides unified event payloads.

Event payloads (``EventData``) go to the session's log as they are; the items defined here
are for the provider to act on: bind the thread, answer or drop control requests, end the
turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from pydantic import JsonValue

from app.events import EventData
from app.providers.items import (
    ApprovalAsked,
    ApprovalWithdrawn,
    QuestionAsked,
    TurnEnded,
    UsageSoFar,
)

__all__ = [
    "ApprovalAsked",
    "ApprovalWithdrawn",
    "ClaudeItem",
    "ControlReply",
    "QuestionAsked",
    "ThreadSeen",
    "TurnEnded",
    "UnsupportedControlRequest",
    "UsageSoFar",
]
# ApprovalAsked, ApprovalWithdrawn, QuestionAsked, TurnEnded and UsageSoFar are every provider's
# (app/providers/items.py).


@dataclass(frozen=True, kw_only=True, slots=True)
class ThreadSeen:
    """The CLI revealed its session id (the gateway's thread id)."""

    thread_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ControlReply:
    """The CLI answered one of the gateway's control requests (initialize, interrupt…)."""

    request_id: str
    ok: bool
    payload: dict[str, JsonValue] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class UnsupportedControlRequest:
    """A CLI request the gateway does not serve; answer with ``protocol.error_response``."""

    request_id: str
    subtype: str


ClaudeItem: TypeAlias = (
    EventData
    | ThreadSeen
    | ApprovalAsked
    | ApprovalWithdrawn
    | QuestionAsked
    | ControlReply
    | UnsupportedControlRequest
    | UsageSoFar
    | TurnEnded
)
