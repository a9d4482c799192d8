"""One turn's OpenCode events → normalized items (pure, no I/O).

A ``TurnNormalizer`` lives for one turn of one thread and is fed that thread's events off
``/global/event`` (reference §3.2; 1.18.33, obs):

- nothing counts until ``session.status {busy}``: events before it are the previous turn's
  stragglers (an abort ends with *two* ``session.idle``; a turn's last ``message.updated``
  arrive after its idle)
- ``message.part.delta`` on a text / reasoning part → ``MessageDelta`` / ``ReasoningDelta``
  (``message_id`` is the part id, shared with the completed event)
- ``message.part.updated`` text / reasoning with ``time.end`` → ``MessageCompleted`` /
  ``ReasoningCompleted``; tool parts → ``ToolStarted`` once per ``callID`` (when its input is
  known) and ``ToolCompleted`` (completed / error; denied when a permission refused it)
- ``permission.asked`` → ``ApprovalAsked``; ``permission.replied`` → ``ApprovalWithdrawn``
  (the provider drops it if the gateway itself answered)
- ``question.asked`` → ``QuestionAsked``; ``question.replied`` / ``question.rejected`` →
  ``ApprovalWithdrawn`` (likewise)
- ``session.status {retry}`` → ``RetryScheduled(source="cli")``
- ``session.error`` (or an assistant message's ``error``) → the turn's error
- a ``step-finish`` part (a model call ended) → ``UsageSoFar``, what the turn used so far
- ``session.idle`` → ``UsageReported`` then ``TurnEnded``; nothing after that

Usage sums the turn's assistant messages (``message.updated``; each snapshot replaces the
last of the same message), falling back to ``step-finish`` parts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Literal, TypeAlias

from pydantic import JsonValue

from app.events import (
    EventData,
    MessageCompleted,
    MessageDelta,
    ReasoningCompleted,
    ReasoningDelta,
    RetryScheduled,
    ToolCompleted,
    ToolStarted,
    TurnError,
    Usage,
    UsageReported,
)
from app.providers.base import TurnOutcome
from app.providers.items import (
    ApprovalAsked,
    ApprovalWithdrawn,
    QuestionAsked,
    TurnEnded,
    UsageSoFar,
)
from app.providers.opencode.classifier import error_for_session_error, kind_for_retry
from app.providers.opencode.permissions import approval_request
from app.providers.opencode.questions import question_request
from app.providers.opencode.sse import ServerEvent
from app.providers.opencode.tools import is_denial, tool_kind
from app.providers.output import tool_output
from app.providers.raw import as_dict, as_int, as_list, as_number, as_opt_int, as_str

__all__ = [
    "ApprovalAsked",
    "ApprovalWithdrawn",
    "OpenCodeItem",
    "QuestionAsked",
    "TurnEnded",
    "TurnNormalizer",
]

logger = logging.getLogger(__name__)

OpenCodeItem: TypeAlias = (
    EventData | ApprovalAsked | ApprovalWithdrawn | QuestionAsked | UsageSoFar | TurnEnded
)
"""What the normalizer hands the turn: event payloads and the items it acts on."""

_PartKind = Literal["text", "reasoning"]


class TurnNormalizer:
    """Turn one thread's events during one turn into ``OpenCodeItem``s."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock  # epoch seconds, to turn a retry's `next` into a delay
        self.armed = False
        """``session.status {busy}`` was seen: the thread is working on this turn."""
        self._ended = False
        self._roles: dict[str, str] = {}
        self._kinds: dict[str, _PartKind] = {}
        self._streamed: dict[str, list[str]] = {}  # part id → deltas not yet completed
        self._done_parts: set[str] = set()
        self._texts: dict[str, list[str]] = {}  # assistant message id → its completed texts
        self._tools_started: set[str] = set()
        self._tools_done: set[str] = set()
        self._asked: dict[str, str] = {}  # permission request id → tool call id
        self._denied: set[str] = set()
        self._messages: dict[str, dict[str, Any]] = {}  # assistant message id → last info
        self._steps: dict[str, dict[str, Any]] = {}  # step-finish part id → part
        self._error: TurnError | None = None

    @property
    def ended(self) -> bool:
        return self._ended

    def feed(self, event: ServerEvent) -> list[OpenCodeItem]:
        """Return the items ``event`` stands for; never raises on malformed input."""
        if self._ended:
            return []
        if not self.armed:
            status = as_dict(event.properties.get("status"))
            self.armed = event.type == "session.status" and status.get("type") == "busy"
            info = as_dict(event.properties.get("info"))
            if event.type == "message.updated" and info.get("role") == "user":
                # The prompt's own message comes before `busy`: remember it is the user's.
                self._roles[as_str(info.get("id")) or ""] = "user"
            return []
        try:
            return self._dispatch(event)
        except (ValueError, TypeError, LookupError, ArithmeticError):
            # A known type whose fields do not fit (pydantic's ValidationError is a
            # ValueError): a CLI change must cost one event, never the turn.
            logger.warning("opencode: dropping malformed %r event", event.type, exc_info=True)
            return []

    def finish(self, last_message: dict[str, Any] | None = None) -> list[OpenCodeItem]:
        """End the turn now (the thread is idle but its ``session.idle`` was not seen).

        ``last_message`` is the thread's last ``{info, parts}`` from
        ``GET /session/{id}/message``, to learn an error or text the stream did not bring.
        """
        if self._ended:
            return []
        items: list[OpenCodeItem] = []
        info = as_dict(last_message.get("info")) if last_message is not None else {}
        if last_message is not None and info.get("role") == "assistant":
            self._message_updated(info)
            for part in as_list(last_message.get("parts")):
                if as_dict(part).get("type") == "text":
                    items += self._completed(as_dict(part), "text")
        return items + self._end()

    # --- dispatch -------------------------------------------------------------------------

    def _dispatch(self, event: ServerEvent) -> list[OpenCodeItem]:
        props = event.properties
        match event.type:
            case "message.part.delta":
                return self._delta(props)
            case "message.part.updated":
                return self._part(as_dict(props.get("part")))
            case "message.updated":
                self._message_updated(as_dict(props.get("info")))
                return []
            case "permission.asked":
                return self._permission_asked(props)
            case "permission.replied":
                return self._permission_replied(props)
            case "question.asked":
                question = question_request(props)
                return [QuestionAsked(request=question)] if question is not None else []
            case "question.replied" | "question.rejected":
                request_id = as_str(props.get("requestID"))
                return [ApprovalWithdrawn(request_id=request_id)] if request_id else []
            case "session.status":
                return self._status(as_dict(props.get("status")))
            case "session.error":
                error = props.get("error")
                if isinstance(error, dict) and self._error is None:
                    self._error = error_for_session_error(error)
                return []
            case "session.idle":
                return self._end()
            case _:
                return []

    def _delta(self, props: dict[str, Any]) -> list[OpenCodeItem]:
        part_id = as_str(props.get("partID"))
        delta = as_str(props.get("delta"))
        if not part_id or not delta or props.get("field") != "text":
            return []
        if self._roles.get(as_str(props.get("messageID")) or "") == "user":
            return []
        self._streamed.setdefault(part_id, []).append(delta)
        if self._kinds.get(part_id, "text") == "reasoning":
            return [ReasoningDelta(message_id=part_id, text=delta)]
        return [MessageDelta(message_id=part_id, text=delta)]

    def _part(self, part: dict[str, Any]) -> list[OpenCodeItem]:
        part_type = part.get("type")
        if part_type in ("text", "reasoning"):
            kind: _PartKind = "text" if part_type == "text" else "reasoning"
            part_id = as_str(part.get("id"))
            message_id = as_str(part.get("messageID")) or ""
            if not part_id or self._roles.get(message_id) == "user" or part.get("synthetic"):
                return []
            self._kinds[part_id] = kind
            if as_dict(part.get("time")).get("end") is None:
                return []
            return self._completed(part, kind)
        if part_type == "tool":
            return self._tool(part)
        if part_type == "step-finish" and isinstance(part.get("id"), str):
            self._steps[part["id"]] = part
            # What the turn's model calls used so far, cost included (the messages' own
            # counts come later than their steps').
            usage = _summed(list(self._steps.values()))
            return [] if usage is None else [UsageSoFar(usage=usage)]
        return []

    def _completed(self, part: dict[str, Any], kind: _PartKind) -> list[OpenCodeItem]:
        part_id = as_str(part.get("id")) or ""
        if part_id in self._done_parts:
            return []
        self._done_parts.add(part_id)
        streamed = self._streamed.pop(part_id, None)
        text = as_str(part.get("text")) or ""
        if not text and not streamed:
            return []
        if kind == "reasoning":
            return [ReasoningCompleted(message_id=part_id, text=text)]
        if text:
            self._texts.setdefault(as_str(part.get("messageID")) or "", []).append(text)
        return [MessageCompleted(message_id=part_id, text=text)]

    def _tool(self, part: dict[str, Any]) -> list[OpenCodeItem]:
        call_id = as_str(part.get("callID"))
        name = as_str(part.get("tool"))
        state = as_dict(part.get("state"))
        status = state.get("status")
        if not call_id or not name or call_id in self._tools_done:
            return []
        items: list[OpenCodeItem] = []
        tool_input: dict[str, JsonValue] = as_dict(state.get("input"))
        # `pending` carries no input yet (it is still streaming from the model): announce the
        # call once its input is known, or at its end if that comes first.
        if call_id not in self._tools_started and (tool_input or status in ("completed", "error")):
            self._tools_started.add(call_id)
            items.append(
                ToolStarted(tool_id=call_id, name=name, kind=tool_kind(name), input=tool_input)
            )
        if status == "completed":
            self._tools_done.add(call_id)
            exit_code = as_opt_int(as_dict(state.get("metadata")).get("exit"))
            output = tool_output(as_str(state.get("output")) or "")
            items.append(
                ToolCompleted(
                    tool_id=call_id, status="completed", output=output, exit_code=exit_code
                )
            )
        elif status == "error":
            self._tools_done.add(call_id)
            error = as_str(state.get("error")) or ""
            denied = call_id in self._denied or is_denial(error)
            items.append(
                ToolCompleted(
                    tool_id=call_id,
                    status="denied" if denied else "failed",
                    output=tool_output(error) if error else None,
                )
            )
        return items

    def _message_updated(self, info: dict[str, Any]) -> None:
        message_id = as_str(info.get("id"))
        role = as_str(info.get("role"))
        if not message_id or not role:
            return
        self._roles[message_id] = role
        if role != "assistant":
            return
        self._messages[message_id] = info
        error = info.get("error")
        if isinstance(error, dict) and self._error is None:
            self._error = error_for_session_error(error)

    def _permission_asked(self, props: dict[str, Any]) -> list[OpenCodeItem]:
        request = approval_request(props)
        if request is None:
            return []
        if request.tool_id:
            self._asked[request.request_id] = request.tool_id
        return [ApprovalAsked(request=request)]

    def _permission_replied(self, props: dict[str, Any]) -> list[OpenCodeItem]:
        request_id = as_str(props.get("requestID"))
        if not request_id:
            return []
        call_id = self._asked.pop(request_id, None)
        if call_id and props.get("reply") == "reject":
            self._denied.add(call_id)
        return [ApprovalWithdrawn(request_id=request_id)]

    def _status(self, status: dict[str, Any]) -> list[OpenCodeItem]:
        if status.get("type") != "retry":
            return []
        message = as_str(status.get("message")) or "the model request failed"
        next_at = as_number(status.get("next"))  # epoch milliseconds
        delay = max(next_at / 1000 - self._clock(), 0.0) if next_at is not None else None
        return [
            RetryScheduled(
                source="cli",
                attempt=as_int(status.get("attempt"), default=1),
                max_attempts=None,  # OpenCode does not say; it retries until it gives up
                delay_s=round(delay, 3) if delay is not None else None,
                kind=kind_for_retry(message),
                message=message,
            )
        ]

    # --- the end --------------------------------------------------------------------------

    def _end(self) -> list[OpenCodeItem]:
        self._ended = True
        items: list[OpenCodeItem] = []
        # Parts an abort cut short never get their final update before the idle.
        for part_id, deltas in self._streamed.items():
            text = "".join(deltas)
            if self._kinds.get(part_id, "text") == "reasoning":
                items.append(ReasoningCompleted(message_id=part_id, text=text))
            else:
                items.append(MessageCompleted(message_id=part_id, text=text))
        self._streamed.clear()
        usage = self._usage()
        if usage is not None:
            items.append(UsageReported(usage=usage))
        items.append(TurnEnded(outcome=self._outcome(usage)))
        return items

    def _outcome(self, usage: Usage | None) -> TurnOutcome:
        last = list(self._messages.values())[-1] if self._messages else {}
        stop_reason = as_str(last.get("finish"))
        error = self._error
        if error is not None:
            status: Literal["failed", "interrupted"] = (
                "interrupted" if error.kind == "interrupted" else "failed"
            )
            return TurnOutcome(status=status, usage=usage, stop_reason=stop_reason, error=error)
        texts = list(self._texts.values())
        final_text = "\n\n".join(texts[-1]) if texts else ""
        return TurnOutcome(
            status="completed", final_text=final_text, usage=usage, stop_reason=stop_reason
        )

    def _usage(self) -> Usage | None:
        return _summed(list(self._messages.values()) or list(self._steps.values()))


def _summed(sources: list[dict[str, Any]]) -> Usage | None:
    """The tokens and cost of assistant messages or step-finish parts together."""
    if not sources:
        return None
    tokens = [as_dict(source.get("tokens")) for source in sources]
    caches = [as_dict(t.get("cache")) for t in tokens]
    costs = [as_number(source.get("cost")) for source in sources]
    known = [cost for cost in costs if cost is not None]
    return Usage(
        input_tokens=sum(_count(t.get("input")) for t in tokens),
        # OpenCode counts reasoning apart from output; the model bills both as output.
        output_tokens=sum(_count(t.get("output")) + _count(t.get("reasoning")) for t in tokens),
        cached_input_tokens=sum(_count(c.get("read")) for c in caches),
        cache_creation_input_tokens=sum(_count(c.get("write")) for c in caches),
        cost_usd=sum(known) if known else None,
    )


def _count(value: object) -> int:
    # Token counts are JSON numbers in the OpenAPI schema, not necessarily integers.
    number = as_number(value)
    return int(number) if number is not None and number > 0 else 0
