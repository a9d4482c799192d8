"""Deciding what to answer, API-neutrally: the directives of a prompt as a ``Plan`` (text
chunks, tool calls) or a fault (``ErrorPlan``, ``CutPlan``, ``HangPlan``); each wire format
only renders the plan (see the package's docstring for the directives)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

DEFAULT_TEXT = "Hello from stub."
SIDE_TEXT = "Stub side reply."
TOOL_PREAMBLE = "I will run a command."
CALL_PREAMBLE = "I will use a tool."
INPUT_TOKENS = 12
OUTPUT_TOKENS = 7
SLOW_TICK_SECONDS = 0.05
LONG_CHUNK = 20
LONG_SENTENCE = "The stub streams a long reply in many small pieces. "
KEEPALIVE_SECONDS = 0.5
USAGE_LIMIT_MESSAGE = "You have reached your usage limit for this period."

_TOOL_RE = re.compile(r"\[\[tool:bash\s+(.*?)\]\]", re.DOTALL)
_CALL_RE = re.compile(r"\[\[call:\s*([A-Za-z0-9_.:-]+)\s+(\{.*?\})\s*\]\]", re.DOTALL)
_SLOW_RE = re.compile(r"\[\[slow:\s*([0-9]+(?:\.[0-9]+)?)\s*\]\]")
_ERROR_RE = re.compile(r"\[\[error:\s*([0-9]{3})\s*\]\]")
_ECHO_RE = re.compile(r"\[\[echo\]\]")
_LONG_RE = re.compile(
    r"\[\[long:\s*([0-9]+)\s*(?:@\s*([0-9]+(?:\.[0-9]+)?)\s*(?:/\s*([0-9]+)\s*)?)?\]\]"
)
_FAIL_RE = re.compile(r"\[\[fail:\s*([0-9]{3})\s*:\s*([0-9]+)\s*\]\]")
_CUT_RE = re.compile(r"\[\[cut:\s*([0-9]+)\s*(?::\s*([0-9]+)\s*)?\]\]")
_HANG_RE = re.compile(r"\[\[hang\]\]")
_USAGE_LIMIT_RE = re.compile(r"\[\[usage_limit:\s*([0-9]+(?:\.[0-9]+)?)\s*\]\]")


_REASONS = {529: "Overloaded"}


def reason_phrase(status: int) -> str:
    """The reason phrase of an HTTP status (the API's own for 529)."""
    if status in _REASONS:
        return _REASONS[status]
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def block_text(content: Any) -> list[str]:
    """The text of a message ``content`` (a string or a list of blocks)."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                out.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                text = block.get("text")
                if isinstance(text, str):
                    out.append(text)
    return out


def _last_user_message(body: Any) -> dict[str, Any] | None:
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return None
    for message in reversed(body["messages"]):
        if isinstance(message, dict) and message.get("role") == "user":
            return message
    return None


def last_user_text(body: Any) -> str:
    """All text of the last ``user`` message of a Messages API body, blocks joined by newlines."""
    message = _last_user_message(body)
    if message is None:
        return ""
    return "\n".join(block_text(message.get("content")))


def user_texts(body: Any) -> list[str]:
    """The text of every ``user`` message of a Messages API body, oldest first."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return []
    return [
        "\n".join(block_text(message.get("content")))
        for message in body["messages"]
        if isinstance(message, dict) and message.get("role") == "user"
    ]


def last_tool_result(body: Any) -> dict[str, Any] | None:
    message = _last_user_message(body)
    if message is None or not isinstance(message.get("content"), list):
        return None
    for block in reversed(message["content"]):
        if isinstance(block, dict) and block.get("type") == "tool_result":
            return block
    return None


def is_side_request(body: Any) -> bool:
    """True for Claude Code's auxiliary calls (titles, topic checks, bash prefix checks...).

    Claude Code's tool-free helper calls send ``"tools": []`` with thinking off and usually a
    ``haiku`` model; quota probes ask for one token. The agent loop always sends thinking (and its
    tools, unless ``--tools ""``). A body without a ``tools`` key at all (a hand-written test
    request) counts as a main request.
    """
    if not isinstance(body, dict):
        return False
    if "haiku" in str(body.get("model") or "").lower():
        return True
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and max_tokens <= 1:
        return True
    thinking = body.get("thinking")
    thinking_on = isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled")
    return "tools" in body and not body["tools"] and not thinking_on


@dataclass(frozen=True)
class TextPart:
    """API-neutral plan step: assistant text streamed as ``chunks``."""

    chunks: tuple[str, ...]
    delay: float = 0.0  # seconds before each chunk after the first

    @property
    def text(self) -> str:
        return "".join(self.chunks)


@dataclass(frozen=True)
class CommandCall:
    """API-neutral plan step: the model calls the client's own shell tool with ``command``."""

    command: str


@dataclass(frozen=True)
class NamedCall:
    """API-neutral plan step: the model calls the client's tool ``name`` with ``input`` as it
    is (``[[call:<name> <json object>]]``: a plan, a question, any tool the client offers)."""

    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Plan:
    """What the stub answers, independent of the wire format (Anthropic, Responses, Chat)."""

    parts: tuple[TextPart | CommandCall | NamedCall, ...]

    @property
    def calls_tool(self) -> bool:
        return any(isinstance(part, CommandCall | NamedCall) for part in self.parts)

    @property
    def text(self) -> str:
        return "".join(part.text for part in self.parts if isinstance(part, TextPart))


@dataclass(frozen=True)
class ErrorPlan:
    """API-neutral plan: answer HTTP ``status`` with the format's error body."""

    status: int
    message: str
    retry_after: str | None = None  # the ``retry-after`` header to send, if any
    resets_at: int | None = None
    """A usage limit (``[[usage_limit]]``): when it resets, in Unix seconds; each format
    renders the body and headers its CLI reads as a usage limit with that reset time."""


@dataclass(frozen=True)
class CutPlan:
    """API-neutral fault: ``deltas`` text deltas, then the connection is dropped."""

    deltas: int

    @property
    def chunks(self) -> tuple[str, ...]:
        return tuple(f"part {n} " for n in range(1, self.deltas + 1))


@dataclass(frozen=True)
class HangPlan:
    """API-neutral fault: the start of a stream, then keep-alive only, forever."""


Fault = ErrorPlan | CutPlan | HangPlan


def fault_directive(
    conversation: str,
    take: Callable[[str, int], bool] = lambda _key, _limit: True,
    limited: Callable[[str, float], int | None] = lambda _key, _seconds: None,
) -> Fault | None:
    """The fault a request plays, from the text of all its user messages.

    ``take(directive_text, n)`` says whether a directive limited to ``n`` requests still plays
    (and counts this use); the default plays every one (no counting). ``limited(directive_text,
    seconds)`` is the reset time (Unix seconds) of a usage limit still in force, None once it
    has reset. ``usage_limit`` comes first, then ``fail``, ``cut`` and ``hang``.
    """
    for match in _USAGE_LIMIT_RE.finditer(conversation):
        resets_at = limited(match.group(0), float(match.group(1)))
        if resets_at is not None:
            return ErrorPlan(429, USAGE_LIMIT_MESSAGE, resets_at=resets_at)
    for match in _FAIL_RE.finditer(conversation):
        if take(match.group(0), int(match.group(2))):
            status = int(match.group(1))
            return ErrorPlan(status, reason_phrase(status), retry_after="0")
    for match in _CUT_RE.finditer(conversation):
        limit = match.group(2)
        if limit is None or take(match.group(0), int(limit)):
            return CutPlan(int(match.group(1)))
    if _HANG_RE.search(conversation):
        return HangPlan()
    return None


def chunked(text: str, parts: int = 3) -> tuple[str, ...]:
    """Split ``text`` at spaces into ``parts`` (or fewer, if it has fewer words) pieces."""
    words = re.findall(r"\s*\S+", text) or [text]
    size = max(1, -(-len(words) // parts))
    return tuple("".join(words[i : i + size]) for i in range(0, len(words), size))


def _text_plan(text: str) -> Plan:
    return Plan((TextPart(chunked(text)),))


def plan_reply(
    prompt: str, *, tool_output: str | None = None, side: bool = False, message_count: int = 0
) -> Plan | ErrorPlan:
    """The directive logic shared by every wire format.

    ``prompt`` is the text of the last user message, ``tool_output`` the result of the tool call
    the client is reporting back (None when the last input is not a tool result), ``side`` marks
    auxiliary requests (titles, summaries: plain text whatever the prompt says) and
    ``message_count`` feeds ``[[echo]]``.
    """
    if side:
        return _text_plan(SIDE_TEXT)
    if tool_output is not None:
        return _text_plan(f"Tool said: {tool_output}")
    if match := _ERROR_RE.search(prompt):
        status = int(match.group(1))
        return ErrorPlan(status, reason_phrase(status))
    if match := _TOOL_RE.search(prompt):
        return Plan((TextPart((TOOL_PREAMBLE,)), CommandCall(match.group(1).strip())))
    if match := _CALL_RE.search(prompt):
        arguments = json.loads(match.group(2))
        return Plan((TextPart((CALL_PREAMBLE,)), NamedCall(match.group(1), arguments)))
    if match := _SLOW_RE.search(prompt):
        ticks = max(1, round(float(match.group(1)) / SLOW_TICK_SECONDS))
        chunks = tuple(f"tick {n} " for n in range(1, ticks + 1))
        return Plan((TextPart(chunks, delay=SLOW_TICK_SECONDS),))
    if match := _LONG_RE.search(prompt):
        size = max(1, int(match.group(1)))
        rate = float(match.group(2) or 0)
        step = max(1, int(match.group(3) or LONG_CHUNK))
        text = (LONG_SENTENCE * (size // len(LONG_SENTENCE) + 1))[:size]
        chunks = tuple(text[i : i + step] for i in range(0, size, step))
        return Plan((TextPart(chunks, delay=1 / rate if rate > 0 else 0.0),))
    if _ECHO_RE.search(prompt):
        return _text_plan(f"Echo: {message_count}")
    return _text_plan(DEFAULT_TEXT)
