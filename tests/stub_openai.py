"""The OpenAI wire formats of the stub LLM: Responses API (Codex) and Chat Completions (OpenCode).

``StubLLM`` (``tests/stub_llm/``) routes ``POST /v1/responses`` and
``POST /v1/chat/completions`` here; the directives are the same as for the Anthropic route (see
``tests.stub_llm``) and come from the same API-neutral ``plan_reply``. Point the CLIs at
``stub.openai_base_url`` (``http://127.0.0.1:PORT/v1``). This module reads requests and
answers them; ``tests.stub_openai_formats`` renders the answers in either format.

Reading a request
-----------------
* Responses (``input`` items, as Codex 0.169 sends them): the LAST item that is either a user
  ``message`` or a ``function_call_output`` / ``custom_tool_call_output`` decides. A tool output
  -> ``Tool said: <output>``; a user message -> its ``input_text`` parts are searched for
  directives. Codex puts its ``<environment_context>`` / ``AGENTS.md`` user messages before the
  prompt, so the last user message is the prompt.
* Chat Completions (``messages``, as OpenCode's ``@ai-sdk/openai-compatible`` sends them): the last
  ``user`` or ``tool`` message decides; ``tool`` -> ``Tool said: <content>``.
* ``[[echo]]`` counts ``input`` items / ``messages`` entries.

Answering
---------
* ``[[tool:bash <cmd>]]`` calls the client's OWN shell tool, chosen by name from the request's
  ``tools`` (the first of ``SHELL_TOOL_NAMES`` it has, regardless of case), with arguments
  shaped after that tool's JSON schema: ``cmd`` (Codex ``exec_command``) or ``command`` (a
  string, or ``["bash", "-lc", cmd]`` when the schema says array), plus ``description: "run
  command"`` when the schema has one (OpenCode ``bash``), and neutral values for its other
  required fields. Without ``tools`` the call is ``exec_command {"cmd"}`` (Responses) or
  ``bash {"command", "description"}`` (Chat).
  The text ``I will run a command.`` comes first. Call ids are ``call_stub_<n>``.
* Responses streaming (``"stream": true``): ``event: <type>`` + ``data: <json>`` SSE with
  ``sequence_number``: ``response.created``, ``response.in_progress``, per output item
  ``response.output_item.added``, (message) ``response.content_part.added``,
  ``response.output_text.delta``..., ``response.output_text.done``,
  ``response.content_part.done``, (function call) ``response.function_call_arguments.delta`` /
  ``.done``, ``response.output_item.done``; then ``response.completed`` with ``usage``
  (12 input, 7 output, 0 cached, 0 reasoning, 19 total). Non-streaming: the ``response`` object.
* Chat streaming: ``data: <chunk>`` lines (no ``event:`` names): a role chunk, ``content``
  deltas, ``tool_calls`` deltas (id/name first, then the arguments), a chunk with
  ``finish_reason`` (``stop`` / ``tool_calls``), a ``choices: []`` chunk with ``usage``
  (always sent, whatever ``stream_options`` says), then ``data: [DONE]``. Non-streaming: one
  ``chat.completion``.
* ``[[error:<status>]]`` -> that status with ``{"error": {"message", "type", "param", "code"}}``
  (``server_error`` for 5xx, ``requests`` / ``rate_limit_exceeded`` for 429, ``invalid_api_key``
  for 401); ``retry-after: 0`` on 429 AND on 5xx, unlike the Anthropic route: OpenCode cannot be
  told to retry less (5 retries, 2-32 s backoff, ~70 s for a persistent 500) but honours
  ``retry-after``, which makes its retries take ~0.1 s. Every retry gets the same answer.
* ``[[slow:<s>]]`` -> ``tick <n> `` deltas every 0.05 s; stops as soon as the client goes away.
* Fault directives (``[[fail:<status>:<n>]]``, ``[[cut:<k>[:<n>]]]``, ``[[hang]]``, see
  ``tests.stub_llm``) are searched in every user message (``openai_user_texts``). A cut stream
  is ``response.created``, ``response.in_progress``, ``response.output_item.added``,
  ``response.content_part.added`` and ``k`` ``response.output_text.delta`` (Responses) or the
  role chunk and ``k`` content chunks (Chat), then the connection drops: no
  ``response.completed`` / ``finish_reason`` / ``[DONE]``. A hung stream sends its start
  (Responses: ``created`` and ``in_progress``; Chat: the role chunk), then ``: ping`` comments.

Side requests
-------------
``is_openai_side_request``: a request that explicitly sends no tools (``"tools": []``) or has no
tools and whose system/developer text asks for a title or a summary (OpenCode's concurrent title
request with ``small_model``: system prompt ``You are a title generator...``, no ``tools``). They
get ``Stub side reply.``; the prompt's directives are ignored. A hand-written request without
``tools`` and without such a system prompt is a main request.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from tests.stub_llm import (
    CommandCall,
    CutPlan,
    ErrorPlan,
    HangPlan,
    NamedCall,
    Plan,
    RecordedRequest,
    TextPart,
    plan_reply,
)
from tests.stub_llm.wire import ClientGone, Conn, end_chunks, send_chunk
from tests.stub_openai_formats import Call, Chat, Responses, Text

if TYPE_CHECKING:
    from tests.stub_llm import StubLLM

__all__ = [
    "CHAT_PATH",
    "RESPONSES_PATH",
    "chat_input",
    "choose_shell_tool",
    "is_openai_side_request",
    "openai_last_user_text",
    "openai_user_texts",
    "responses_input",
]

RESPONSES_PATH = "/v1/responses"
CHAT_PATH = "/v1/chat/completions"

SHELL_TOOL_NAMES = (
    "bash",
    "exec_command",
    "shell_command",
    "shell",
    "local_shell",
    # Qwen Code, CodeBuddy and other ACP agents (matched without regard to case: "Bash").
    "run_shell_command",
    "execute_command",
    "run_command",
    "terminal",
)
_SIDE_SYSTEM_RE = re.compile(
    r"title generator|generate (?:a |an )?(?:short |concise |brief )?(?:title|summary)"
    r"|\btitle for\b|summari[sz]e (?:the|this) (?:conversation|thread)",
    re.IGNORECASE,
)

_ERROR_TYPES: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("requests", "rate_limit_exceeded"),
    503: ("server_error", "server_is_overloaded"),
    529: ("server_error", "server_is_overloaded"),
}


# --------------------------------------------------------------------------------------------
# Reading requests


def _parts_text(content: Any, kinds: tuple[str, ...]) -> list[str]:
    """Text of a string or a list of content parts whose ``type`` is in ``kinds``."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and part.get("type") in kinds:
                text = part.get("text")
                if isinstance(text, str):
                    out.append(text)
    return out


