"""The Gemini API side of the stub LLM (``tests.stub_llm``), for Gemini CLI (``@google/genai``).

Routes, under any ``/v<N>…/`` prefix (the SDK appends ``/v1beta`` to ``GOOGLE_GEMINI_BASE_URL``):

* ``POST /models/{model}:streamGenerateContent?alt=sse``: SSE ``data: {GenerateContentResponse}``
  chunks; the last carries ``finishReason: "STOP"`` and ``usageMetadata``;
* ``POST /models/{model}:generateContent``: one ``GenerateContentResponse``;
* ``POST /models/{model}:countTokens``: ``{"totalTokens": 12}``;
* ``GET /models`` and ``GET /models/{model}``.

The same directives as the other formats (``plan_reply``, ``fault_directive``): a
``[[tool:bash <cmd>]]`` is a ``functionCall`` of the client's own shell tool
(``run_shell_command`` for Gemini CLI 0.61), and a last ``user`` content holding a
``functionResponse`` is answered ``Tool said: <output>``. Errors are Google's error bodies
``{"error": {"code", "message", "status"}}``; ``[[hang]]`` keeps the stream open with bare
newlines (the SDK's SSE parser cannot skip ``:`` comment lines).

A request that asks for JSON (``generationConfig.responseMimeType: application/json``, Gemini
CLI's next-speaker check and model router) is a side request: it gets an object built from its
schema, never a directive's behaviour.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from tests.stub_llm import (
    INPUT_TOKENS,
    OUTPUT_TOKENS,
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

if TYPE_CHECKING:
    from tests.stub_llm import StubLLM

GEMINI_PATH = re.compile(
    r"^/v\d+(?:beta|alpha)\d*/models/(?P<model>[^/:]+):(?P<method>streamGenerateContent|generateContent|"
    r"countTokens|embedContent|batchEmbedContents)$"
)
MODELS_PATH = re.compile(r"^/v\d+(?:beta|alpha)\d*/models(?:/(?P<model>[^/:]+))?$")
SHELL_TOOLS = ("run_shell_command", "shell", "bash", "execute_command", "run_command", "terminal")

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    529: "UNAVAILABLE",
}


def is_gemini(request: RecordedRequest) -> bool:
    return bool(GEMINI_PATH.match(request.path)) or (
        request.method == "GET" and bool(MODELS_PATH.match(request.path))
    )


def _contents(body: Any) -> list[dict[str, Any]]:
    contents = body.get("contents") if isinstance(body, dict) else None
    return [c for c in contents if isinstance(c, dict)] if isinstance(contents, list) else []


def _parts(content: Mapping[str, Any]) -> list[dict[str, Any]]:
    parts = content.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _text(content: Mapping[str, Any]) -> str:
    return "\n".join(str(p["text"]) for p in _parts(content) if isinstance(p.get("text"), str))


def gemini_user_texts(body: Any) -> list[str]:
    """The text of every ``user`` content, oldest first (where fault directives are searched)."""
    return [_text(c) for c in _contents(body) if c.get("role", "user") == "user"]


def gemini_input(body: Any) -> tuple[str, str | None, int]:
    """``(prompt, tool_output, content_count)`` of a generateContent body."""
    contents = _contents(body)
    for content in reversed(contents):
        if content.get("role", "user") != "user":
            continue
        for part in _parts(content):
            response = part.get("functionResponse")
            if isinstance(response, dict):
                payload = response.get("response")
                output = payload.get("output") if isinstance(payload, dict) else None
                return "", str(output) if output is not None else json.dumps(payload), len(contents)
        return _text(content), None, len(contents)
    return "", None, len(contents)


def is_json_request(body: Any) -> bool:
    config = body.get("generationConfig") if isinstance(body, dict) else None
    return isinstance(config, dict) and config.get("responseMimeType") == "application/json"


def _from_schema(schema: Any) -> Any:
    """A value that satisfies ``schema`` (enums prefer ``"user"``, numbers their minimum)."""
    if not isinstance(schema, dict):
        return None
    kind = str(schema.get("type", "object")).lower()
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return "user" if "user" in schema["enum"] else schema["enum"][0]
    if kind == "object":
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        return {name: _from_schema(sub) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return "stub"


def _shell_call(body: Any, command: str) -> tuple[str, dict[str, Any]]:
    """The client's shell tool and the arguments that run ``command``."""
    declared: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or () if isinstance(body, dict) else ():
        for function in tool.get("functionDeclarations") or () if isinstance(tool, dict) else ():
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                schema = function.get("parametersJsonSchema") or function.get("parameters") or {}
                declared[function["name"]] = schema if isinstance(schema, dict) else {}
    name = next((n for n in SHELL_TOOLS if n in declared), "run_shell_command")
    schema = declared.get(name, {})
    props = schema.get("properties")
    args: dict[str, Any] = {"command": command}
    if isinstance(props, dict) and "description" in props:
        args["description"] = "run command"
    return name, args


def _error_body(status: int, message: str) -> dict[str, Any]:
    return {
        "error": {
            "code": status,
            "message": message,
            "status": _STATUS_NAMES.get(status, "UNKNOWN"),
        }
    }


