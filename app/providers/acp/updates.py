"""What an ACP agent says during a turn, as the gateway's events (pure; no I/O).

``TurnTranslator`` is fed the ``session/update`` notifications, ``session/request_permission``
requests and the ``session/prompt`` answer of one turn, in arrival order, as the ACP SDK's
types. It returns the unified events each one produces and, at the end, the turn's outcome.
It is the only place that knows each agent's habits (reference/acp-agents.md):

* text chunks that are not the model's answer (Copilot's "Info: … Retrying..." and its final
  "Error: …", the Claude adapter's "API Error: …" copy and its ``informational`` warnings, the
  Codex adapter's error text after ``threadStatus: systemError``) become ``retry.scheduled``,
  ``warning`` or the turn's failure, never ``message.*``;
* tool calls start (``tool.started``) once their input is known: on their first status that is
  not ``pending``, or when the agent asks permission for them (Gemini CLI asks without
  announcing the call; CodeBuddy streams its argument JSON as junk ``rawInput`` first);
* a call the client denied ends ``denied``, whether the agent reports it failed, ends the turn
  (Codex, CodeBuddy: ``cancelled``) or never mentions it again (Gemini CLI).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    ContentToolCallContent,
    FileEditToolCallContent,
    PermissionOption,
    PromptResponse,
    RequestPermissionRequest,
    SessionInfoUpdate,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UsageUpdate,
)
from pydantic import JsonValue

from app.events import (
    ApprovalDecision,
    EventData,
    MessageCompleted,
    MessageDelta,
    PlanEntry,
    PlanUpdated,
    ReasoningCompleted,
    ReasoningDelta,
    RetryScheduled,
    ToolCompleted,
    ToolKind,
    ToolOutput,
    ToolStarted,
    TurnError,
    Usage,
    UsageReported,
    Warning,
)
from app.providers.acp import faults
from app.providers.base import ApprovalRequest, TurnOutcome

_TOOL_KINDS: Mapping[str, ToolKind] = {
    "execute": "command",
    "edit": "file_change",
    "delete": "file_change",
    "move": "file_change",
    "fetch": "web_search",
}
_TOOL_NAMES: Mapping[str, str] = {"execute": "shell"}
_NAME_KEYS = ("toolName", "codebuddy.ai/toolName")
_RECONNECTING = re.compile(r"(\d+)\s*/\s*(\d+)")

OPTION_KINDS: Mapping[ApprovalDecision, tuple[str, ...]] = {
    "allow": ("allow_once",),
    "allow_session": ("allow_always",),
    "deny": ("reject_once", "reject_always"),
}
"""The ACP option kinds that carry each decision, best first. Options are chosen by kind,
never by an agent's own ids."""

Block = Literal["message", "reasoning"]


def option_for(decision: ApprovalDecision, options: list[PermissionOption]) -> str | None:
    """The ``optionId`` that carries ``decision``, or None when the agent offers none."""
    for kind in OPTION_KINDS[decision]:
        for option in options:
            if option.kind == kind:
                return option.option_id
    return None


@dataclass
class _Tool:
    tool_id: str
    name: str = "tool"
    named: bool = False
    """``name`` is the agent's own tool name (from ``_meta``), not one made from the kind."""
    kind: ToolKind = "other"
    title: str | None = None
    input: dict[str, JsonValue] = field(default_factory=dict)
    started: bool = False
    done: bool = False
    denied: bool = False
    output: list[str] = field(default_factory=list)


def _meta_name(meta: Mapping[str, Any] | None) -> str | None:
    if not meta:
        return None
    for key in _NAME_KEYS:
        if isinstance(meta.get(key), str):
            return str(meta[key])
    claude = meta.get("claudeCode")
    if isinstance(claude, Mapping) and isinstance(claude.get("toolName"), str):
        return str(claude["toolName"])
    return None


def _text_of(content: Any) -> str:
    """The text of a tool call's ``content`` list (text blocks and diffs)."""
    parts: list[str] = []
    for item in content or ():
        if isinstance(item, ContentToolCallContent) and isinstance(item.content, TextContentBlock):
            parts.append(item.content.text)
        elif isinstance(item, FileEditToolCallContent):
            parts.append(f"edited {item.path}")
    return "\n".join(p for p in parts if p)


def _raw_text(raw: Any) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return raw
    if isinstance(raw, Mapping):
        for key in ("output", "content", "text", "stdout"):
            if isinstance(raw.get(key), str):
                return str(raw[key])
    return json.dumps(raw)