_INPUT_KINDS = ("input_text", "output_text", "text")
_TOOL_OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def _tool_output_text(output: Any) -> str:
    if isinstance(output, dict):  # {"content": ..., "success": ...} in some versions
        output = output.get("content", output.get("output", ""))
    return "\n".join(_parts_text(output, _INPUT_KINDS))


def responses_input(body: Any) -> tuple[str, str | None, int]:
    """``(prompt, tool_output, item_count)`` of a Responses API body."""
    if not isinstance(body, dict):
        return "", None, 0
    items = body.get("input")
    if isinstance(items, str):
        return items, None, 1
    if not isinstance(items, list):
        return "", None, 0
    for item in reversed(items):
        if not isinstance(item, dict):
            continue
        if item.get("type") in _TOOL_OUTPUT_TYPES:
            return "", _tool_output_text(item.get("output")), len(items)
        if item.get("role") == "user" and item.get("type", "message") == "message":
            return "\n".join(_parts_text(item.get("content"), _INPUT_KINDS)), None, len(items)
    return "", None, len(items)


def chat_input(body: Any) -> tuple[str, str | None, int]:
    """``(prompt, tool_output, message_count)`` of a Chat Completions body."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return "", None, 0
    messages = body["messages"]
    for message in reversed(messages):
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool":
            return "", "\n".join(_parts_text(message.get("content"), _INPUT_KINDS)), len(messages)
        if message.get("role") == "user":
            return "\n".join(_parts_text(message.get("content"), _INPUT_KINDS)), None, len(messages)
    return "", None, len(messages)


def openai_user_texts(request: RecordedRequest) -> list[str]:
    """The text of every user message of a Responses or Chat Completions body, oldest first."""
    body = request.body
    if not isinstance(body, dict):
        return []
    entries = body.get("input" if request.path == RESPONSES_PATH else "messages")
    if isinstance(entries, str):
        return [entries]
    if not isinstance(entries, list):
        return []
    return [
        "\n".join(_parts_text(entry.get("content"), _INPUT_KINDS))
        for entry in entries
        if isinstance(entry, dict)
        and entry.get("role") == "user"
        and entry.get("type", "message") == "message"
    ]


def _system_text(body: Mapping[str, Any]) -> str:
    texts: list[str] = []
    if isinstance(body.get("instructions"), str):
        texts.append(body["instructions"])
    for key in ("messages", "input"):
        entries = body.get(key)
        if isinstance(entries, list):
            for entry in entries:
                if isinstance(entry, dict) and entry.get("role") in ("system", "developer"):
                    texts.extend(_parts_text(entry.get("content"), _INPUT_KINDS))
    return "\n".join(texts)


def is_openai_side_request(body: Any) -> bool:
    """True for auxiliary calls (title generation...) that must never play a directive."""
    if not isinstance(body, dict):
        return False
    if "tools" in body and not body["tools"]:
        return True
    return not body.get("tools") and bool(_SIDE_SYSTEM_RE.search(_system_text(body)))


def openai_last_user_text(request: RecordedRequest) -> str:
    """The prompt text a Responses / Chat Completions request is answered from."""
    reader = responses_input if request.path == RESPONSES_PATH else chat_input
    return reader(request.body)[0]


def _tool_specs(body: Any) -> list[tuple[str, dict[str, Any]]]:
    """``(name, parameters schema)`` of each tool in a Responses or Chat Completions body."""
    tools = body.get("tools") if isinstance(body, dict) else None
    specs: list[tuple[str, dict[str, Any]]] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        spec: dict[str, Any] = function if isinstance(function, dict) else tool
        name = spec.get("name") or tool.get("type")
        params = spec.get("parameters")
        if isinstance(name, str):
            specs.append((name, params if isinstance(params, dict) else {}))
    return specs


def choose_shell_tool(body: Any, command: str, default: str) -> tuple[str, dict[str, Any]]:
    """The client's shell tool and the arguments that run ``command`` with it."""
    specs = dict(_tool_specs(body))
    by_lower = {n.lower(): n for n in specs}
    name = next((by_lower[n] for n in SHELL_TOOL_NAMES if n in by_lower), None)
    if name is None:
        name = default
        props: dict[str, Any] = (
            {"cmd": {"type": "string"}}
            if default == "exec_command"
            else {"command": {"type": "string"}, "description": {"type": "string"}}
        )
    else:
        raw = specs[name].get("properties")
        props = raw if isinstance(raw, dict) else {}
    args: dict[str, Any] = {}
    if "cmd" in props:
        args["cmd"] = command
    else:
        schema = props.get("command")
        is_array = isinstance(schema, dict) and schema.get("type") == "array"
        args["command"] = ["bash", "-lc", command] if is_array else command
    if "description" in props:
        args["description"] = "run command"
    required = specs[name].get("required") if name in specs else None
    for field in required if isinstance(required, list) else ():
        # Other required fields get neutral values, so the client's validation accepts the call.
        schema = props.get(field)
        if field not in args:
            kind = schema.get("type") if isinstance(schema, dict) else None
            args[field] = False if kind == "boolean" else 0 if kind in ("integer", "number") else ""
    return name, args


