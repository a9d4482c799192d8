"""What a provider's normalizer hands its turn besides event payloads, for every provider.

Event payloads (``EventData``) go to the session's log as they are; these are for the turn to
act on: ask the client about a tool call, stop asking, report what the turn used so far, end
the turn. A provider adds its own
where its CLI has more to say (Claude Code's control requests and replies).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import JsonValue

from app.events import Usage
from app.providers.base import ApprovalRequest, QuestionRequest, TurnOutcome

__all__ = ["ApprovalAsked", "ApprovalWithdrawn", "QuestionAsked", "TurnEnded", "UsageSoFar"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalAsked:
    """The CLI waits for an answer to ``request`` (``TurnLoop.ask``)."""

    request: ApprovalRequest
    suggestions: list[JsonValue] = field(default_factory=list)
    """Claude Code's ``permission_suggestions``, for an "allow for session" answer."""


@dataclass(frozen=True, kw_only=True, slots=True)
class QuestionAsked:
    """The agent waits for the user's answers to ``request`` (``TurnLoop.ask_question``)."""

    request: QuestionRequest
    input: dict[str, JsonValue] = field(default_factory=dict)
    """The tool's input as the CLI sent it (Claude Code takes it back with the answers)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalWithdrawn:
    """The CLI no longer waits for an answer to ``request_id`` (an approval or a question: it
    cancelled the request, or someone else answered it): stop asking (``TurnLoop.withdraw``)."""

    request_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnEnded:
    """The CLI ended the turn; the session goes on for the next one."""

    outcome: TurnOutcome
    thread_id: str | None = None
    """The thread the CLI reported with its end, when it does (Claude Code's ``session_id``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageSoFar:
    """What the running attempt has used so far, as the CLI said during it (each model
    response): for ``TurnHooks.report_usage``, never an event of its own."""

    usage: Usage
