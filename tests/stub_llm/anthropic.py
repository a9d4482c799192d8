"""The Anthropic Messages API (Claude Code): a plan rendered as a ``Message`` or its SSE
stream, and the API's error bodies."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from tests.stub_llm.plans import (
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    CutPlan,
    ErrorPlan,
    Fault,
    HangPlan,
    NamedCall,
    TextPart,
    block_text,
    is_side_request,
    last_tool_result,
    last_user_text,
    plan_reply,
)
from tests.stub_llm.recorded import RecordedRequest
from tests.stub_llm.wire import ClientGone, Conn, end_chunks, send_chunk

if TYPE_CHECKING:
    from tests.stub_llm.server import StubLLM

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


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
    return "\n".join(block_text(block.get("content")))


def _plan(
    body: Any, new_tool_id: Callable[[], str], fault: Fault | None = None
) -> _Reply | _ErrorReply:
    tool_result = last_tool_result(body)
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
        error_type = ERROR_TYPES.get(plan.status, default_type)
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


def model_of(body: Any) -> str:
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


async def answer(stub: StubLLM, conn: Conn, request: RecordedRequest, keep_alive: bool) -> int:
    """Answer a ``POST /v1/messages``; returns the HTTP status sent."""
    if not isinstance(request.body, dict):
        body = error_body("invalid_request_error", "body must be a JSON object")
        await stub._send_json(conn, 400, body, keep_alive)
        return 400
    fault = stub.fault_for(request)
    plan = _plan(request.body, lambda: f"toolu_stub_{stub._next_id()}", fault)
    if isinstance(plan, _ErrorReply):
        extra = {"retry-after": plan.retry_after} if plan.retry_after is not None else {}
        extra.update(plan.headers or {})
        body = error_body(plan.error_type, plan.message)
        await stub._send_json(conn, plan.status, body, keep_alive, extra_headers=extra)
        return plan.status
    message_id = f"msg_stub_{stub._next_id()}"
    model = model_of(request.body)
    if isinstance(fault, CutPlan | HangPlan):
        reply = _Reply((TextPart(fault.chunks),) if isinstance(fault, CutPlan) else (), "")
        if request.body.get("stream"):
            await _stream_fault(stub, conn, fault, reply, message_id, model, keep_alive)
        else:
            await stub.json_fault(conn, fault, _message_json(reply, message_id, model))
    if request.body.get("stream"):
        await _stream(stub, conn, plan, message_id, model, keep_alive)
        return 200
    for block in plan.blocks:
        if isinstance(block, TextPart) and block.delay:
            for _ in block.chunks[1:]:
                await asyncio.sleep(block.delay)
                if conn.gone():
                    raise ClientGone
    await stub._send_json(conn, 200, _message_json(plan, message_id, model), keep_alive)
    return 200


async def _stream(
    stub: StubLLM, conn: Conn, reply: _Reply, message_id: str, model: str, keep_alive: bool
) -> None:
    await stub._open_sse(conn, keep_alive)

    async def emit(event: dict[str, Any]) -> None:
        await send_chunk(conn, _sse(event))

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
                        raise ClientGone
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
    await end_chunks(conn)


async def _stream_fault(
    stub: StubLLM,
    conn: Conn,
    fault: CutPlan | HangPlan,
    reply: _Reply,
    message_id: str,
    model: str,
    keep_alive: bool,
) -> NoReturn:
    await stub._open_sse(conn, keep_alive)
    start = _message_json(reply, message_id, model)
    start.update(content=[], stop_reason=None, usage=_usage(1))
    await send_chunk(conn, _sse({"type": "message_start", "message": start}))
    await send_chunk(conn, _sse({"type": "ping"}))
    if isinstance(fault, HangPlan):
        await conn.keep_alive(b"%x\r\n%s\r\n" % (len(_PING), _PING))
    block = {"type": "text", "text": ""}
    await send_chunk(
        conn, _sse({"type": "content_block_start", "index": 0, "content_block": block})
    )
    for chunk in fault.chunks:
        delta = {"type": "text_delta", "text": chunk}
        await send_chunk(conn, _sse({"type": "content_block_delta", "index": 0, "delta": delta}))
    await conn.cut()


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}
