"""A stub LLM server for end-to-end tests of the real agent CLIs.

It speaks the Anthropic Messages API (Claude Code) and, through ``tests.stub_openai``, the OpenAI
Responses API (Codex) and Chat Completions API (OpenCode, Copilot, Qwen Code, CodeBuddy), and
through ``tests.stub_gemini`` the Gemini API (Gemini CLI), all on one port.

Usage from a test (sync or async, it does not matter: the server runs its own event loop in a
background thread)::

    with StubLLM() as stub:
        env["ANTHROPIC_BASE_URL"] = stub.base_url       # http://127.0.0.1:<free port>
        ...run claude...
        stub.wait_for_requests(1, timeout=10)
        body = stub.message_requests()[-1].body

Standalone, for poking at it by hand: ``python -m tests.stub_llm --port 8089``.

Routes
------
* ``POST /v1/messages`` (Claude Code posts to ``/v1/messages?beta=true``): streaming SSE when the
  body has ``"stream": true``, else one JSON ``Message``. The SSE sequence is the real API's:
  ``message_start``, ``ping``, per block ``content_block_start`` / ``content_block_delta``
  (``text_delta`` or ``input_json_delta``) / ``content_block_stop``, ``message_delta`` (stop_reason,
  usage) and ``message_stop``. Usage is fixed: 12 input tokens, 7 output tokens.
* ``POST /v1/messages/count_tokens``: ``{"input_tokens": 12}``.
* ``POST /v1/responses`` (OpenAI Responses API, Codex) and ``POST /v1/chat/completions`` (OpenAI
  Chat Completions, OpenCode): the same directives in those wire formats, see ``tests.stub_openai``;
  point the CLIs at ``stub.openai_base_url`` (``http://127.0.0.1:PORT/v1``).
* anything else: 404 with an Anthropic error body (no body for ``HEAD``).
Every request is recorded (``stub.requests``), including the ones answered 404.

One API can be made slower than the others: ``StubLLM(delays={"openai": 2.0})``, or setting
``stub.delays`` while it runs, waits that many seconds before the first byte of every answer to
that API's model requests (``anthropic``: ``/v1/messages``; ``openai``: ``/v1/responses`` and
``/v1/chat/completions``; ``gemini``), as a slower model would; routing tests use it.
An API can be taken down while the stub runs: ``stub.down["anthropic"] = 401`` answers every
model request of that API (``anthropic`` or ``openai``) with that status and the format's
error body, whatever the prompt says (a revoked key, an outage); failover tests use it.

The directives are decided once, API-neutrally, by ``plan_reply`` (text chunks, a shell command
call, an error status; ``Plan`` / ``ErrorPlan``); each wire format only renders the plan.

Behaviour, chosen from the text of the LAST ``user`` message (string content or every ``text``
block of a block list, so ``<system-reminder>`` blocks the CLI adds are searched too):

* the last user message holds a ``tool_result`` block -> text ``Tool said: <result text>``,
  ``end_turn`` (checked first);
* ``[[tool:bash <command>]]`` -> text block ``I will run a command.`` then a ``Bash`` ``tool_use``
  with input ``{"command": "<command>", "description": "run command"}``,
  ``stop_reason`` ``tool_use``;
  ids are ``toolu_stub_<n>`` (fresh per request);
* ``[[call:<name> <json object>]]`` -> text block ``I will use a tool.`` then a ``tool_use`` of
  the tool ``<name>`` with that input as it is (``TodoWrite``, ``AskUserQuestion``, Codex's
  ``update_plan``, OpenCode's ``question``: whatever the client offers), ``stop_reason``
  ``tool_use``; the OpenAI formats render it as a function call with those arguments;
* ``[[slow:<seconds>]]`` -> text deltas ``tick <n> `` every 0.05 s for that long, then ``end_turn``;
  stops quietly as soon as the client goes away;
* ``[[long:<chars>]]`` -> ``<chars>`` characters of text (a sentence repeated) in text deltas
  of ``LONG_CHUNK`` characters each, sent back to back, then ``end_turn`` (streaming benchmarks);
  ``[[long:<chars>@<deltas_per_s>]]`` paces them instead, ``1 / <deltas_per_s>`` seconds before
  each delta after the first (like a real model's token stream; each pause is a sleep, so the
  rate is at most that), and ``[[long:<chars>@<deltas_per_s>/<chars_per_delta>]]`` also sets
  the size of a delta (e.g. ``[[long:3000@150/4]]``: 750 deltas of 4 characters in ~5 s);
* ``[[error:<status>]]`` -> that HTTP status with ``{"type": "error", "error": {...}}``
  (``overloaded_error`` for 529, ``rate_limit_error`` + ``retry-after: 0`` for 429,
  ``authentication_error`` for 401, ``api_error`` otherwise); every retry gets the same answer;
* ``[[echo]]`` -> text ``Echo: <number of entries in "messages">``;
* otherwise -> ``Hello from stub.`` in three ``text_delta`` chunks, ``end_turn``.

Fault directives (``fault_directive``; all three wire formats) are searched in EVERY user message
of the request, not only the last one, so they keep playing when a later attempt of the same
conversation sends another prompt (a gateway's continuation prompt) in the same thread. They are
checked before everything above, side requests excepted:

* ``[[fail:<status>:<n>]]`` -> the first ``n`` model requests of a conversation holding this
  directive answer ``<status>`` with the format's error body and ``retry-after: 0``; later ones
  are answered as if the directive were not there (``Hello from stub.`` for a bare prompt). The
  count is kept per directive text in the ``StubLLM`` instance (``fault_uses``), shared by every
  conversation that holds the same text;
* ``[[cut:<k>]]`` -> the start of the stream and ``k`` text deltas (``part 1 ``, ``part 2 ``, ...),
  then the connection is dropped without the closing events (nor the chunked terminator), on
  every request of that conversation; ``[[cut:<k>:<n>]]`` only on the first ``n`` (counted like
  ``fail``). A non-streaming request gets its status line, headers and half of its body, then the
  drop;
* ``[[usage_limit:<seconds>]]`` -> a usage limit that resets ``<seconds>`` after the first
  request carrying it (rounded up to a whole second): until then every request of that
  conversation answers 429 the way each API reports a subscription limit (Anthropic:
  ``rate_limit_error`` with ``anthropic-ratelimit-unified-status: rejected`` and
  ``anthropic-ratelimit-unified-reset: <unix seconds>``; Responses / Chat: an
  ``usage_limit_reached`` error with ``resets_at`` and ``resets_in_seconds``, and Codex's
  ``x-codex-primary-*`` rate-limit headers), no ``retry-after``; afterwards it is as if the
  directive were not there;
* ``[[hang]]`` -> the start of the stream, then only keep-alive (Anthropic ``ping`` events, SSE
  ``: ping`` comments for the OpenAI formats) every ``KEEPALIVE_SECONDS`` until the client goes
  away; a non-streaming request gets nothing at all until then.

The recorded response of a cut says ``cut=True`` (and ``completed=False``).

Side requests
-------------
Observed with Claude Code 2.1.330 run the way the end-to-end tests run it (stream-json in and out,
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``, private network namespace), in every scenario tried
(text, two turns, tool allow/deny, interrupt, resume, 529 with retries, every permission mode):

* exactly one streaming ``POST /v1/messages?beta=true`` per model step, all on one keep-alive
  connection (strace: a single ``connect()``, to 127.0.0.1:PORT; nothing else, no DNS);
* no ``count_tokens``, no ``HEAD /``, no title / topic / bash-prefix side calls;
* body: ``model`` ``claude-opus-5-5`` (unless ``--model``), 13 tools (``Agent``, ``Bash``, ``Edit``,
  ``Read``, ``Write``, ``ToolSearch``, ...; ``"tools": []`` with ``--tools ""``), ``thinking``
  ``{"type": "adaptive"}``, ``max_tokens`` 128000, ``system`` a list of text blocks, ~54 KB;
* ``messages`` is ``[user, system, assistant, user, ...]``: the first user message is a
  ``<system-reminder>`` text block followed by the prompt, and a ``role: "system"`` message
  (environment, deferred tools) follows it. After an interrupt the next request's last user
  message is ``[Request interrupted by user]`` and the new prompt merged into one message;
* headers: ``x-api-key``, ``anthropic-version: 2023-06-01``, ``anthropic-beta``,
  ``x-claude-code-session-id``, ``user-agent: claude-cli/2.1.330 (external, sdk-cli)``.

The binary does contain tool-free helper calls (session title with a JSON-schema output format,
tool-use summaries, ...: ``"tools": []``, thinking off, usually the small ``haiku`` model) and
forked side queries (prompt suggestions, resume cache warm-up) that reuse the main request's
shape. Helper calls often quote the user's prompt, directives included, so they never get a
directive's behaviour: ``is_side_request`` spots them and they get the plain text
``Stub side reply.`` (``end_turn``), streamed or not as asked. Forked queries end in a prompt of
their own, so they get the default text.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import math
import re
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, NoReturn
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "DEFAULT_TEXT",
    "INPUT_TOKENS",
    "KEEPALIVE_SECONDS",
    "OPENAI_PATHS",
    "OUTPUT_TOKENS",
    "SIDE_TEXT",
    "CommandCall",
    "CutPlan",
    "ErrorPlan",
    "Fault",
    "HangPlan",
    "NamedCall",
    "Plan",
    "RecordedRequest",
    "RecordedResponse",
    "StubLLM",
    "TextPart",
    "fault_directive",
    "is_side_request",
    "last_user_text",
    "plan_reply",
    "user_texts",
]

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
MAX_HEADER_BYTES = 64 * 1024
STREAM_LIMIT = 16 * 1024 * 1024

_log = logging.getLogger(__name__)

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

# Served by tests/stub_openai.py: Responses API (Codex) and Chat Completions (OpenCode).
OPENAI_PATHS = frozenset({"/v1/responses", "/v1/chat/completions"})

_REASONS = {529: "Overloaded"}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


# --------------------------------------------------------------------------------------------
# Recorded requests


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request as the stub received it."""

    method: str
    target: str  # path with query string, as sent: "/v1/messages?beta=true"
    headers: dict[str, str]  # lower-cased names; repeated headers joined with ", "
    raw_body: bytes
    body: Any  # parsed JSON, or None when the body was empty or not JSON
    received_at: float = field(default_factory=time.monotonic)

    @property
    def path(self) -> str:
        """The path without its query string: ``/v1/messages``."""
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.target).query)

    @property
    def is_message(self) -> bool:
        return self.method == "POST" and self.path == "/v1/messages"

    @property
    def is_openai(self) -> bool:
        """``POST /v1/responses`` or ``POST /v1/chat/completions``."""
        return self.method == "POST" and self.path in OPENAI_PATHS

    @property
    def is_gemini(self) -> bool:
        """A Gemini API request (``…/models/{model}:generateContent`` and the like)."""
        from tests.stub_gemini import is_gemini  # noqa: PLC0415 (import cycle)

        return is_gemini(self)

    @property
    def is_side(self) -> bool:
        """An auxiliary model call (title, summary...) of any of the four formats."""
        if self.is_gemini:
            from tests.stub_gemini import is_json_request  # noqa: PLC0415 (import cycle)

            return is_json_request(self.body)
        if self.is_openai:
            from tests.stub_openai import is_openai_side_request  # noqa: PLC0415 (import cycle)

            return is_openai_side_request(self.body)
        return self.is_message and is_side_request(self.body)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The ``messages`` array of a Messages API body (empty for anything else)."""
        if isinstance(self.body, dict) and isinstance(self.body.get("messages"), list):
            return [m for m in self.body["messages"] if isinstance(m, dict)]
        return []

    @property
    def conversation_text(self) -> str:
        """Every user message's text, joined by newlines: where fault directives are searched."""
        if self.is_gemini:
            from tests.stub_gemini import gemini_user_texts  # noqa: PLC0415 (import cycle)

            return "\n".join(gemini_user_texts(self.body))
        if self.is_openai:
            from tests.stub_openai import openai_user_texts  # noqa: PLC0415 (import cycle)

            return "\n".join(openai_user_texts(self))
        return "\n".join(user_texts(self.body))

    @property
    def last_user_text(self) -> str:
        """The prompt text the answer was chosen from (any of the four formats)."""
        if self.is_gemini:
            from tests.stub_gemini import gemini_input  # noqa: PLC0415 (import cycle)

            return gemini_input(self.body)[0]
        if self.is_openai:
            from tests.stub_openai import openai_last_user_text  # noqa: PLC0415 (import cycle)

            return openai_last_user_text(self)
        return last_user_text(self.body)


