"""A session's events as ACP ``session/update`` notifications (pure, no I/O).

``UpdateTranslator`` is fed one session's events in ``seq`` order, live or replayed from the
event log, and returns the updates each one becomes (usually none or one):

| event | update |
|---|---|
| ``turn.started`` | ``user_message_chunk``: the prompt (a replay shows what the user asked) |
| ``message.delta`` / ``reasoning.delta`` | ``agent_message_chunk`` / ``agent_thought_chunk`` (``messageId``: the event's) |
| ``message.completed`` / ``reasoning.completed`` | nothing, when deltas of that message came; else the whole text as one chunk |
| ``tool.started`` | ``tool_call``, ``pending``: kind, title, ``rawInput``, locations, a ``diff`` per edit |
| ``tool.output`` | ``tool_call_update``, ``in_progress``, with the output so far |
| ``tool.completed`` | ``tool_call_update``, ``completed`` or ``failed`` (failed or denied), the output, ``rawOutput`` |
| ``plan.updated`` | ``plan`` (every entry of priority ``medium``) |
| ``usage`` | ``session_info_update``: ``updatedAt``, and the usage in ``_meta.agentGateway.usage`` |
| ``retry.scheduled``, ``provider.switched``, ``warning`` | ``agent_thought_chunk``: a sentence, the event whole in ``_meta.agentGateway.event`` |
| anything else | nothing (the server answers approvals, questions and turn ends itself) |

Every update carries ``_meta.agentGateway = {seq, turnId}``.

Why the translator keeps state, and what: Claude Code streams every text block as deltas
before its completion, but OpenCode may complete a text part that never streamed, and Codex a
reasoning item whose summary never streamed; such a text must still reach the client, once.
So the translator remembers which messages had deltas until they complete. ACP replaces a
tool call's ``content`` with each update, so it also keeps each running tool's output so
far (the tail of it past ``MAX_TOOL_TEXT_CHARS``) and whether its content is a diff, which
its completion leaves in place. The state belongs to the running turn and is dropped at each
``turn.started`` and turn end. To go on after an event ``N`` of a running turn (a
``session/load`` after a seq), feed the turn's events from its ``turn.started`` up to ``N``
first and drop their updates.

Why ``usage`` is not ``usage_update``: ACP's ``usage_update`` reports the context window
(``used`` and ``size``, both required) and the session's cost; the gateway knows a turn's
tokens and cost, not how full the window is or how large it is.
"""  # noqa: E501

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC
from typing import Any, TypeAlias, assert_never

from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    ContentToolCallContent,
    CurrentModeUpdate,
    SessionInfoUpdate,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)
from acp.schema import PlanEntry as AcpPlanEntry
from pydantic import JsonValue, ValidationError

from app.api.acp.edits import fenced
from app.api.acp.envelopes import EventInput, read_event, wire_form
from app.api.acp.notices import notice
from app.api.acp.toolcalls import AcpToolKind, tool_call_view
from app.events import (
    ApprovalRequested,
    ApprovalResolved,
    BudgetReached,
    Event,
    EventEnvelope,
    MessageCompleted,
    MessageDelta,
    PlanUpdated,
    ProviderSwitched,
    QuestionAsked,
    QuestionResolved,
    ReasoningCompleted,
    ReasoningDelta,
    RetryScheduled,
    SessionClosed,
    SessionConfigured,
    SessionCreated,
    SessionForked,
    SessionProviderSelected,
    SessionReverted,
    SessionThreadBound,
    ToolCompleted,
    ToolOutput,
    ToolStarted,
    TurnCompleted,
    TurnFailed,
    TurnInterrupted,
    TurnStarted,
    UsageReported,
    Warning,
)

__all__ = ["MAX_TOOL_TEXT_CHARS", "AcpUpdate", "UpdateTranslator"]

log = logging.getLogger(__name__)

AcpUpdate: TypeAlias = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
    | SessionInfoUpdate
    | CurrentModeUpdate
)
"""An update the translator makes: the ``update`` of one ``session/update`` notification."""

MAX_TOOL_TEXT_CHARS = 64 * 1024
"""How much of a running tool's output each update repeats (its tail, past this)."""


