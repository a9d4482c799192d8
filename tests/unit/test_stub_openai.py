"""The stub's OpenAI Responses (Codex) and Chat Completions (OpenCode) routes, over real HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.stub_llm import DEFAULT_TEXT, INPUT_TOKENS, OUTPUT_TOKENS, SIDE_TEXT, StubLLM
from tests.stub_openai import choose_shell_tool

RESPONSES = "/v1/responses"
CHAT = "/v1/chat/completions"

EXEC_COMMAND = {
    "type": "function",
    "name": "exec_command",
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string"}, "workdir": {"type": "string"}},
        "required": ["cmd"],
    },
}
OPENCODE_BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout": {"type": "integer"},
                "workdir": {"type": "string"},
            },
            "required": ["command"],
        },
    },
}


@pytest.fixture
def stub() -> Iterator[StubLLM]:
    with StubLLM() as server:
        yield server


@pytest.fixture
def client(stub: StubLLM) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stub.base_url, timeout=10) as http:
        yield http


def user_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def responses_body(*items: dict[str, Any], stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-test", "stream": stream, "input": list(items), **extra}


def chat_body(*messages: dict[str, Any], stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {
        "model": "chat-test",
        "stream": stream,
        "stream_options": {"include_usage": True},
        "messages": list(messages),
        **extra,
    }


def responses_events(client: httpx.Client, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """POST a streaming Responses request; checks each ``event:`` name matches its ``type``."""
    events: list[dict[str, Any]] = []
    name = None
    with client.stream("POST", RESPONSES, json=payload) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                event = json.loads(line.removeprefix("data: "))
                assert event["type"] == name
                events.append(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    return events


def chat_chunks(client: httpx.Client, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """POST a streaming Chat Completions request; returns the chunks, checks the final [DONE]."""
    data: list[str] = []
    with client.stream("POST", CHAT, json=payload) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            assert not line.startswith("event:")
            if line.startswith("data: "):
                data.append(line.removeprefix("data: "))
    assert data[-1] == "[DONE]"
    return [json.loads(d) for d in data[:-1]]


def responses_text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")


def chat_text(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_responses_text_streams_in_the_openai_event_order(
    stub: StubLLM, client: httpx.Client
) -> None:
    events = responses_events(client, responses_body(user_item("hi")))

    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert responses_text(events) == DEFAULT_TEXT
    created = events[0]["response"]
    assert created["status"] == "in_progress"
    assert created["model"] == "gpt-test"
    item = events[-2]["item"]
    assert item["type"] == "message"
    assert item["role"] == "assistant"
    assert item["content"] == [{"type": "output_text", "text": DEFAULT_TEXT, "annotations": []}]
    assert events[7]["text"] == DEFAULT_TEXT
    completed = events[-1]["response"]
    assert completed["id"] == created["id"]
    assert completed["status"] == "completed"
    assert completed["output"] == [item]
    assert completed["usage"] == {
        "input_tokens": INPUT_TOKENS,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": OUTPUT_TOKENS,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
    }
    [request] = stub.openai_requests()
    assert request.is_openai
    assert request.last_user_text == "hi"
    assert stub.model_requests() == [request]


def test_chat_text_streams_chunks_usage_and_done(client: httpx.Client) -> None:
    chunks = chat_chunks(client, chat_body({"role": "user", "content": "hi"}))

    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chat_text(chunks) == DEFAULT_TEXT
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["prompt_tokens"] == INPUT_TOKENS
    assert chunks[-1]["usage"]["completion_tokens"] == OUTPUT_TOKENS
    assert chunks[-1]["usage"]["total_tokens"] == INPUT_TOKENS + OUTPUT_TOKENS


def test_responses_tool_directive_calls_the_requests_exec_command(client: httpx.Client) -> None:
    payload = responses_body(
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "x"}]},
        user_item("<environment_context>cwd</environment_context>"),
        user_item("please [[tool:bash touch created.txt]]"),
        tools=[{"type": "function", "name": "write_stdin", "parameters": {}}, EXEC_COMMAND],
    )

    first = responses_events(client, payload)
    second = responses_events(client, payload)

    assert responses_text(first) == "I will run a command."
    calls = [
        e["item"]
        for e in first
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"
    ]
    assert len(calls) == 1
    assert calls[0]["name"] == "exec_command"
    assert json.loads(calls[0]["arguments"]) == {"cmd": "touch created.txt"}
    assert calls[0]["call_id"].startswith("call_stub_")
    [done] = [e for e in first if e["type"] == "response.function_call_arguments.done"]
    assert done["arguments"] == calls[0]["arguments"]
    assert [o["type"] for o in first[-1]["response"]["output"]] == ["message", "function_call"]
    second_call = next(
        e["item"]
        for e in second
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"
    )
    assert second_call["call_id"] != calls[0]["call_id"]


def test_chat_tool_directive_calls_the_requests_bash(client: httpx.Client) -> None:
    payload = chat_body(
        {"role": "system", "content": "You are opencode."},
        {"role": "user", "content": "[[tool:bash touch x]]"},
        tools=[OPENCODE_BASH],
    )

    chunks = chat_chunks(client, payload)

    assert chat_text(chunks) == "I will run a command."
    deltas = [
        call
        for c in chunks
        if c["choices"]
        for call in c["choices"][0]["delta"].get("tool_calls") or []
    ]
    assert deltas[0]["id"].startswith("call_stub_")
    assert deltas[0]["type"] == "function"
    assert deltas[0]["function"]["name"] == "bash"
    assert {d["index"] for d in deltas} == {0}
    arguments = "".join(d["function"]["arguments"] for d in deltas)
    assert json.loads(arguments) == {"command": "touch x"}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        ([EXEC_COMMAND], ("exec_command", {"cmd": "ls"})),
        ([OPENCODE_BASH], ("bash", {"command": "ls"})),
        (
            [
                {
                    "type": "function",
                    "name": "shell",
                    "parameters": {"properties": {"command": {"type": "array"}}},
                }
            ],
            ("shell", {"command": ["bash", "-lc", "ls"]}),
        ),
        (
            [
                {
                    "type": "function",
                    "function": {
                        "name": "bash",
                        "parameters": {
                            "properties": {
                                "command": {"type": "string"},
                                "description": {"type": "string"},
                            }
                        },
                    },
                }
            ],
            ("bash", {"command": "ls", "description": "run command"}),
        ),
        (None, ("exec_command", {"cmd": "ls"})),
    ],
)
def test_shell_tool_is_chosen_by_name_and_shaped_by_its_schema(
    tools: list[dict[str, Any]] | None, expected: tuple[str, dict[str, Any]]
) -> None:
    body: dict[str, Any] = {} if tools is None else {"tools": tools}
    assert choose_shell_tool(body, "ls", "exec_command") == expected


def test_tools_missing_from_the_request_fall_back_per_format(client: httpx.Client) -> None:
    responses = client.post(
        RESPONSES, json=responses_body(user_item("[[tool:bash true]]"), stream=False)
    ).json()
    chat = client.post(
        CHAT, json=chat_body({"role": "user", "content": "[[tool:bash true]]"}, stream=False)
    ).json()

    assert responses["output"][1]["name"] == "exec_command"
    assert json.loads(responses["output"][1]["arguments"]) == {"cmd": "true"}
    [call] = chat["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "bash"
    assert json.loads(call["function"]["arguments"]) == {
        "command": "true",
        "description": "run command",
    }
    assert chat["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(
    "output",
    [
        "Process exited with code 0\nOutput:\nhello",
        [{"type": "input_text", "text": "Process exited with code 0\nOutput:\nhello"}],
    ],
)
def test_responses_tool_output_gets_a_final_answer(client: httpx.Client, output: Any) -> None:
    payload = responses_body(
        user_item("[[tool:bash echo hello]]"),
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "exec_command",
            "arguments": "{}",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": output},
    )

    events = responses_events(client, payload)

    assert responses_text(events) == "Tool said: Process exited with code 0\nOutput:\nhello"
    assert [o["type"] for o in events[-1]["response"]["output"]] == ["message"]


def test_chat_tool_message_gets_a_final_answer(client: httpx.Client) -> None:
    payload = chat_body(
        {"role": "user", "content": "[[tool:bash touch x]]"},
        {
            "role": "assistant",
            "content": "I will run a command.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "(no output)"},
        tools=[OPENCODE_BASH],
    )

    chunks = chat_chunks(client, payload)

    assert chat_text(chunks) == "Tool said: (no output)"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("path", [RESPONSES, CHAT])
@pytest.mark.parametrize(
    ("status", "error_type", "code"),
    [
        (500, "server_error", None),
        (429, "requests", "rate_limit_exceeded"),
        (401, "invalid_request_error", "invalid_api_key"),
        (503, "server_error", "server_is_overloaded"),
    ],
)
def test_error_directive(
    client: httpx.Client, path: str, status: int, error_type: str, code: str | None
) -> None:
    text = f"[[error:{status}]]"
    payload = (
        responses_body(user_item(text))
        if path == RESPONSES
        else chat_body({"role": "user", "content": text})
    )

    response = client.post(path, json=payload)

    assert response.status_code == status
    error = response.json()["error"]
    assert error["type"] == error_type
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]
    # On 429 and also on 5xx, so OpenCode's built-in retries (which honour it) take no time.
    assert (response.headers.get("retry-after") == "0") is (status != 401)


def test_side_requests_get_plain_text_whatever_the_prompt(
    stub: StubLLM, client: httpx.Client
) -> None:
    # OpenCode's concurrent title request: small_model, a title-generator system prompt, no tools.
    title = chat_body(
        {"role": "system", "content": "You are a title generator. You output ONLY a thread title."},
        {"role": "user", "content": "Generate a title for this conversation:"},
        {"role": "user", "content": "[[tool:bash rm -rf x]] [[error:500]]"},
    )
    empty_tools = responses_body(user_item("[[slow:30]]"), tools=[])

    assert chat_text(chat_chunks(client, title)) == SIDE_TEXT
    assert responses_text(responses_events(client, empty_tools)) == SIDE_TEXT
    # No tools and no title-generator prompt (a hand-written request): a main request.
    main = chat_body({"role": "system", "content": "Be brief."}, {"role": "user", "content": "x"})
    assert chat_text(chat_chunks(client, main)) == DEFAULT_TEXT
    requests = stub.openai_requests()
    assert [r.is_side for r in requests] == [True, True, False]
    assert stub.model_requests() == requests[2:]


def test_echo_counts_input_items_and_messages(client: httpx.Client) -> None:
    responses = client.post(
        RESPONSES,
        json=responses_body(user_item("a"), user_item("b"), user_item("[[echo]]"), stream=False),
    ).json()
    chat = client.post(
        CHAT,
        json=chat_body(
            {"role": "system", "content": "s"},
            {"role": "user", "content": "[[echo]]"},
            stream=False,
        ),
    ).json()

    assert responses["output"][0]["content"][0]["text"] == "Echo: 3"
    assert responses["usage"]["total_tokens"] == INPUT_TOKENS + OUTPUT_TOKENS
    assert chat["object"] == "chat.completion"
    assert chat["choices"][0]["message"] == {"role": "assistant", "content": "Echo: 2"}
    assert chat["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("path", [RESPONSES, CHAT])
def test_slow_stream_stops_when_the_client_leaves(
    stub: StubLLM, client: httpx.Client, path: str
) -> None:
    payload = (
        responses_body(user_item("[[slow:30]]"))
        if path == RESPONSES
        else chat_body({"role": "user", "content": "[[slow:30]]"})
    )
    with client.stream("POST", path, json=payload) as response:
        for line in response.iter_lines():
            if "tick 1 " in line:
                break

    # A 30 s stream must be noticed as abandoned within a few ticks, not run to the end.
    [answer] = stub.wait_for_responses(1, timeout=5)
    assert not answer.completed


async def test_slow_non_streaming_reply_waits_for_every_tick(stub: StubLLM) -> None:
    async with httpx.AsyncClient(base_url=stub.openai_base_url, timeout=10) as http:
        response = await http.post(
            "/chat/completions",
            json=chat_body({"role": "user", "content": "[[slow:0.2]]"}, stream=False),
        )

    assert response.json()["choices"][0]["message"]["content"] == "tick 1 tick 2 tick 3 tick 4 "


def test_body_that_is_not_an_object_is_a_400(client: httpx.Client) -> None:
    response = client.post(CHAT, content=b"[1, 2]", headers={"content-type": "application/json"})

    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_call_directive_is_a_function_call_with_those_arguments(client: httpx.Client) -> None:
    plan = {"plan": [{"step": "Read", "status": "in_progress"}]}
    payload = responses_body(user_item(f"[[call:update_plan {json.dumps(plan)}]]"))

    events = responses_events(client, payload)

    [call] = [
        e["item"]
        for e in events
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"
    ]
    assert call["name"] == "update_plan"
    assert json.loads(call["arguments"]) == plan


def test_a_delay_set_for_one_api_holds_back_its_first_byte(
    stub: StubLLM, client: httpx.Client
) -> None:
    stub.delays["openai"] = 0.3
    started = time.monotonic()
    with client.stream("POST", RESPONSES, json=responses_body(user_item("hi"))) as response:
        headers_after = time.monotonic() - started
        assert response.status_code == 200
        events = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert headers_after >= 0.3  # a lower bound: the stub slept before answering
    assert events  # the answer itself is unchanged
    assert stub.delays == {"openai": 0.3}
    assert StubLLM(delays={"anthropic": 1.5}).delays == {"anthropic": 1.5}