@dataclass(frozen=True)
class RecordedResponse:
    """How the stub answered ``request`` (``completed`` is False if the client left mid-way)."""

    request: RecordedRequest
    status: int
    completed: bool
    finished_at: float = field(default_factory=time.monotonic)
    cut: bool = False  # the stub dropped the connection on purpose ([[cut]])


# --------------------------------------------------------------------------------------------
# Deciding what to answer


def _block_text(content: Any) -> list[str]:
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
    return "\n".join(_block_text(message.get("content")))


def user_texts(body: Any) -> list[str]:
    """The text of every ``user`` message of a Messages API body, oldest first."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return []
    return [
        "\n".join(_block_text(message.get("content")))
        for message in body["messages"]
        if isinstance(message, dict) and message.get("role") == "user"
    ]


def _last_tool_result(body: Any) -> dict[str, Any] | None:
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
            return ErrorPlan(status, _reason(status), retry_after="0")
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
        return ErrorPlan(status, _reason(status))
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


# Anthropic rendering of a plan


@dataclass(frozen=True)
class _ToolUseBlock:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class _Reply:
    blocks: tuple[TextPart | _ToolUseBlock, ...]
    stop_reason: str


@dataclass(frozen=True)
class _ErrorReply:
    status: int
    error_type: str
    message: str
    retry_after: str | None = None
    headers: Mapping[str, str] | None = None


def _tool_result_text(block: dict[str, Any]) -> str:
    return "\n".join(_block_text(block.get("content")))


def _plan(
    body: Any, new_tool_id: Callable[[], str], fault: Fault | None = None
) -> _Reply | _ErrorReply:
    tool_result = _last_tool_result(body)
    messages = body.get("messages") if isinstance(body, dict) else None
    plan = (
        fault
        if isinstance(fault, ErrorPlan)
        else plan_reply(
            last_user_text(body),
            tool_output=None if tool_result is None else _tool_result_text(tool_result),
            side=is_side_request(body),
            message_count=len(messages) if isinstance(messages, list) else 0,
        )
    )
    if isinstance(plan, ErrorPlan) and plan.resets_at is not None:
        # A subscription limit as the API reports it: the unified rate-limit headers say
        # "rejected" and when the window resets; Claude Code reads them, not the body.
        headers = {
            "anthropic-ratelimit-unified-status": "rejected",
            "anthropic-ratelimit-unified-reset": str(plan.resets_at),
            "anthropic-ratelimit-unified-representative-claim": "five_hour",
        }
        return _ErrorReply(429, "rate_limit_error", plan.message, None, headers)
    if isinstance(plan, ErrorPlan):
        default_type = "api_error" if plan.status >= 500 else "invalid_request_error"
        error_type = _ERROR_TYPES.get(plan.status, default_type)
        retry_after = plan.retry_after or ("0" if plan.status == 429 else None)
        return _ErrorReply(plan.status, error_type, plan.message, retry_after)
    blocks: list[TextPart | _ToolUseBlock] = []
    for part in plan.parts:
        if isinstance(part, TextPart):
            blocks.append(part)
        elif isinstance(part, NamedCall):
            blocks.append(_ToolUseBlock(new_tool_id(), part.name, part.input))
        else:
            tool_input = {"command": part.command, "description": "run command"}
            blocks.append(_ToolUseBlock(new_tool_id(), "Bash", tool_input))
    return _Reply(tuple(blocks), "tool_use" if plan.calls_tool else "end_turn")


def _usage(output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": INPUT_TOKENS,
        "output_tokens": output_tokens,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }


def _model(body: Any) -> str:
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) and model else "claude-stub"


def _message_json(reply: _Reply, message_id: str, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for block in reply.blocks:
        if isinstance(block, TextPart):
            content.append({"type": "text", "text": block.text})
        else:
            content.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
            )
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": _usage(OUTPUT_TOKENS),
    }


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


_PING = _sse({"type": "ping"})


# --------------------------------------------------------------------------------------------
# HTTP plumbing


class _ClientGone(Exception):
    """The client closed the connection while we were answering."""


class _BadRequest(Exception):
    pass


class _Cut(Exception):
    """The stub dropped the connection on purpose (``[[cut]]``)."""


@dataclass
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def gone(self) -> bool:
        return self.writer.is_closing() or self.reader.at_eof()

    async def send(self, data: bytes) -> None:
        if self.writer.is_closing():
            raise _ClientGone
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise _ClientGone from exc

    async def cut(self) -> NoReturn:
        """Drop the connection now (what was written so far is flushed first)."""
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.writer.drain()
        self.writer.close()
        raise _Cut

    async def keep_alive(self, ping: bytes) -> NoReturn:
        """Send ``ping`` (nothing, if empty) every ``KEEPALIVE_SECONDS`` until the client leaves."""
        while True:
            await asyncio.sleep(KEEPALIVE_SECONDS)
            if self.gone():
                raise _ClientGone
            if ping:
                await self.send(ping)


def _reason(status: int) -> str:
    if status in _REASONS:
        return _REASONS[status]
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    """Read one HTTP/1.1 request; None on a clean EOF between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise _BadRequest("truncated request head") from exc
        return None
    except asyncio.LimitOverrunError as exc:
        raise _BadRequest("request head too large") from exc
    if len(head) > MAX_HEADER_BYTES:
        raise _BadRequest("request head too large")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(f"bad request line {lines[0]!r}")
    method, target, _version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise _BadRequest(f"bad header line {line!r}")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raw = await _read_chunked(reader)
    else:
        length = int(headers.get("content-length") or 0)
        raw = await reader.readexactly(length) if length > 0 else b""
    body: Any = None
    if raw:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
    return RecordedRequest(method.upper(), target, headers, raw, body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    data = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            # trailers, then the empty line
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return bytes(data)
        data += await reader.readexactly(size)
        await reader.readexactly(2)


class StubLLM:
    """A stub Anthropic (and OpenAI) model API on ``127.0.0.1`` served from a background thread.

    ``StubLLM()`` binds a free port (``port=0``); ``start()``/``stop()`` or use it as a context
    manager. Thread-safe: tests may read ``requests`` and wait from any thread or event loop.
    """

    def __init__(
        self, port: int = 0, host: str = "127.0.0.1", *, delays: Mapping[str, float] | None = None
    ) -> None:
        self.delays: dict[str, float] = dict(delays or {})
        self.down: dict[str, int] = {}
        """API → the status every model request of it gets (``anthropic``, ``openai``)."""
        """API (``anthropic``, ``openai``, ``gemini``) → seconds before its first byte."""
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._cond = threading.Condition()
        self._requests: list[RecordedRequest] = []
        self._responses: list[RecordedResponse] = []
        self._ids = itertools.count(1)
        self._ids_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._fault_uses: dict[str, int] = {}
        self._limit_starts: dict[str, float] = {}
        self._fault_lock = threading.Lock()

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> StubLLM:
        if self._thread is not None:
            raise RuntimeError("StubLLM already started")
        self._ready.clear()
        self._startup_error = None
        self._thread = threading.Thread(target=self._run, name="stub-llm", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            self._thread = None
            raise RuntimeError("StubLLM failed to start") from self._startup_error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        thread, loop, stop_event = self._thread, self._loop, self._stop_event
        if thread is None:
            return
        if loop is not None and stop_event is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(stop_event.set)
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError("StubLLM thread did not stop")
        self._thread = None
        self._loop = None
        self._stop_event = None
        self._port = None

    def __enter__(self) -> StubLLM:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("StubLLM is not running")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no ``/v1``), the value for ``ANTHROPIC_BASE_URL``."""
        return f"http://{self._host}:{self.port}"

    @property
    def gemini_base_url(self) -> str:
        """For ``GOOGLE_GEMINI_BASE_URL``: the SDK appends ``/v1beta`` itself."""
        return self.base_url

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: Codex ``base_url``, OpenCode ``options.baseURL``."""
        return f"{self.base_url}/v1"

    # -- recorded requests ------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._cond:
            return list(self._requests)

    def message_requests(self) -> list[RecordedRequest]:
        """Only the ``POST /v1/messages`` requests (side requests included)."""
        return [r for r in self.requests if r.is_message]

    def main_message_requests(self) -> list[RecordedRequest]:
        """``POST /v1/messages`` requests of the agent loop (side requests left out)."""
        return [r for r in self.message_requests() if not is_side_request(r.body)]

    def openai_requests(self) -> list[RecordedRequest]:
        """``POST /v1/responses`` and ``POST /v1/chat/completions`` (side requests included)."""
        return [r for r in self.requests if r.is_openai]

    def model_requests(self) -> list[RecordedRequest]:
        """Model calls of the agent loops, any format, side requests left out."""
        return [
            r
            for r in self.requests
            if (r.is_message or r.is_openai or r.is_gemini) and not r.is_side
        ]

    @property
    def responses(self) -> list[RecordedResponse]:
        """How each finished request was answered, in the order the answers finished."""
        with self._cond:
            return list(self._responses)

    def clear(self) -> None:
        """Forget the recorded requests and responses (the id counters keep counting)."""
        with self._cond:
            self._requests.clear()
            self._responses.clear()

    def wait_for_requests(
        self,
        n: int,
        timeout: float = 10.0,
        predicate: Callable[[RecordedRequest], bool] | None = None,
    ) -> list[RecordedRequest]:
        """Block until at least ``n`` recorded requests (matching ``predicate``) exist.

        Returns the matching requests; raises ``TimeoutError`` after ``timeout`` seconds. From
        async code call it via ``asyncio.to_thread``.
        """

        def matching() -> list[RecordedRequest]:
            return [r for r in self._requests if predicate is None or predicate(r)]

        with self._cond:
            if not self._cond.wait_for(lambda: len(matching()) >= n, timeout):
                raise TimeoutError(
                    f"expected {n} requests, got {len(matching())} within {timeout} s"
                )
            return matching()

    def wait_for_message_requests(self, n: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """``wait_for_requests`` counting only ``POST /v1/messages``."""
        return self.wait_for_requests(n, timeout, lambda r: r.is_message)

    def wait_for_responses(self, n: int, timeout: float = 10.0) -> list[RecordedResponse]:
        """Block until ``n`` answers have finished (sent in full or cut by the client)."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._responses) >= n, timeout):
                raise TimeoutError(
                    f"expected {n} responses, got {len(self._responses)} within {timeout} s"
                )
            return list(self._responses)

    def _record(self, request: RecordedRequest) -> None:
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()

    def _record_response(
        self, request: RecordedRequest, status: int, completed: bool, *, cut: bool = False
    ) -> None:
        with self._cond:
            self._responses.append(RecordedResponse(request, status, completed, cut=cut))
            self._cond.notify_all()

    def _next_id(self) -> int:
        with self._ids_lock:
            return next(self._ids)

    # -- fault directives ---------------------------------------------------------------------

    def fault_uses(self, directive: str) -> int:
        """How many requests a counted directive (``[[fail:500:2]]``) has failed so far."""
        with self._fault_lock:
            return self._fault_uses.get(directive, 0)

    def _take(self, directive: str, limit: int) -> bool:
        with self._fault_lock:
            used = self._fault_uses.get(directive, 0)
            if used >= limit:
                return False
            self._fault_uses[directive] = used + 1
            return True

    def fault_for(self, request: RecordedRequest) -> Fault | None:
        """The fault ``request`` plays (None for side requests); counts one use of it."""
        if request.is_side:
            return None
        return fault_directive(request.conversation_text, self._take, self._limited)

    def _limited(self, directive: str, seconds: float) -> int | None:
        """``[[usage_limit:<seconds>]]`` is in force for ``seconds`` from the first request
        that carried it; its reset time (Unix seconds, rounded up) while it is, else None."""
        now = time.time()
        with self._fault_lock:
            first = self._limit_starts.setdefault(directive, now)
        resets_at = first + seconds
        return math.ceil(resets_at) if now < resets_at else None

    # -- server -----------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            if not self._ready.is_set():
                self._startup_error = exc  # start() raises it
                self._ready.set()
            else:
                _log.exception("stub LLM server crashed")

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        server = await asyncio.start_server(
            self._handle, self._host, self._requested_port, limit=STREAM_LIMIT
        )
        self._port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stop_event.wait()
        finally:
            server.close()
            for writer in list(self._writers):
                writer.close()
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            await server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._writers.add(writer)
        conn = _Conn(reader, writer)
        try:
            while True:
                try:
                    request = await _read_request(reader)
                except _BadRequest as exc:
                    await self._send_json(conn, 400, _error_body("invalid_request_error", str(exc)))
                    return
                if request is None:
                    return
                self._record(request)
                keep_alive = request.headers.get("connection", "").lower() != "close"
                try:
                    status = await self._dispatch(conn, request, keep_alive)
                except _Cut:
                    self._record_response(request, 200, completed=False, cut=True)
                    return
                except (_ClientGone, ConnectionError):
                    self._record_response(request, 200, completed=False)
                    return
                self._record_response(request, status, completed=True)
                if not keep_alive:
                    return
        except (_ClientGone, ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away between requests
        except asyncio.CancelledError:
            pass  # stop()
        except Exception:
            _log.exception("stub LLM connection handler failed")
        finally:
            self._writers.discard(writer)
            if task is not None:
                self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()

    async def _dispatch(self, conn: _Conn, request: RecordedRequest, keep_alive: bool) -> int:
        """Answer one request; returns the HTTP status sent."""
        api = (
            "anthropic"
            if request.is_message
            else "openai"
            if request.is_openai
            else "gemini"
            if request.is_gemini
            else None
        )
        if api is not None and self.delays.get(api):
            await asyncio.sleep(self.delays[api])
        status = self.down.get(api or "")
        if status and request.method == "POST" and request.path != "/v1/messages/count_tokens":
            if api == "openai":
                from tests.stub_openai import _error_body as openai_error  # noqa: PLC0415

                body = openai_error(status, "the stub has this API down")
            else:
                kind = _ERROR_TYPES.get(status, "api_error")
                body = _error_body(kind, "the stub has this API down")
            await self._send_json(conn, status, body, keep_alive)
            return status
        if request.method == "POST" and request.path == "/v1/messages/count_tokens":
            await self._send_json(conn, 200, {"input_tokens": INPUT_TOKENS}, keep_alive)
            return 200
        if request.method == "POST" and request.path in OPENAI_PATHS:
            from tests.stub_openai import answer  # noqa: PLC0415 (stub_openai imports this module)

            return await answer(self, conn, request, keep_alive)
        if request.is_gemini:
            from tests.stub_gemini import answer as answer_gemini  # noqa: PLC0415 (import cycle)

            return await answer_gemini(self, conn, request, keep_alive)
        if not request.is_message:
            body = _error_body("not_found_error", f"{request.method} {request.path} not found")
            await self._send_json(conn, 404, body, keep_alive, head_only=request.method == "HEAD")
            return 404
        if not isinstance(request.body, dict):
            body = _error_body("invalid_request_error", "body must be a JSON object")
            await self._send_json(conn, 400, body, keep_alive)
            return 400
        fault = self.fault_for(request)
        plan = _plan(request.body, lambda: f"toolu_stub_{self._next_id()}", fault)
        if isinstance(plan, _ErrorReply):
            extra = {"retry-after": plan.retry_after} if plan.retry_after is not None else {}
            extra.update(plan.headers or {})
            body = _error_body(plan.error_type, plan.message)
            await self._send_json(conn, plan.status, body, keep_alive, extra_headers=extra)
            return plan.status
        message_id = f"msg_stub_{self._next_id()}"
        model = _model(request.body)
        if isinstance(fault, CutPlan | HangPlan):
            reply = _Reply((TextPart(fault.chunks),) if isinstance(fault, CutPlan) else (), "")
            if request.body.get("stream"):
                await self._stream_fault(conn, fault, reply, message_id, model, keep_alive)
            else:
                await self.json_fault(conn, fault, _message_json(reply, message_id, model))
        if request.body.get("stream"):
            await self._stream(conn, plan, message_id, model, keep_alive)
            return 200
        for block in plan.blocks:
            if isinstance(block, TextPart) and block.delay:
                for _ in block.chunks[1:]:
                    await asyncio.sleep(block.delay)
                    if conn.gone():
                        raise _ClientGone
        await self._send_json(conn, 200, _message_json(plan, message_id, model), keep_alive)
        return 200

    async def _send_json(
        self,
        conn: _Conn,
        status: int,
        payload: Mapping[str, Any],
        keep_alive: bool = False,
        *,
        head_only: bool = False,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        headers = {
            "content-type": "application/json",
            "content-length": str(len(data)),
            "request-id": f"req_stub_{self._next_id()}",
            "connection": "keep-alive" if keep_alive else "close",
            **(extra_headers or {}),
        }
        await conn.send(_head(status, headers) + (b"" if head_only else data))

    async def _stream(
        self, conn: _Conn, reply: _Reply, message_id: str, model: str, keep_alive: bool
    ) -> None:
        await self._open_sse(conn, keep_alive)

        async def emit(event: dict[str, Any]) -> None:
            await _send_chunk(conn, _sse(event))

        start = _message_json(reply, message_id, model)
        start.update(content=[], stop_reason=None, usage=_usage(1))
        await emit({"type": "message_start", "message": start})
        await emit({"type": "ping"})
        for index, block in enumerate(reply.blocks):
            if isinstance(block, TextPart):
                await emit(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    }
                )
                for n, chunk in enumerate(block.chunks):
                    if n and block.delay:
                        await asyncio.sleep(block.delay)
                        if conn.gone():
                            raise _ClientGone
                    delta = {"type": "text_delta", "text": chunk}
                    await emit({"type": "content_block_delta", "index": index, "delta": delta})
            else:
                await emit(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {
                            "type": "tool_use",
                            "id": block.id,
                            "name": block.name,
                            "input": {},
                        },
                    }
                )
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block.input)}
                await emit({"type": "content_block_delta", "index": index, "delta": delta})
            await emit({"type": "content_block_stop", "index": index})
        await emit(
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": OUTPUT_TOKENS},
            }
        )
        await emit({"type": "message_stop"})
        await _end_chunks(conn)

    async def _stream_fault(
        self,
        conn: _Conn,
        fault: CutPlan | HangPlan,
        reply: _Reply,
        message_id: str,
        model: str,
        keep_alive: bool,
    ) -> NoReturn:
        await self._open_sse(conn, keep_alive)
        start = _message_json(reply, message_id, model)
        start.update(content=[], stop_reason=None, usage=_usage(1))
        await _send_chunk(conn, _sse({"type": "message_start", "message": start}))
        await _send_chunk(conn, _sse({"type": "ping"}))
        if isinstance(fault, HangPlan):
            await conn.keep_alive(b"%x\r\n%s\r\n" % (len(_PING), _PING))
        block = {"type": "text", "text": ""}
        await _send_chunk(
            conn, _sse({"type": "content_block_start", "index": 0, "content_block": block})
        )
        for chunk in fault.chunks:
            delta = {"type": "text_delta", "text": chunk}
            await _send_chunk(
                conn, _sse({"type": "content_block_delta", "index": 0, "delta": delta})
            )
        await conn.cut()

    async def json_fault(
        self, conn: _Conn, fault: CutPlan | HangPlan, payload: Mapping[str, Any]
    ) -> NoReturn:
        """A non-streaming answer that hangs (nothing sent) or is cut in the middle of its body."""
        if isinstance(fault, HangPlan):
            await conn.keep_alive(b"")
        data = json.dumps(payload).encode()
        headers = {
            "content-type": "application/json",
            "content-length": str(len(data)),
            "request-id": f"req_stub_{self._next_id()}",
            "connection": "close",
        }
        await conn.send(_head(200, headers) + data[: len(data) // 2])
        await conn.cut()

    async def _open_sse(self, conn: _Conn, keep_alive: bool) -> None:
        """Send the head of a chunked ``text/event-stream`` answer."""
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "transfer-encoding": "chunked",
            "request-id": f"req_stub_{self._next_id()}",
            "connection": "keep-alive" if keep_alive else "close",
        }
        await conn.send(_head(200, headers))


async def _send_chunk(conn: _Conn, data: bytes) -> None:
    await conn.send(b"%x\r\n%s\r\n" % (len(data), data))


async def _end_chunks(conn: _Conn) -> None:
    await conn.send(b"0\r\n\r\n")


def _head(status: int, headers: Mapping[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_reason(status)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


# --------------------------------------------------------------------------------------------
# Standalone


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Stub Anthropic / OpenAI model API on 127.0.0.1")
    parser.add_argument("--port", type=int, default=8089)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops it cleanly too
    with StubLLM(port=args.port) as stub:
        print(f"stub LLM listening on {stub.base_url} (Ctrl-C to stop)", flush=True)
        seen = 0
        try:
            while True:
                try:
                    requests = stub.wait_for_requests(seen + 1, timeout=60)
                except TimeoutError:
                    continue
                for request in requests[seen:]:
                    print(
                        f"{request.method} {request.target} "
                        f"model={_model(request.body)!r} messages={len(request.messages)} "
                        f"side={is_side_request(request.body)} "
                        f"last_user={request.last_user_text[-80:]!r}",
                        flush=True,
                    )
                seen = len(requests)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