@dataclass(slots=True)
class _Tool:
    """What the translator keeps of a running tool call."""

    kind: AcpToolKind | None
    diff: bool = False
    output: str = ""


class UpdateTranslator:
    """One session's events → ACP updates, in ``seq`` order (one translator per session and
    connection; it keeps only what the running turn needs)."""

    def __init__(self, *, cwd: str | None = None) -> None:
        """``cwd``: the session's workspace, against which relative paths are resolved."""
        self.cwd = cwd
        self._streamed: set[str] = set()
        self._tools: dict[str, _Tool] = {}

    def updates_for(self, event: EventInput) -> list[AcpUpdate]:
        """The updates ``event`` becomes (none for one that is not a gateway event)."""
        try:
            typed = read_event(event)
        except ValidationError as exc:
            seq, kind = _identity(event)
            log.warning(
                "acp: skipping event %s (%s): %d field(s) invalid", seq, kind, exc.error_count()
            )
            return []
        meta: dict[str, Any] = {"seq": typed.seq}
        if typed.turn_id is not None:
            meta["turnId"] = typed.turn_id
        data = typed.data
        match data:
            case TurnCompleted() | TurnFailed() | TurnInterrupted():
                self._reset()
                return []
            case TurnStarted():
                self._reset()
                return [self._user_prompt(data, typed.turn_id, meta)]
            case MessageDelta() | ReasoningDelta():
                if not data.text:
                    return []
                self._streamed.add(data.message_id)
                thought = isinstance(data, ReasoningDelta)
                return [_chunk(data.message_id, data.text, meta, thought=thought)]
            case MessageCompleted() | ReasoningCompleted():
                return self._completed(data, meta)
            case ToolStarted():
                return [self._tool_started(data, meta)]
            case ToolOutput():
                return self._tool_output(data, meta)
            case ToolCompleted():
                return [self._tool_completed(data, meta)]
            case PlanUpdated():
                return [_plan(data, meta)]
            case UsageReported():
                usage = data.usage.model_dump(mode="json", exclude_none=True)
                return [
                    SessionInfoUpdate(
                        session_update="session_info_update",
                        updated_at=_instant(typed),
                        field_meta=_meta({**meta, "usage": usage}),
                    )
                ]
            case RetryScheduled() | ProviderSwitched() | Warning():
                return [self._notice(data, typed, event, meta)]
            case SessionConfigured():
                # Every editor of the session shows the mode it now runs in, whoever set it.
                mode = CurrentModeUpdate(
                    session_update="current_mode_update",
                    current_mode_id=data.approval_mode,
                    field_meta=_meta(meta),
                )
                return [mode]
            case (
                SessionCreated()
                | SessionProviderSelected()
                | SessionThreadBound()
                | SessionForked()
                | SessionClosed()
                | SessionReverted()
                | BudgetReached()
                | ApprovalRequested()
                | ApprovalResolved()
                | QuestionAsked()
                | QuestionResolved()
            ):
                return []  # the server asks approvals and questions itself
            case _:
                assert_never(data)

    def _reset(self) -> None:
        self._streamed.clear()
        self._tools.clear()

    def _user_prompt(
        self, data: TurnStarted, turn_id: str | None, meta: dict[str, Any]
    ) -> UserMessageChunk:
        return UserMessageChunk(
            session_update="user_message_chunk",
            content=TextContentBlock(type="text", text=data.prompt),
            message_id=turn_id,
            field_meta=_meta(meta),
        )

    def _completed(
        self, data: MessageCompleted | ReasoningCompleted, meta: dict[str, Any]
    ) -> list[AcpUpdate]:
        if data.message_id in self._streamed:
            self._streamed.discard(data.message_id)
            return []
        if not data.text:
            return []
        thought = isinstance(data, ReasoningCompleted)
        return [_chunk(data.message_id, data.text, meta, thought=thought)]

    def _tool_started(self, data: ToolStarted, meta: dict[str, Any]) -> ToolCallStart:
        view = tool_call_view(data.name, data.kind, data.input, cwd=self.cwd)
        self._tools[data.tool_id] = _Tool(kind=view.kind, diff=view.has_diff)
        return ToolCallStart(
            session_update="tool_call",
            tool_call_id=data.tool_id,
            title=view.title,
            kind=view.kind,
            status="pending",
            raw_input=data.input,
            locations=view.locations or None,
            content=list(view.content) or None,
            field_meta=_meta(meta),
        )

    def _tool_output(self, data: ToolOutput, meta: dict[str, Any]) -> list[AcpUpdate]:
        if not data.text:
            return []
        tool = self._tools.setdefault(data.tool_id, _Tool(kind=None))
        tool.output = _tail(tool.output + data.text)
        return [
            ToolCallProgress(
                session_update="tool_call_update",
                tool_call_id=data.tool_id,
                status="in_progress",
                content=[_text(tool.output, tool.kind)],
                field_meta=_meta(meta),
            )
        ]

    def _tool_completed(self, data: ToolCompleted, meta: dict[str, Any]) -> ToolCallProgress:
        tool = self._tools.pop(data.tool_id, None) or _Tool(kind=None)
        text = data.output or tool.output
        raw: dict[str, JsonValue] = {}
        if data.output is not None:
            raw["output"] = data.output
        if data.exit_code is not None:
            raw["exit_code"] = data.exit_code
        if data.status == "denied":
            meta = {**meta, "status": "denied"}
        keep = data.status == "completed" and tool.diff  # the edit's diff stays in view
        return ToolCallProgress(
            session_update="tool_call_update",
            tool_call_id=data.tool_id,
            status="completed" if data.status == "completed" else "failed",
            content=[_text(text, tool.kind)] if text and not keep else None,
            raw_output=raw or None,
            field_meta=_meta(meta),
        )

    def _notice(
        self,
        data: RetryScheduled | ProviderSwitched | Warning,
        typed: Event,
        event: EventInput,
        meta: dict[str, Any],
    ) -> AgentThoughtChunk:
        sentence = notice(data, at=typed.at)
        return AgentThoughtChunk(
            session_update="agent_thought_chunk",
            # Its own message: clients that follow messageId do not run it into a thought.
            content=TextContentBlock(type="text", text=f"\n\n{sentence}\n\n"),
            message_id=f"evt_{typed.seq}",
            field_meta=_meta({**meta, "event": wire_form(event)}),
        )


