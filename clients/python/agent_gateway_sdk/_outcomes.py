"""What ``run()`` works with: how a callback answers an approval or a question, and what a
finished turn hands back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast, get_args

from agent_gateway_sdk.events import (
    TURN_END_TYPES,
    ApprovalRequestedEvent,
    Event,
    MessageCompletedEvent,
    MessageDeltaEvent,
    QuestionAskedEvent,
)
from agent_gateway_sdk.models import Answer, Decision, Turn, TurnError, TurnStatus


@dataclass(frozen=True, kw_only=True)
class ApprovalAnswer:
    """An approval callback's answer with more than a decision: a message to the agent
    (with ``deny``), or the tool's input edited (with ``allow``)."""

    decision: Decision
    message: str | None = None
    updated_input: Mapping[str, Any] | None = None


ApprovalReply = Decision | str | ApprovalAnswer | None
"""What an approval callback returns: a decision (``"allow"``, ``"deny"``,
``"allow_session"``), a fuller answer, or ``None`` to leave the approval pending (another
client answers it, or it expires). Any other string is a ``ValueError``, raised by ``run()``."""
QuestionReply = Sequence[Answer | Mapping[str, Any]] | None
"""What a question callback returns: one answer per question, in order, or ``None``."""

_DECISIONS = frozenset(get_args(Decision))


def approval_answer(reply: object) -> ApprovalAnswer | None:
    """A callback's reply as an ``ApprovalAnswer`` (``None``: leave it pending)."""
    if reply is None or isinstance(reply, ApprovalAnswer):
        return reply
    wanted = "allow, deny, allow_session, an ApprovalAnswer or None"
    if isinstance(reply, str):
        if reply not in _DECISIONS:
            raise ValueError(f"an approval callback returns {wanted}, not {reply!r}")
        return ApprovalAnswer(decision=cast(Decision, reply))
    raise TypeError(f"an approval callback returns {wanted}, not {reply!r}")


def ends_turn(event: Event, turn_id: str) -> bool:
    return event.type in TURN_END_TYPES and event.turn_id == turn_id


def asks_approval(event: Event, turn_id: str) -> ApprovalRequestedEvent | None:
    if isinstance(event, ApprovalRequestedEvent) and event.turn_id == turn_id:
        return event
    return None


def asks_question(event: Event, turn_id: str) -> QuestionAskedEvent | None:
    if isinstance(event, QuestionAskedEvent) and event.turn_id == turn_id:
        return event
    return None


@dataclass(frozen=True, kw_only=True)
class TurnOutcome:
    """A turn that has ended: the turn as stored, and the events it streamed."""

    turn: Turn
    events: list[Event] = field(default_factory=list)

    @property
    def status(self) -> TurnStatus:
        return self.turn.status

    @property
    def ok(self) -> bool:
        return self.turn.status == "completed"

    @property
    def final_text(self) -> str | None:
        return self.turn.final_text

    @property
    def error(self) -> TurnError | None:
        return self.turn.error

    @property
    def text(self) -> str:
        """Every message the agent wrote in the turn, joined (the deltas, or the completed
        messages where there were no deltas)."""
        deltas = [e.data.text for e in self.events if isinstance(e, MessageDeltaEvent)]
        if deltas:
            return "".join(deltas)
        return "".join(e.data.text for e in self.events if isinstance(e, MessageCompletedEvent))
