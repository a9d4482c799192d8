"""Claude Code stream-json stdout → normalized items, one line at a time (pure, no I/O).

One ``ClaudeNormalizer`` lives exactly as long as one CLI process: the process's session id,
streamed blocks and running cost total are per process.

What a line becomes (CLI 2.1.330; see reference sections 1.3 to 1.8):

- ``system/init`` → ``ThreadSeen`` when the session id is new to this normalizer
- ``stream_event`` text / thinking deltas → ``MessageDelta`` / ``ReasoningDelta``; the usage of
  ``message_start`` / ``message_delta`` (each model response, subagents' too) → ``UsageSoFar``
- ``assistant`` blocks → ``MessageCompleted`` / ``ReasoningCompleted`` (same id as the
  deltas), ``ToolStarted`` for tool_use / server_tool_use
- ``user`` tool_result blocks → ``ToolCompleted``; for a ``TodoWrite`` call the CLI accepted,
  then ``PlanUpdated`` with the todos (the tool's own events stay: approvals and clients that
  show tools refer to them; the plan is whole in every ``TodoWrite`` input)
- ``system/api_retry`` → ``RetryScheduled(source="cli")``
- ``rate_limit_event`` with status rejected → ``Warning(code="rate_limited")``
- ``result`` → ``UsageReported`` then ``TurnEnded``
- ``control_request`` → ``ApprovalAsked`` (can_use_tool), ``QuestionAsked`` (can_use_tool of
  AskUserQuestion) or ``UnsupportedControlRequest``;
  ``control_cancel_request`` → ``ApprovalWithdrawn``; ``control_response`` → ``ControlReply``
  (the control messages are parsed in control.py)

Everything else is dropped: known noise silently, unknown types with a debug log. Lines that
are not JSON objects (binary, invalid UTF-8, a truncated last line) are dropped too; with
``report_parse_errors`` the first ``MAX_PARSE_WARNINGS`` of a turn each become a
``Warning(code="parse_error")`` and the rest are counted in one more at the turn's ``result``.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from app.events import (
    PlanUpdated,
    ToolCompleted,
    ToolStarted,
    UsageReported,
    Warning,
)
from app.providers.claude.blocks import BlockKind, ContentBlocks
from app.providers.claude.classifier import retry_notice
from app.providers.claude.control import control_request, control_response
from app.providers.claude.items import (
    ApprovalAsked,
    ApprovalWithdrawn,
    ClaudeItem,
    ControlReply,
    QuestionAsked,
    ThreadSeen,
    TurnEnded,
    UnsupportedControlRequest,
    UsageSoFar,
)
from app.providers.claude.result import CostMeter, StreamedUsage, outcome_of, usage_of
from app.providers.claude.tools import PLAN_TOOL, plan_from_todos, tool_kind
from app.providers.output import MAX_TOOL_OUTPUT_BYTES, tool_output
from app.providers.raw import (
    as_dict,
    as_list,
    as_str,
    as_unix_time,
    parse_json,
)

# The items are re-exported: the normalizer's output is their home in callers' imports.
__all__ = [
    "MAX_TOOL_OUTPUT_BYTES",
    "ApprovalAsked",
    "ApprovalWithdrawn",
    "ClaudeItem",
    "ClaudeNormalizer",
    "ControlReply",
    "QuestionAsked",
    "ThreadSeen",
    "TurnEnded",
    "UnsupportedControlRequest",
    "UsageSoFar",
    "tool_kind",
]

logger = logging.getLogger(__name__)

# Types and system subtypes that carry nothing for the event model (reference §1.3).
_IGNORED_TYPES = frozenset(
    {
        "keep_alive",
        "tool_progress",
        "tool_use_summary",
        "auth_status",
        "prompt_suggestion",
        "conversation_reset",  # the next system/init carries the new session id
        "streamlined_text",
        "streamlined_tool_use_summary",
    }
)
_IGNORED_SYSTEM_SUBTYPES = frozenset(
    {
        "status",
        "session_state_changed",
        "compact_boundary",
        "task_started",
        "task_progress",
        "task_updated",
        "task_notification",
        "background_tasks_changed",
        "hook_started",
        "hook_progress",
        "hook_response",
        "local_command_output",
        "informational",
        "notification",
        "commands_changed",
        "model_refusal_fallback",
        "model_refusal_no_fallback",
        "model_consent_fallback",
        "thinking_tokens",
        "files_persisted",
        "memory_recall",
        "elicitation_complete",
        "plugin_install",
        "worker_shutting_down",
        "control_request_progress",
        "mirror_error",
    }
)
_IGNORED_STREAM_EVENTS = frozenset({"message_start", "message_delta", "message_stop", "ping"})
# The marker the CLI writes as a user line when an interrupt lands (2.1.330, obs); also
# "[Request interrupted by user for tool use]".
_INTERRUPT_MARKER = "[Request interrupted by user"
MAX_PARSE_WARNINGS = 5
"""Unparseable lines reported one by one per turn; later ones are only counted."""
_PREVIEW_CHARS = 120


class ClaudeNormalizer:
    """Turn Claude Code stdout lines into ``ClaudeItem``s, keeping per-process state."""

    def __init__(self, *, report_parse_errors: bool = False) -> None:
        self._report_parse_errors = report_parse_errors
        self._parse_errors = 0  # in the current turn
        self._thread_id: str | None = None
        self._blocks = ContentBlocks()
        self._stream_message_id: str | None = None
        self._interrupt_seen = False
        self._auto_denied: set[str] = set()
        self._cost = CostMeter()
        self._streamed_usage = StreamedUsage()
        self._limit_resets_at: datetime | None = None
        """When the usage limit a ``rate_limit_event`` rejected resets (this turn)."""
        self._plans: dict[str, PlanUpdated] = {}
        """Plans of TodoWrite calls by tool id, published once the CLI accepted them."""

    @property
    def thread_id(self) -> str | None:
        """The last session id seen, if any."""
        return self._thread_id

    def feed(self, line: bytes) -> list[ClaudeItem]:
        """Return the items one stdout line stands for; never raises on bad input.

        ``line`` may keep its trailing newline. Lines that are not JSON objects (debug output
        of some builds) and unknown message types give ``[]`` and a debug log.
        """
        try:
            raw = parse_json(line)
        except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError
            logger.debug("claude: skipping non-JSON stdout line: %.200r", line)
            return self._parse_error(line)
        if not isinstance(raw, dict):
            logger.debug("claude: skipping non-object JSON line: %.200r", line)
            return self._parse_error(line)
        try:
            return self._dispatch(raw)
        except (ValueError, TypeError, LookupError, ArithmeticError):
            # A known type whose fields do not fit (pydantic's ValidationError is a
            # ValueError): a CLI change must cost one line, never the turn.
            logger.warning("claude: dropping malformed %r line", raw.get("type"), exc_info=True)
            return []

    def _parse_error(self, line: bytes) -> list[ClaudeItem]:
        if not self._report_parse_errors or not line.strip():
            return []
        self._parse_errors += 1
        if self._parse_errors > MAX_PARSE_WARNINGS:
            return []
        preview = line[: _PREVIEW_CHARS * 4].decode(errors="replace")[:_PREVIEW_CHARS]
        return [
            Warning(
                code="parse_error",
                message=f"skipped a stdout line of {len(line)} bytes that is not a JSON "
                f"object: {preview!r}",
            )
        ]

    def _parse_error_summary(self) -> list[ClaudeItem]:
        unreported = self._parse_errors - MAX_PARSE_WARNINGS
        self._parse_errors = 0
        if unreported <= 0:
            return []
        return [
            Warning(
                code="parse_error",
                message=f"skipped {unreported} more stdout lines that are not JSON objects",
            )
        ]

    # --- dispatch -------------------------------------------------------------------------

    def _dispatch(self, raw: dict[str, Any]) -> list[ClaudeItem]:
        kind = raw.get("type")
        if kind == "stream_event":
            return self._stream_event(raw)
        if kind == "assistant":
            return self._assistant(raw)
        if kind == "user":
            return self._user(raw)
        if kind == "system":
            return self._system(raw)
        if kind == "result":
            return self._result(raw)
        if kind == "control_request":
            return control_request(raw)
        if kind == "control_response":
            return control_response(raw)
        if kind == "control_cancel_request":
            request_id = as_str(raw.get("request_id"))
            return [ApprovalWithdrawn(request_id=request_id)] if request_id else []
        if kind == "rate_limit_event":
            return self._rate_limit(raw)
        if kind not in _IGNORED_TYPES:
            logger.debug("claude: skipping unknown message type %r", kind)
        return []

    def _see_thread(self, session_id: object) -> list[ClaudeItem]:
        if not isinstance(session_id, str) or not session_id or session_id == self._thread_id:
            return []
        self._thread_id = session_id
        return [ThreadSeen(thread_id=session_id)]

    # --- streaming ------------------------------------------------------------------------

    def _stream_event(self, raw: dict[str, Any]) -> list[ClaudeItem]:
        return [*self._usage_so_far(raw), *self._streamed(raw)]

    def _usage_so_far(self, raw: dict[str, Any]) -> list[UsageSoFar]:
        """What the turn has used so far, when a model response (the main agent's or a
        subagent's) reported its usage."""
        event = as_dict(raw.get("event"))
        if event.get("type") == "message_start":
            message = as_dict(event.get("message"))
            message_id, usage = as_str(message.get("id")), message.get("usage")
        elif event.get("type") == "message_delta":
            message_id, usage = as_str(raw.get("api_message_id")), event.get("usage")
            message_id = message_id or self._stream_message_id
        else:
            return []
        if message_id is None or not isinstance(usage, dict):
            return []
        total = self._streamed_usage.seen(message_id, usage)
        return [] if total is None else [UsageSoFar(usage=total)]

    def _streamed(self, raw: dict[str, Any]) -> list[ClaudeItem]:
        if raw.get("parent_tool_use_id") is not None:
            # Subagent prose: the event model has no parent field, so interleaving it with
            # the main agent's message would garble the answer. The subagent's result comes
            # back as the Task tool's output; its tool calls are still reported.
            return []
        event = as_dict(raw.get("event"))
        event_type = event.get("type")
        if event_type == "message_start":
            self._stream_message_id = as_str(as_dict(event.get("message")).get("id"))
        message_id = as_str(raw.get("api_message_id")) or self._stream_message_id
        index = event.get("index")
        if event_type in _IGNORED_STREAM_EVENTS or event_type == "content_block_stop":
            return []
        if message_id is None or not isinstance(index, int):
            logger.debug("claude: stream_event without message id or index: %r", event_type)
            return []
        items: list[ClaudeItem] = list(self._blocks.enter(message_id))
        if event_type == "content_block_start":
            kind = _block_kind(as_dict(event.get("content_block")).get("type"))
            if kind is not None:
                self._blocks.started(message_id, index, kind)
            # tool_use input streams as input_json_delta; ToolStarted waits for the whole
            # input on the assistant line.
        elif event_type == "content_block_delta":
            delta = as_dict(event.get("delta"))
            if delta.get("type") == "text_delta":
                text = as_str(delta.get("text")) or ""
                items += self._blocks.delta(message_id, index, "text", text)
            elif delta.get("type") == "thinking_delta":
                text = as_str(delta.get("thinking")) or ""
                items += self._blocks.delta(message_id, index, "thinking", text)
            # else input_json_delta, signature_delta, citations_delta
        else:
            logger.debug("claude: skipping unknown stream event %r", event_type)
        return items

    # --- assistant ------------------------------------------------------------------------

    def _assistant(self, raw: dict[str, Any]) -> list[ClaudeItem]:
        message = as_dict(raw.get("message"))
        if raw.get("error") is not None and (
            raw.get("is_api_error_message") is True or message.get("model") == "<synthetic>"
        ):
            # After the CLI gives up on the API it prints a synthetic "API Error: …" message
            # (2.1.330, obs); the result that follows carries the same text as the turn's
            # error. Showing it as agent prose too would duplicate it as if the model said it.
            return []
        message_id = as_str(message.get("id")) or ""
        # Subagent prose is skipped like its stream events (see _stream_event).
        nested = raw.get("parent_tool_use_id") is not None
        items: list[ClaudeItem] = [] if nested else list(self._blocks.enter(message_id))
        for block in as_list(message.get("content")):
            if not isinstance(block, dict):
                continue
            block_type = block.get("type")
            kind = _block_kind(block_type)
            if not nested:
                # The API names the field after the type: {"type": "thinking", "thinking": …}.
                text = as_str(block.get(kind)) if kind is not None else None
                items += self._blocks.assistant_block(message_id, kind, text or "")
            if block_type in ("tool_use", "server_tool_use"):
                items += _tool_started(block)
                if not nested:  # a subagent's todos are its own, not the turn's plan
                    self._note_plan(block)
            elif isinstance(block_type, str) and block_type.endswith("_tool_result"):
                items += _server_tool_completed(block)
        return items

    # --- user -----------------------------------------------------------------------------

    def _user(self, raw: dict[str, Any]) -> list[ClaudeItem]:
        content = as_dict(raw.get("message")).get("content")
        if not isinstance(content, list):
            return []  # a replayed prompt
        denied = set(self._auto_denied)
        for entry in as_list(raw.get("tool_result_meta")):
            meta = as_dict(entry)
            decision = as_dict(meta.get("permission_decision")).get("decision")
            if decision == "reject" and isinstance(meta.get("id"), str):
                denied.add(meta["id"])
        items: list[ClaudeItem] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                text = as_str(block.get("text")) or ""
                if text.startswith(_INTERRUPT_MARKER):
                    self._interrupt_seen = True
                continue  # replays and interruption markers are not agent output
            if block.get("type") != "tool_result":
                continue
            tool_id = as_str(block.get("tool_use_id"))
            if tool_id is None:
                continue
            if tool_id in denied:
                status = "denied"
                self._auto_denied.discard(tool_id)
            elif block.get("is_error") is True:
                status = "failed"
            else:
                status = "completed"
            items.append(
                ToolCompleted(
                    tool_id=tool_id, status=status, output=tool_output(block.get("content"))
                )
            )
            plan = self._plans.pop(tool_id, None)
            if plan is not None and status == "completed":
                items.append(plan)
        return items

    def _note_plan(self, block: dict[str, Any]) -> None:
        tool_id = as_str(block.get("id"))
        if tool_id and block.get("name") == PLAN_TOOL:
            plan = plan_from_todos(as_dict(block.get("input")))
            if plan is not None:
                self._plans[tool_id] = plan

    # --- system ---------------------------------------------------------------------------

    def _system(self, raw: dict[str, Any]) -> list[ClaudeItem]:
        subtype = raw.get("subtype")
        if subtype == "init":
            return self._see_thread(raw.get("session_id"))
        if subtype == "api_retry":
            return [retry_notice(raw)]
        if subtype == "permission_denied":
            # Auto-denied without asking (a deny rule, `dontAsk` in read_only mode); the
            # tool_result that follows is reported as denied.
            tool_id = as_str(raw.get("tool_use_id"))
            if tool_id:
                self._auto_denied.add(tool_id)
            return []
        if subtype not in _IGNORED_SYSTEM_SUBTYPES:
            logger.debug("claude: skipping unknown system subtype %r", subtype)
        return []

    def _rate_limit(self, raw: dict[str, Any]) -> list[ClaudeItem]:
        info = as_dict(raw.get("rate_limit_info"))
        if info.get("status") != "rejected":
            return []
        limit = as_str(info.get("rateLimitType"))
        message = f"Claude usage limit reached ({limit})" if limit else "Claude usage limit reached"
        resets_at = as_unix_time(info.get("resetsAt"))
        if resets_at is not None:
            self._limit_resets_at = resets_at  # the turn's usage_limit failure says it too
            message += f"; resets at {resets_at.isoformat()}"
        return [Warning(code="rate_limited", message=message)]

    # --- result ---------------------------------------------------------------------------

    def _result(self, raw: dict[str, Any]) -> list[ClaudeItem]:
        items: list[ClaudeItem] = self._see_thread(raw.get("session_id"))
        # Blocks an interrupt abandoned mid-stream get completed with what streamed.
        items += self._blocks.flush()
        items += self._parse_error_summary()
        self._stream_message_id = None
        self._streamed_usage.clear()
        usage = usage_of(raw, self._cost)
        if usage is not None:
            items.append(UsageReported(usage=usage))
        outcome = outcome_of(
            raw,
            usage,
            interrupt_seen=self._interrupt_seen,
            limit_resets_at=self._limit_resets_at,
        )
        self._limit_resets_at = None
        self._interrupt_seen = False
        self._auto_denied.clear()
        self._plans.clear()
        items.append(TurnEnded(outcome=outcome, thread_id=as_str(raw.get("session_id"))))
        return items


# --- block helpers --------------------------------------------------------------------------


def _block_kind(block_type: object) -> BlockKind | None:
    if block_type == "text":
        return "text"
    if block_type == "thinking":
        return "thinking"
    return None


def _tool_started(block: dict[str, Any]) -> list[ClaudeItem]:
    tool_id = as_str(block.get("id"))
    name = as_str(block.get("name"))
    if not tool_id or not name:
        return []
    return [
        ToolStarted(
            tool_id=tool_id, name=name, kind=tool_kind(name), input=as_dict(block.get("input"))
        )
    ]


def _server_tool_completed(block: dict[str, Any]) -> list[ClaudeItem]:
    # Server tools (web_search, web_fetch) run inside the API call: their results come back
    # in the assistant message (`web_search_tool_result`…), not as a user tool_result.
    tool_id = as_str(block.get("tool_use_id"))
    if not tool_id:
        return []
    content = block.get("content")
    failed = isinstance(content, dict) and str(content.get("type", "")).endswith("_error")
    return [ToolCompleted(tool_id=tool_id, status="failed" if failed else "completed")]
