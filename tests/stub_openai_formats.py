"""The two OpenAI wire formats the stub renders a plan in: ``Responses`` (SSE events or one
``response`` object, Codex) and ``Chat`` (``chat.completion.chunk`` SSE or one
``chat.completion``, OpenCode), from the plan's steps (``Text``, ``Call``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from tests.stub_llm import INPUT_TOKENS, OUTPUT_TOKENS, TextPart


class Text:
    """A step of plain text (its chunks, paced or not)."""

    def __init__(self, part: TextPart) -> None:
        self.part = part


class Call:
    """A step calling a tool: its id, name and JSON-encoded arguments."""

    def __init__(self, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        self.call_id = call_id
        self.name = name
        self.arguments = json.dumps(arguments)


class Responses:
    """Renders a plan as the OpenAI Responses API (SSE events or one ``response`` object)."""

    def __init__(self, model: str, next_id: Callable[[], int]) -> None:
        self.model = model
        self.next_id = next_id
        self.response_id = f"resp_stub_{next_id()}"
        self.created_at = int(time.time())
        self.sequence = 0
        self.output: list[dict[str, Any]] = []
        self.item_id = ""

    def _response(self, status: str, usage: bool) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": self.model,
            "output": list(self.output) if status == "completed" else [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": _responses_usage() if usage else None,
        }

    def _event(self, kind: str, **fields: Any) -> bytes:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return f"event: {kind}\ndata: {json.dumps(event)}\n\n".encode()

    def start(self) -> list[bytes]:
        return [
            self._event("response.created", response=self._response("in_progress", False)),
            self._event("response.in_progress", response=self._response("in_progress", False)),
        ]

    def text_start(self) -> list[bytes]:
        self.item_id = f"msg_stub_{self.next_id()}"
        item = {
            "id": self.item_id,
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        index = len(self.output)
        part = {"type": "output_text", "text": "", "annotations": []}
        return [
            self._event("response.output_item.added", output_index=index, item=item),
            self._event(
                "response.content_part.added",
                item_id=self.item_id,
                output_index=index,
                content_index=0,
                part=part,
            ),
        ]

    def text_delta(self, chunk: str) -> bytes:
        return self._event(
            "response.output_text.delta",
            item_id=self.item_id,
            output_index=len(self.output),
            content_index=0,
            delta=chunk,
            logprobs=[],
        )

    def _message_item(self, text: str, item_id: str) -> dict[str, Any]:
        return {
            "id": item_id,
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }

    def text_end(self, text: str) -> list[bytes]:
        index = len(self.output)
        item = self._message_item(text, self.item_id)
        part = item["content"][0]
        where = {"item_id": self.item_id, "output_index": index, "content_index": 0}
        events = [
            self._event("response.output_text.done", **where, text=text, logprobs=[]),
            self._event("response.content_part.done", **where, part=part),
            self._event("response.output_item.done", output_index=index, item=item),
        ]
        self.output.append(item)
        return events

    def _call_item(self, call: Call, item_id: str, status: str, arguments: str) -> dict[str, Any]:
        return {
            "id": item_id,
            "type": "function_call",
            "status": status,
            "call_id": call.call_id,
            "name": call.name,
            "arguments": arguments,
        }

    def call(self, call: Call) -> list[bytes]:
        item_id = f"fc_stub_{self.next_id()}"
        index = len(self.output)
        done = self._call_item(call, item_id, "completed", call.arguments)
        where = {"item_id": item_id, "output_index": index}
        events = [
            self._event(
                "response.output_item.added",
                output_index=index,
                item=self._call_item(call, item_id, "in_progress", ""),
            ),
            self._event("response.function_call_arguments.delta", **where, delta=call.arguments),
            self._event("response.function_call_arguments.done", **where, arguments=call.arguments),
            self._event("response.output_item.done", output_index=index, item=done),
        ]
        self.output.append(done)
        return events

    def finish(self, calls_tool: bool) -> list[bytes]:
        return [self._event("response.completed", response=self._response("completed", True))]

    def whole(self, steps: list[Text | Call]) -> dict[str, Any]:
        for step in steps:
            if isinstance(step, Text):
                self.output.append(self._message_item(step.part.text, f"msg_stub_{self.next_id()}"))
            else:
                item = self._call_item(
                    step, f"fc_stub_{self.next_id()}", "completed", step.arguments
                )
                self.output.append(item)
        return self._response("completed", True)


def _responses_usage() -> dict[str, Any]:
    return {
        "input_tokens": INPUT_TOKENS,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": OUTPUT_TOKENS,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
    }


def _chat_usage() -> dict[str, Any]:
    return {
        "prompt_tokens": INPUT_TOKENS,
        "completion_tokens": OUTPUT_TOKENS,
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


class Chat:
    """Renders a plan as OpenAI Chat Completions (``chat.completion.chunk`` SSE or one object)."""

    def __init__(self, model: str, next_id: Callable[[], int]) -> None:
        self.model = model
        self.completion_id = f"chatcmpl-stub-{next_id()}"
        self.created = int(time.time())
        self.tool_index = 0

    def _chunk(
        self, delta: dict[str, Any], finish_reason: str | None = None, **extra: Any
    ) -> bytes:
        chunk = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            **extra,
        }
        return f"data: {json.dumps(chunk)}\n\n".encode()

    def start(self) -> list[bytes]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def text_start(self) -> list[bytes]:
        return []

    def text_delta(self, chunk: str) -> bytes:
        return self._chunk({"content": chunk})

    def text_end(self, text: str) -> list[bytes]:
        return []

    def call(self, call: Call) -> list[bytes]:
        index = self.tool_index
        self.tool_index += 1
        head = {
            "index": index,
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        args = {"index": index, "function": {"arguments": call.arguments}}
        return [self._chunk({"tool_calls": [head]}), self._chunk({"tool_calls": [args]})]

    def finish(self, calls_tool: bool) -> list[bytes]:
        usage = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": _chat_usage(),
        }
        return [
            self._chunk({}, "tool_calls" if calls_tool else "stop"),
            f"data: {json.dumps(usage)}\n\n".encode(),
            b"data: [DONE]\n\n",
        ]

    def whole(self, steps: list[Text | Call]) -> dict[str, Any]:
        text = "".join(s.part.text for s in steps if isinstance(s, Text))
        calls = [
            {
                "id": s.call_id,
                "type": "function",
                "function": {"name": s.name, "arguments": s.arguments},
            }
            for s in steps
            if isinstance(s, Call)
        ]
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": _chat_usage(),
        }
