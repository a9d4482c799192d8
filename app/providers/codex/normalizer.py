"""Codex app-server notifications of one turn → normalized items (pure, no I/O).

One ``TurnNormalizer`` lives exactly as long as one turn of one thread; notifications that
name another turn (a turn abandoned after an interrupt, the usage Codex replays on
``thread/resume``) are dropped. What a notification becomes (codex-cli 0.169.0, reference
§2.3 and §6):

- ``item/agentMessage/delta`` → ``MessageDelta``; ``item/completed`` agentMessage →
  ``MessageCompleted`` (same ``message_id``, the item id)
- reasoning deltas / ``item/completed`` reasoning → ``ReasoningDelta`` / ``ReasoningCompleted``
- ``item/started`` commandExecution, fileChange, mcpToolCall, webSearch, dynamicToolCall →
  ``ToolStarted`` (once per item id: Codex repeats ``item/started`` after a stream retry);
  ``item/commandExecution/outputDelta`` → ``ToolOutput``; ``item/completed`` → ``ToolCompleted``
- ``error`` with ``willRetry`` → ``RetryScheduled(source="cli")``; ``warning`` → ``Warning``
- ``serverRequest/resolved`` → ``ApprovalWithdrawn`` (withdrawn unless already answered)
- ``turn/plan/updated`` → ``PlanUpdated`` with the whole plan (Codex sends it whole each time
  its ``update_plan`` tool runs; step status ``inProgress`` becomes ``in_progress``)
- ``thread/tokenUsage/updated`` → ``UsageSoFar`` (the turn's model requests so far)
- ``turn/completed`` → ``UsageReported`` (when any) then ``TurnEnded``

Everything else is dropped: known progress notices silently, unknown ones with a debug log.
"""

from __future__ import annotations

import logging
from typing import Any, TypeAlias

from app.events import (
    EventData,
    MessageCompleted,
    MessageDelta,
    PlanEntry,
    PlanStatus,
    PlanUpdated,
    ReasoningCompleted,
    ReasoningDelta,
    ToolCompleted,
    ToolOutput,
    Usage,
    UsageReported,
    Warning,
)
from app.providers.base import TurnOutcome
from app.providers.codex.classifier import error_for_turn, interrupted_error, retry_notice
from app.providers.codex.protocol import Notification
from app.providers.codex.tools import TOOL_KINDS, tool_completed, tool_started
from app.providers.items import ApprovalWithdrawn, TurnEnded, UsageSoFar

__all__ = ["CodexItem", "TurnNormalizer"]

logger = logging.getLogger(__name__)


CodexItem: TypeAlias = EventData | ApprovalWithdrawn | UsageSoFar | TurnEnded

_REASONING_DELTAS = frozenset({"item/reasoning/summaryTextDelta", "item/reasoning/textDelta"})
_IGNORED = frozenset(
    {
        "turn/started",
        "thread/started",
        "thread/status/changed",
        "thread/goal/cleared",
        "thread/name/updated",
        "thread/compacted",
        "turn/diff/updated",
        "item/plan/delta",
        "item/reasoning/summaryPartAdded",
        "item/fileChange/outputDelta",
        "item/fileChange/patchUpdated",
        "item/mcpToolCall/progress",
        "model/rerouted",
        "deprecationNotice",
        "hook/started",
        "hook/completed",
    }
)