# --------------------------------------------------------------------------------------------
# Answering


async def answer(stub: StubLLM, conn: Conn, request: RecordedRequest, keep_alive: bool) -> int:
    """Answer ``POST /v1/responses`` or ``POST /v1/chat/completions``; returns the status."""
    body = request.body
    if not isinstance(body, dict):
        error = _error_body(400, "body must be a JSON object")
        await stub._send_json(conn, 400, error, keep_alive)
        return 400
    responses = request.path == RESPONSES_PATH
    prompt, tool_output, count = (responses_input if responses else chat_input)(body)
    fault = stub.fault_for(request)
    plan = (
        fault
        if isinstance(fault, ErrorPlan)
        else plan_reply(
            prompt,
            tool_output=tool_output,
            side=is_openai_side_request(body),
            message_count=count,
        )
    )
    if isinstance(plan, ErrorPlan) and plan.resets_at is not None:
        await stub._send_json(
            conn, 429, _usage_limit_body(plan), keep_alive, extra_headers=_usage_headers(plan)
        )
        return 429
    if isinstance(plan, ErrorPlan):
        # OpenCode has no retry setting (5 retries, 2-32 s backoff: ~70 s for a 5xx) but honours
        # retry-after, so 5xx answers carry it too: its retries then take ~0.1 s.
        retry = plan.status == 429 or plan.status >= 500 or plan.retry_after is not None
        extra = {"retry-after": plan.retry_after or "0"} if retry else {}
        await stub._send_json(
            conn,
            plan.status,
            _error_body(plan.status, plan.message),
            keep_alive,
            extra_headers=extra,
        )
        return plan.status
    model = body.get("model") if isinstance(body.get("model"), str) else "stub-model"
    steps = _steps(plan, body, stub._next_id, "exec_command" if responses else "bash")
    render = Responses if responses else Chat
    renderer = render(str(model), stub._next_id)
    if isinstance(fault, CutPlan | HangPlan):
        await _fault(stub, conn, fault, renderer, bool(body.get("stream")), keep_alive)
    if not body.get("stream"):
        for step in steps:
            if isinstance(step, Text) and step.part.delay:
                for _ in step.part.chunks[1:]:
                    await asyncio.sleep(step.part.delay)
                    if conn.gone():
                        raise ClientGone
        await stub._send_json(conn, 200, renderer.whole(steps), keep_alive)
        return 200
    await stub._open_sse(conn, keep_alive)
    for data in renderer.start():
        await send_chunk(conn, data)
    for step in steps:
        if isinstance(step, Text):
            for data in renderer.text_start():
                await send_chunk(conn, data)
            for n, chunk in enumerate(step.part.chunks):
                if n and step.part.delay:
                    await asyncio.sleep(step.part.delay)
                    if conn.gone():
                        raise ClientGone
                await send_chunk(conn, renderer.text_delta(chunk))
            for data in renderer.text_end(step.part.text):
                await send_chunk(conn, data)
        else:
            for data in renderer.call(step):
                await send_chunk(conn, data)
    for data in renderer.finish(plan.calls_tool):
        await send_chunk(conn, data)
    await end_chunks(conn)
    return 200