def _usage(output_tokens: int) -> dict[str, int]:
    return {
        "promptTokenCount": INPUT_TOKENS,
        "candidatesTokenCount": output_tokens,
        "totalTokenCount": INPUT_TOKENS + output_tokens,
    }


def _candidate(parts: list[dict[str, Any]], finish: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = "STOP"
    return candidate


def _response(parts: list[dict[str, Any]], model: str, *, finish: bool) -> dict[str, Any]:
    response: dict[str, Any] = {"candidates": [_candidate(parts, finish)], "modelVersion": model}
    if finish:
        response["usageMetadata"] = _usage(OUTPUT_TOKENS)
    return response


def _sse(payload: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\r\n\r\n".encode()


async def answer(stub: StubLLM, conn: Conn, request: RecordedRequest, keep_alive: bool) -> int:
    """Answer one Gemini API request; returns the HTTP status sent."""
    models = MODELS_PATH.match(request.path)
    if request.method == "GET" and models:
        name = models.group("model")
        entry = {"name": f"models/{name or 'stub-model'}", "displayName": "Stub model"}
        payload = entry if name else {"models": [entry]}
        await stub._send_json(conn, 200, payload, keep_alive)
        return 200
    route = GEMINI_PATH.match(request.path)
    body = request.body
    if route is None or request.method != "POST" or not isinstance(body, dict):
        error = _error_body(400, "expected a JSON object POSTed to a models/{model}:method path")
        await stub._send_json(conn, 400, error, keep_alive)
        return 400
    model, method = route.group("model"), route.group("method")
    if method == "countTokens":
        await stub._send_json(conn, 200, {"totalTokens": INPUT_TOKENS}, keep_alive)
        return 200
    if method in ("embedContent", "batchEmbedContents"):
        embedding = {"values": [0.0] * 8}
        embedded: dict[str, Any] = (
            {"embedding": embedding} if method == "embedContent" else {"embeddings": [embedding]}
        )
        await stub._send_json(conn, 200, embedded, keep_alive)
        return 200
    stream = method == "streamGenerateContent"
    if is_json_request(body):
        config = body["generationConfig"]
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        part = {"text": json.dumps(_from_schema(schema))}
        if stream:
            await stub._open_sse(conn, keep_alive)
            await send_chunk(conn, _sse(_response([part], model, finish=True)))
            await end_chunks(conn)
        else:
            await stub._send_json(conn, 200, _response([part], model, finish=True), keep_alive)
        return 200
    prompt, tool_output, count = gemini_input(body)
    fault = stub.fault_for(request)
    plan = (
        fault
        if isinstance(fault, ErrorPlan)
        else plan_reply(prompt, tool_output=tool_output, message_count=count)
    )
    if isinstance(plan, ErrorPlan):
        extra = {"retry-after": plan.retry_after or "0"} if plan.status == 429 else {}
        await stub._send_json(
            conn,
            plan.status,
            _error_body(plan.status, plan.message),
            keep_alive,
            extra_headers=extra,
        )
        return plan.status
    if isinstance(fault, CutPlan | HangPlan):
        await _fault(stub, conn, fault, model, stream, keep_alive)
    return await _render(stub, conn, plan, body, model, stream, keep_alive)


async def _render(
    stub: StubLLM, conn: Conn, plan: Plan, body: Any, model: str, stream: bool, keep_alive: bool
) -> int:
    calls: list[dict[str, Any]] = []
    texts: list[TextPart] = []
    for part in plan.parts:
        if isinstance(part, TextPart):
            texts.append(part)
        elif isinstance(part, NamedCall):
            calls.append({"functionCall": {"name": part.name, "args": part.input}})
        else:
            name, args = _shell_call(body, part.command)
            calls.append({"functionCall": {"name": name, "args": args}})
    if not stream:
        for text in texts:
            for _ in text.chunks[1:] if text.delay else ():
                await asyncio.sleep(text.delay)
                if conn.gone():
                    raise ClientGone
        parts = [{"text": t.text} for t in texts if t.text] + calls
        await stub._send_json(conn, 200, _response(parts, model, finish=True), keep_alive)
        return 200
    await stub._open_sse(conn, keep_alive)
    for text in texts:
        for n, chunk in enumerate(text.chunks):
            if n and text.delay:
                await asyncio.sleep(text.delay)
                if conn.gone():
                    raise ClientGone
            await send_chunk(conn, _sse(_response([{"text": chunk}], model, finish=False)))
    await send_chunk(conn, _sse(_response(calls, model, finish=True)))
    await end_chunks(conn)
    return 200


async def _fault(
    stub: StubLLM,
    conn: Conn,
    fault: CutPlan | HangPlan,
    model: str,
    stream: bool,
    keep_alive: bool,
) -> NoReturn:
    """Play ``[[cut]]`` / ``[[hang]]``: never returns (a cut, or the client leaving)."""
    if not stream:
        parts = [{"text": "".join(fault.chunks)}] if isinstance(fault, CutPlan) else []
        await stub.json_fault(conn, fault, _response(parts, model, finish=False))
    await stub._open_sse(conn, keep_alive)
    if isinstance(fault, HangPlan):
        await conn.keep_alive(b"1\r\n\n\r\n")
    for chunk in fault.chunks:
        await send_chunk(conn, _sse(_response([{"text": chunk}], model, finish=False)))
    await conn.cut()