class TurnNormalizer:
    """Turn one turn's notifications into ``CodexItem``s."""

    def __init__(self, turn_id: str) -> None:
        self.turn_id = turn_id
        self.file_changes: dict[str, list[Any]] = {}
        """Changes of each fileChange item by id, for its approval request."""
        self._started: set[str] = set()
        self._open_tools: dict[str, None] = {}  # started, not completed (ordered)
        self._texts: dict[str, list[str]] = {}  # streamed text of open messages
        self._reasoning: dict[str, list[str]] = {}
        self._final_text = ""
        self._usage: Usage | None = None
        self._final_error: dict[str, Any] | None = None

    def feed(self, note: Notification) -> list[CodexItem]:
        """Return the items ``note`` stands for; never raises on malformed input."""
        params = note.params
        turn_id = params.get("turnId")
        if isinstance(turn_id, str) and turn_id != self.turn_id:
            return []
        try:
            return self._dispatch(note.method, params)
        except (ValueError, TypeError, LookupError, AttributeError):
            # A known notification whose fields do not fit: a CLI change costs one line.
            logger.warning("codex: dropping malformed %s notification", note.method, exc_info=True)
            return []

    def _dispatch(self, method: str, params: dict[str, Any]) -> list[CodexItem]:
        if method == "item/agentMessage/delta":
            item_id, delta = params["itemId"], params["delta"]
            self._texts.setdefault(item_id, []).append(delta)
            return [MessageDelta(message_id=item_id, text=delta)]
        if method in _REASONING_DELTAS:
            item_id, delta = params["itemId"], params["delta"]
            self._reasoning.setdefault(item_id, []).append(delta)
            return [ReasoningDelta(message_id=item_id, text=delta)]
        if method == "item/commandExecution/outputDelta":
            return [ToolOutput(tool_id=params["itemId"], text=params["delta"])]
        if method == "item/started":
            return self._item_started(_dict(params.get("item")))
        if method == "item/completed":
            return self._item_completed(_dict(params.get("item")))
        if method == "thread/tokenUsage/updated":
            self._add_usage(_dict(_dict(params.get("tokenUsage")).get("last")))
            return [] if self._usage is None else [UsageSoFar(usage=self._usage)]
        if method == "error":
            if params.get("willRetry") is True:
                return [retry_notice(params)]
            self._final_error = _dict(params.get("error"))
            return []
        if method == "warning":
            message = params.get("message")
            return [Warning(message=message, code="codex_warning")] if message else []
        if method == "serverRequest/resolved":
            return [ApprovalWithdrawn(request_id=str(params["requestId"]))]
        if method == "turn/plan/updated":
            return [_plan(params)]
        if method == "turn/completed":
            return self._turn_completed(_dict(params.get("turn")))
        if method not in _IGNORED:
            logger.debug("codex: skipping notification %s", method)
        return []

    # --- items ----------------------------------------------------------------------------

    def _item_started(self, item: dict[str, Any]) -> list[CodexItem]:
        item_id, item_type = item["id"], item.get("type")
        if item_id in self._started:
            return []  # re-announced after a stream retry (reference §2.4, obs)
        self._started.add(item_id)
        if item_type == "fileChange":
            self.file_changes[item_id] = _list(item.get("changes"))
        if item_type not in TOOL_KINDS:
            return []
        self._open_tools[item_id] = None
        return [tool_started(item)]

    def _item_completed(self, item: dict[str, Any]) -> list[CodexItem]:
        item_id, item_type = item["id"], item.get("type")
        if item_type == "agentMessage":
            self._texts.pop(item_id, None)
            self._final_text = text = item.get("text") or ""
            return [MessageCompleted(message_id=item_id, text=text)]
        if item_type == "reasoning":
            streamed = self._reasoning.pop(item_id, None)
            parts = _list(item.get("summary")) or _list(item.get("content"))
            text = "\n\n".join(p for p in parts if isinstance(p, str))
            if not text and streamed is None:
                return []
            return [ReasoningCompleted(message_id=item_id, text=text or "".join(streamed or []))]
        if item_type not in TOOL_KINDS:
            return []
        items: list[CodexItem] = []
        if item_id not in self._started:
            # Completed without a start (a file change Codex applied at once): announce it so
            # every tool.completed has its tool.started.
            self._started.add(item_id)
            items.append(tool_started(item))
        elif item_id not in self._open_tools:
            return []  # completed twice
        self._open_tools.pop(item_id, None)
        items.append(tool_completed(item))
        return items

    def _add_usage(self, last: dict[str, Any]) -> None:
        # Each model request of the turn sends one update; `last` is that request alone and
        # `total` the thread's running sum (obs, 0.169.0: two requests → last 112 twice,
        # total 112 then 224; after a restart and `thread/resume` the total carried on, 336 on
        # the third turn). Summing `last` needs no baseline, which a resumed thread lacks:
        # Codex replays the previous turn's update on resume, under that turn's id.
        previous = self._usage or Usage()
        self._usage = Usage(
            input_tokens=previous.input_tokens + _int(last.get("inputTokens")),
            output_tokens=previous.output_tokens + _int(last.get("outputTokens")),
            cached_input_tokens=previous.cached_input_tokens + _int(last.get("cachedInputTokens")),
            cache_creation_input_tokens=previous.cache_creation_input_tokens
            + _int(last.get("cacheWriteInputTokens")),
        )

    # --- the end --------------------------------------------------------------------------

    def _turn_completed(self, turn: dict[str, Any]) -> list[CodexItem]:
        if turn.get("id") != self.turn_id:
            return []
        items: list[CodexItem] = self.flush()
        if self._usage is not None:
            items.append(UsageReported(usage=self._usage))
        status = turn.get("status")
        outcome: TurnOutcome
        if status == "completed":
            outcome = TurnOutcome(
                status="completed", final_text=self._final_text, usage=self._usage
            )
        elif status == "interrupted":
            outcome = TurnOutcome(
                status="interrupted", usage=self._usage, error=interrupted_error()
            )
        else:
            error = turn.get("error") or self._final_error
            outcome = TurnOutcome(status="failed", usage=self._usage, error=error_for_turn(error))
        items.append(TurnEnded(outcome=outcome))
        return items

    def flush(self) -> list[CodexItem]:
        """Close what the turn left open: streamed messages and tools that never completed."""
        items: list[CodexItem] = [
            MessageCompleted(message_id=item_id, text="".join(parts))
            for item_id, parts in self._texts.items()
        ]
        items += [
            ReasoningCompleted(message_id=item_id, text="".join(parts))
            for item_id, parts in self._reasoning.items()
        ]
        items += [ToolCompleted(tool_id=tool_id, status="failed") for tool_id in self._open_tools]
        self._texts.clear()
        self._reasoning.clear()
        self._open_tools.clear()
        return items


# TurnPlanStepStatus of app-server v2 (0.169.0 schema); the model's ``update_plan`` input
# spells the middle one ``in_progress``, which older servers passed through.
_PLAN_STATUSES: dict[str, PlanStatus] = {
    "pending": "pending",
    "inProgress": "in_progress",
    "in_progress": "in_progress",
    "completed": "completed",
}


def _plan(params: dict[str, Any]) -> PlanUpdated:
    entries = []
    for step in params["plan"]:
        status = _PLAN_STATUSES.get(step["status"])
        if status is None:
            raise ValueError(f"unknown plan step status {step['status']!r}")
        entries.append(PlanEntry(text=step["step"], status=status))
    return PlanUpdated(entries=entries)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
