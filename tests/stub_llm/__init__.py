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

The package: ``plans`` decides what to answer, ``anthropic`` renders it for the Messages API
(``tests.stub_openai`` and ``tests.stub_gemini`` for theirs), ``recorded`` keeps the requests
and answers, ``wire`` is the HTTP/1.1 plumbing and ``server`` the ``StubLLM`` that routes.

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

from tests.stub_llm.plans import (
    DEFAULT_TEXT,
    INPUT_TOKENS,
    KEEPALIVE_SECONDS,
    LONG_CHUNK,
    OUTPUT_TOKENS,
    SIDE_TEXT,
    CommandCall,
    CutPlan,
    ErrorPlan,
    Fault,
    HangPlan,
    NamedCall,
    Plan,
    TextPart,
    fault_directive,
    is_side_request,
    last_user_text,
    plan_reply,
    user_texts,
)
from tests.stub_llm.recorded import OPENAI_PATHS, RecordedRequest, RecordedResponse
from tests.stub_llm.server import StubLLM

__all__ = [
    "DEFAULT_TEXT",
    "INPUT_TOKENS",
    "KEEPALIVE_SECONDS",
    "LONG_CHUNK",
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