def _terminal_delta(update: ToolCallUpdate | ToolCallStart) -> str | None:
    """The Codex adapter's command output (``_meta.terminal_output_delta``)."""
    delta = (update.field_meta or {}).get("terminal_output_delta")
    if isinstance(delta, Mapping) and isinstance(delta.get("data"), str):
        return str(delta["data"])
    return None


def _exit_code(update: ToolCallUpdate | ToolCallStart, raw: Any) -> int | None:
    meta = update.field_meta or {}
    terminal = meta.get("terminal_exit")
    if isinstance(terminal, Mapping) and isinstance(terminal.get("exit_code"), int):
        return int(terminal["exit_code"])
    if isinstance(raw, Mapping):
        metadata = raw.get("metadata")
        if isinstance(metadata, Mapping) and isinstance(metadata.get("exit"), int):
            return int(metadata["exit"])
        for item in raw.get("contents") or ():
            if isinstance(item, Mapping) and isinstance(item.get("exitCode"), int):
                return int(item["exitCode"])
    return None


class TurnTranslator:
    """One session's translator; ``begin`` resets what belongs to one turn."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self._ids = itertools.count(1)
        self._cost_before: float | None = None
        self._cost: float | None = None
        self.begin()

    def begin(self) -> None:
        self._block: Block | None = None
        self._block_id: str | None = None
        self._block_agent_id: str | None = None
        self._text: list[str] = []
        self._final_text = ""
        self._tools: dict[str, _Tool] = {}
        self._tokens: dict[str, int] = {}
        self._system_error = False
        self._error_text: list[str] = []
        self._error: TurnError | None = None
        self._retries = 0
        self._cost_before = self._cost

    # --- session/update ---------------------------------------------------------------------

    def update(self, update: Any) -> list[EventData]:
        """The events one ``session/update`` produces (none for those that say nothing a
        client needs: commands, config options, titles, replayed user messages)."""
        match update:
            case AgentMessageChunk():
                return self._message_chunk(update)
            case AgentThoughtChunk():
                text = update.content.text if isinstance(update.content, TextContentBlock) else ""
                return self._chunk("reasoning", update.message_id, text) if text else []
            case ToolCallStart() | ToolCallProgress():
                return [*self._close_block(), *self._tool_update(update)]
            case AgentPlanUpdate():
                entries = [PlanEntry(text=e.content, status=e.status) for e in update.entries]
                return [PlanUpdated(entries=entries)]
            case UsageUpdate():
                return self._usage_update(update)
            case SessionInfoUpdate():
                return self._info_update(update.field_meta)
        return []

    def _message_chunk(self, update: AgentMessageChunk) -> list[EventData]:
        meta = update.field_meta or {}
        content = update.content
        text = content.text if isinstance(content, TextContentBlock) else ""
        usage = meta.get("usage")
        if isinstance(usage, Mapping):  # Qwen Code: usage rides on an empty chunk
            self._add_tokens(usage)
        if not text:
            return []
        claude = meta.get("claudeCode")
        if isinstance(claude, Mapping) and claude.get("kind") == "informational":
            return [Warning(message=text.strip(), code="agent_notice")]
        if self._system_error:  # the Codex adapter's error text, after systemError
            self._error_text.append(text)
            return []
        if self._block != "message" or not self._text:
            # Whole notices arrive as one chunk that starts a message.
            if faults.COPILOT_RETRY.match(text):
                self._retries += 1
                status = faults.status_in(text)
                kind = faults.classify(self.provider, text, status=status).kind
                return [
                    RetryScheduled(
                        source="cli",
                        attempt=self._retries,
                        max_attempts=None,
                        delay_s=None,
                        kind="server_error" if kind == "agent_error" else kind,
                        message=text.strip(),
                    )
                ]
            if faults.COPILOT_ERROR.match(text) or faults.API_ERROR.match(text):
                self._error = faults.classify(self.provider, text.removeprefix("Error: "))
                return []
            if faults.NOTICE.match(text):
                return [Warning(message=text.strip(), code="agent_notice")]
        return self._chunk("message", update.message_id, text)

    def _chunk(self, block: Block, agent_id: str | None, text: str) -> list[EventData]:
        events: list[EventData] = []
        if self._block != block or (agent_id is not None and agent_id != self._block_agent_id):
            events.extend(self._close_block())
            self._block = block
            self._block_agent_id = agent_id
            self._block_id = agent_id or f"msg_{next(self._ids)}"
        assert self._block_id is not None
        self._text.append(text)
        if block == "message":
            events.append(MessageDelta(message_id=self._block_id, text=text))
        else:
            events.append(ReasoningDelta(message_id=self._block_id, text=text))
        return events

    def _close_block(self) -> list[EventData]:
        block, block_id, text = self._block, self._block_id, "".join(self._text)
        self._block = self._block_id = self._block_agent_id = None
        self._text = []
        if block is None or block_id is None:
            return []
        if block == "message":
            self._final_text = text
            return [MessageCompleted(message_id=block_id, text=text)]
        return [ReasoningCompleted(message_id=block_id, text=text)]

    def _tool(self, tool_id: str) -> _Tool:
        tool = self._tools.get(tool_id)
        if tool is None:
            tool = self._tools[tool_id] = _Tool(tool_id=tool_id)
        return tool

    def _learn(self, tool: _Tool, update: ToolCallUpdate | ToolCallStart) -> None:
        if update.kind is not None:
            tool.kind = _TOOL_KINDS.get(update.kind, "other")
            if not tool.named:
                tool.name = _TOOL_NAMES.get(update.kind, update.kind)
        name = _meta_name(update.field_meta)
        if name:
            tool.name, tool.named = name, True
        if update.title:
            tool.title = update.title
        if isinstance(update.raw_input, Mapping) and update.raw_input:
            tool.input = dict(update.raw_input)

    def _start(self, tool: _Tool) -> list[EventData]:
        if tool.started:
            return []
        tool.started = True
        tool_input = tool.input
        if not tool_input and tool.title:
            key = "command" if tool.kind == "command" else "title"
            tool_input = {key: tool.title}
        return [ToolStarted(tool_id=tool.tool_id, name=tool.name, kind=tool.kind, input=tool_input)]

    def _tool_update(self, update: ToolCallStart | ToolCallProgress) -> list[EventData]:
        tool = self._tool(update.tool_call_id)
        if tool.done:
            return []
        self._learn(tool, update)
        events: list[EventData] = []
        status = update.status
        if status in ("completed", "failed") or (status == "in_progress" and tool.input):
            # CodeBuddy opens its calls "in_progress" with no input yet, then streams it.
            events.extend(self._start(tool))
        delta = _terminal_delta(update)
        if delta:
            tool.output.append(delta)
            if tool.started:
                events.append(ToolOutput(tool_id=tool.tool_id, text=delta))
        if status in ("completed", "failed"):
            tool.done = True
            raw = update.raw_output
            output = _text_of(update.content) or "".join(tool.output) or _raw_text(raw)
            outcome: Literal["completed", "failed", "denied"] = (
                "completed" if status == "completed" else "denied" if tool.denied else "failed"
            )
            events.append(
                ToolCompleted(
                    tool_id=tool.tool_id,
                    status=outcome,
                    output=output,
                    exit_code=_exit_code(update, raw),
                )
            )
        return events

    def _usage_update(self, update: UsageUpdate) -> list[EventData]:
        if update.cost is not None and update.cost.currency.upper() == "USD":
            self._cost = update.cost.amount  # the session's cumulative cost
        usage = (update.field_meta or {}).get("usage")
        if isinstance(usage, Mapping):  # CodeBuddy: per model request, OpenAI names
            self._add_tokens(usage)
        return []

    def _add_tokens(self, usage: Mapping[str, Any]) -> None:
        names = {
            "inputTokens": "input_tokens",
            "prompt_tokens": "input_tokens",
            "outputTokens": "output_tokens",
            "completion_tokens": "output_tokens",
            "cachedReadTokens": "cached_input_tokens",
        }
        for key, name in names.items():
            value = usage.get(key)
            if isinstance(value, int):
                self._tokens[name] = self._tokens.get(name, 0) + value

    def _info_update(self, meta: Mapping[str, Any] | None) -> list[EventData]:
        codex = (meta or {}).get("codex")
        if not isinstance(codex, Mapping):
            return []
        status = codex.get("threadStatus")
        if isinstance(status, Mapping) and status.get("type") == "systemError":
            self._system_error = True
        error = codex.get("error")
        if isinstance(error, Mapping) and error.get("willRetry"):
            message = str(error.get("message") or "")
            details = str(error.get("additionalDetails") or "")
            counted = _RECONNECTING.search(message)
            self._retries += 1
            kind = faults.classify(self.provider, f"{message} {details}").kind
            return [
                RetryScheduled(
                    source="cli",
                    attempt=int(counted.group(1)) if counted else self._retries,
                    max_attempts=int(counted.group(2)) if counted else None,
                    delay_s=None,
                    kind="network" if kind == "agent_error" else kind,
                    message=" ".join(p for p in (message, details) if p),
                )
            ]
        return []

    # --- permissions ------------------------------------------------------------------------

    def permission(
        self, request: RequestPermissionRequest
    ) -> tuple[list[EventData], ApprovalRequest]:
        """The events before the approval (the call starts, if it had not) and the approval
        to ask the client; its options are the decisions the agent offers a kind for."""
        call = request.tool_call
        tool = self._tool(call.tool_call_id)
        self._learn(tool, call)
        events = [*self._close_block(), *self._start(tool)]
        decisions = tuple(d for d in OPTION_KINDS if option_for(d, request.options) is not None)
        approval = ApprovalRequest(
            request_id=call.tool_call_id,
            tool=tool.name,
            input=tool.input or ({"command": tool.title} if tool.title else {}),
            options=decisions,
            title=tool.title,
            tool_id=tool.tool_id,
        )
        return events, approval

    def denied(self, tool_id: str) -> None:
        """The client denied ``tool_id``: however the agent ends it, it ends ``denied``."""
        self._tool(tool_id).denied = True

    # --- the end of the turn ----------------------------------------------------------------

    def _close(self, *, interrupted: bool) -> list[EventData]:
        events = self._close_block()
        for tool in self._tools.values():
            if tool.started and not tool.done:
                tool.done = True
                status: Literal["failed", "denied"] = "denied" if tool.denied else "failed"
                why = "the turn was interrupted" if interrupted else "the turn ended"
                output = None if tool.denied else f"{why} before the tool finished"
                events.append(ToolCompleted(tool_id=tool.tool_id, status=status, output=output))
        return events

    def usage_so_far(self) -> Usage | None:
        """What the running turn has used by the agent's ``usage_update``s so far."""
        return self._usage(None)

    def _usage(self, response: PromptResponse | None) -> Usage | None:
        reported = response.usage if response is not None else None
        cost = None
        if self._cost is not None and self._cost != self._cost_before:
            cost = round(self._cost - (self._cost_before or 0.0), 6)
        if reported is not None:
            return Usage(
                input_tokens=reported.input_tokens,
                output_tokens=reported.output_tokens,
                cached_input_tokens=reported.cached_read_tokens or 0,
                cache_creation_input_tokens=reported.cached_write_tokens or 0,
                cost_usd=cost,
            )
        if self._tokens or cost is not None:
            return Usage(**self._tokens, cost_usd=cost)
        return None

    def finish(
        self, response: PromptResponse, *, interrupted: bool
    ) -> tuple[list[EventData], TurnOutcome]:
        """The agent answered ``session/prompt``: the closing events and the outcome."""
        events = self._close(interrupted=interrupted)
        usage = self._usage(response)
        if usage is not None:
            events.append(UsageReported(usage=usage))
        stop = response.stop_reason
        error = self._error
        if self._system_error:
            error = faults.classify(self.provider, "".join(self._error_text) or "system error")
        if stop == "refusal":
            error = faults.from_refusal(self.provider, response.field_meta) or error
        if stop == "cancelled" and interrupted:
            return events, TurnOutcome(
                status="interrupted",
                error=TurnError(
                    kind="interrupted", message="interrupted by the client", provider=self.provider
                ),
                usage=usage,
                stop_reason=stop,
            )
        if error is not None:
            return events, TurnOutcome(status="failed", error=error, usage=usage, stop_reason=stop)
        # "cancelled" without an interrupt: the agent ended the turn after a denial (Codex,
        # CodeBuddy); "refusal" without an error: the model declined. Both are answers.
        return events, TurnOutcome(
            status="completed", final_text=self._final_text, usage=usage, stop_reason=stop
        )

    def fail(self, error: TurnError, *, interrupted: bool) -> tuple[list[EventData], TurnOutcome]:
        """The prompt failed (a JSON-RPC error, the agent gone): closing events and outcome."""
        events = self._close(interrupted=interrupted)
        usage = self._usage(None)
        if usage is not None:
            events.append(UsageReported(usage=usage))
        return events, TurnOutcome(status="failed", error=error, usage=usage)
