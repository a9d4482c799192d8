"""The data of what an agent produces during a turn: messages, reasoning, tool calls and their
output, and its plan."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from app.events.vocabulary import Payload, ToolKind


class MessageDelta(Payload):
    """Text the CLI streamed for this item: one delta as printed, or several that came
    within ``server.coalesce_deltas_ms`` of each other, joined."""

    TYPE = "message.delta"
    message_id: str
    text: str


class MessageCompleted(Payload):
    TYPE = "message.completed"
    message_id: str
    text: str


class ReasoningDelta(Payload):
    """Text the CLI streamed for this item: one delta as printed, or several that came
    within ``server.coalesce_deltas_ms`` of each other, joined."""

    TYPE = "reasoning.delta"
    message_id: str
    text: str


class ReasoningCompleted(Payload):
    TYPE = "reasoning.completed"
    message_id: str
    text: str


class ToolStarted(Payload):
    TYPE = "tool.started"
    tool_id: str
    name: str
    kind: ToolKind
    input: dict[str, JsonValue]


class ToolOutput(Payload):
    """Text the CLI streamed for this item: one delta as printed, or several that came
    within ``server.coalesce_deltas_ms`` of each other, joined."""

    TYPE = "tool.output"
    tool_id: str
    text: str


StreamedText = MessageDelta | ReasoningDelta | ToolOutput
"""Text a CLI streams a piece at a time: consecutive pieces of one item may be joined."""


def item_of(data: StreamedText) -> str:
    """The message or tool a piece of streamed text belongs to."""
    return data.tool_id if isinstance(data, ToolOutput) else data.message_id


def joined(first: StreamedText, texts: list[str]) -> StreamedText:
    """``first`` carrying ``texts`` (its own first) joined: pieces of one item, in order."""
    if len(texts) == 1:
        return first
    return first.model_copy(update={"text": "".join(texts)})


class ToolCompleted(Payload):
    TYPE = "tool.completed"
    tool_id: str
    status: Literal["completed", "failed", "denied"]
    output: str | None = None
    exit_code: int | None = None


PlanStatus = Literal["pending", "in_progress", "completed"]


class PlanEntry(BaseModel):
    """One step of the agent's plan."""

    model_config = ConfigDict(frozen=True)
    text: str
    status: PlanStatus


class PlanUpdated(Payload):
    """The agent's plan for the turn, whole each time it changes."""

    TYPE = "plan.updated"
    entries: list[PlanEntry]