async def _fault(
    stub: StubLLM,
    conn: Conn,
    fault: CutPlan | HangPlan,
    renderer: Responses | Chat,
    stream: bool,
    keep_alive: bool,
) -> NoReturn:
    """Play ``[[cut]]`` / ``[[hang]]``: never returns (a cut, or the client leaving)."""
    if not stream:
        part = TextPart(fault.chunks) if isinstance(fault, CutPlan) else TextPart(())
        await stub.json_fault(conn, fault, renderer.whole([Text(part)]))
    await stub._open_sse(conn, keep_alive)
    for data in renderer.start():
        await send_chunk(conn, data)
    if isinstance(fault, HangPlan):
        ping = b": ping\n\n"
        await conn.keep_alive(b"%x\r\n%s\r\n" % (len(ping), ping))
    for data in renderer.text_start():
        await send_chunk(conn, data)
    for chunk in fault.chunks:
        await send_chunk(conn, renderer.text_delta(chunk))
    await conn.cut()


def _steps(
    plan: Plan, body: Any, next_id: Callable[[], int], default_tool: str
) -> list[Text | Call]:
    steps: list[Text | Call] = []
    for part in plan.parts:
        if isinstance(part, CommandCall):
            name, args = choose_shell_tool(body, part.command, default_tool)
            steps.append(Call(f"call_stub_{next_id()}", name, args))
        elif isinstance(part, NamedCall):
            steps.append(Call(f"call_stub_{next_id()}", part.name, part.input))
        else:
            steps.append(Text(part))
    return steps


def _usage_limit_body(plan: ErrorPlan) -> dict[str, Any]:
    """A usage limit as ChatGPT-backed Codex reads it (``usage_limit_reached``)."""
    assert plan.resets_at is not None
    return {
        "error": {
            "type": "usage_limit_reached",
            "message": plan.message,
            "plan_type": "pro",
            "resets_at": plan.resets_at,
            "resets_in_seconds": max(0, plan.resets_at - int(time.time())),
        }
    }


def _usage_headers(plan: ErrorPlan) -> dict[str, str]:
    """Codex's rate-limit headers: the primary window is spent and when it resets."""
    assert plan.resets_at is not None
    return {
        "x-codex-primary-used-percent": "100",
        "x-codex-primary-window-minutes": "300",
        "x-codex-primary-reset-at": str(plan.resets_at),
        "x-codex-primary-reset-after-seconds": str(max(0, plan.resets_at - int(time.time()))),
    }


def _error_body(status: int, message: str) -> dict[str, Any]:
    default = ("server_error", None) if status >= 500 else ("invalid_request_error", None)
    error_type, code = _ERROR_TYPES.get(status, default)
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}
