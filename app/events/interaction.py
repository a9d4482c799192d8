"""The data of what an agent asks of the user: approvals of tool calls, and questions."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from app.events.vocabulary import ApprovalDecision, Payload


class ApprovalOption(BaseModel):
    model_config = ConfigDict(frozen=True)
    decision: ApprovalDecision
    label: str


class ApprovalRequested(Payload):
    TYPE = "approval.requested"
    approval_id: str
    tool: str
    input: dict[str, JsonValue]
    options: list[ApprovalOption]
    expires_at: datetime
    title: str | None = None
    tool_id: str | None = None


class ApprovalResolved(Payload):
    TYPE = "approval.resolved"
    approval_id: str
    decision: ApprovalDecision
    by: Literal["client", "policy", "gateway"]
    reason: Literal[
        "decided", "expired", "cancelled", "session_closed", "gateway_restart", "replica_lost"
    ]
    message: str | None = None
    updated_input: dict[str, JsonValue] | None = None
    """The input the tool runs with when the client edited what the agent asked."""
    updated_by: str | None = None
    """The key (its name) that edited the input."""


class QuestionOption(BaseModel):
    """One answer the agent offers to a question."""

    model_config = ConfigDict(frozen=True)
    label: str
    description: str | None = None


class Question(BaseModel):
    """One question the agent asks; it is answered with offered labels and/or free text."""

    model_config = ConfigDict(frozen=True)
    prompt: str
    header: str | None = None
    """A short tag for the question (a few words), when the agent gives one."""
    options: list[QuestionOption] = []
    multi_select: bool = False
    """More than one offered label may be chosen."""
    free_text: bool = True
    """An answer may be (or add) text of the user's own instead of an offered label."""


class QuestionAnswer(BaseModel):
    """The answer to one question: the offered labels chosen, and/or text of the user's own."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    selected: list[str] = []
    text: str | None = None

    def texts(self) -> list[str]:
        """The answer as the strings a CLI takes: the chosen labels, then the user's text."""
        own = self.text.strip() if self.text is not None else ""
        return [*self.selected, *([own] if own else [])]


class QuestionAsked(Payload):
    """The agent asks the user; answer with ``POST …/questions/{question_id}`` (one answer per
    question, in order) before ``expires_at``."""

    TYPE = "question.asked"
    question_id: str
    questions: list[Question]
    expires_at: datetime
    tool_id: str | None = None


class QuestionResolved(Payload):
    """A question's end: answered by a client, or ended by the gateway (no answers)."""

    TYPE = "question.resolved"
    question_id: str
    answers: list[QuestionAnswer] | None
    by: Literal["client", "gateway"]
    reason: Literal[
        "answered", "expired", "cancelled", "session_closed", "gateway_restart", "replica_lost"
    ]
    answered_by: str | None = None
    """The key (its name) that answered."""