def _meta(values: dict[str, Any]) -> dict[str, Any]:
    return {"agentGateway": values}


def _identity(event: EventInput) -> tuple[object, object]:
    if isinstance(event, EventEnvelope):
        return event.seq, getattr(event, "type", None)
    return event.get("seq"), event.get("type")


def _chunk(
    message_id: str, text: str, meta: dict[str, Any], *, thought: bool
) -> AgentMessageChunk | AgentThoughtChunk:
    content = TextContentBlock(type="text", text=text)
    if not thought:
        return AgentMessageChunk(
            session_update="agent_message_chunk",
            content=content,
            message_id=message_id,
            field_meta=_meta(meta),
        )
    return AgentThoughtChunk(
        session_update="agent_thought_chunk",
        content=content,
        message_id=message_id,
        field_meta=_meta(meta),
    )


def _plan(data: PlanUpdated, meta: dict[str, Any]) -> AgentPlanUpdate:
    entries = [
        AcpPlanEntry(content=entry.text, priority="medium", status=entry.status)
        for entry in data.entries
    ]
    return AgentPlanUpdate(session_update="plan", entries=entries, field_meta=_meta(meta))


def _text(text: str, kind: AcpToolKind | None) -> ContentToolCallContent:
    # A command's output is shown as it printed it, not read as Markdown.
    shown = fenced(text, "console") if kind == "execute" else text
    return ContentToolCallContent(type="content", content=TextContentBlock(type="text", text=shown))


def _tail(text: str) -> str:
    if len(text) <= MAX_TOOL_TEXT_CHARS:
        return text
    return "…" + text[-(MAX_TOOL_TEXT_CHARS - 1) :]


def _instant(event: Event) -> str:
    """The event's time as its wire form writes it: RFC 3339 UTC with microseconds."""
    at = event.at.astimezone(UTC) if event.at.tzinfo else event.at.replace(tzinfo=UTC)
    return at.isoformat(timespec="microseconds").replace("+00:00", "Z")
