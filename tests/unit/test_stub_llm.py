"""The stub Anthropic Messages API itself, over real loopback HTTP."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.stub_llm import (
    DEFAULT_TEXT,
    INPUT_TOKENS,
    LONG_CHUNK,
    OUTPUT_TOKENS,
    SIDE_TEXT,
    Plan,
    StubLLM,
    TextPart,
    is_side_request,
    plan_reply,
)

MESSAGES = "/v1/messages?beta=true"


@pytest.fixture
def stub() -> Iterator[StubLLM]:
    with StubLLM() as server:
        yield server


@pytest.fixture
def client(stub: StubLLM) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stub.base_url, timeout=10) as http:
        yield http


def body(*messages: dict[str, Any], stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 1024,
        "stream": stream,
        "messages": list(messages),
        **extra,
    }


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def sse_events(response: httpx.Response) -> list[dict[str, Any]]:
    """Parse an SSE body; checks each ``event:`` name matches its data's ``type``."""
    events: list[dict[str, Any]] = []
    name = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            event = json.loads(line.removeprefix("data: "))
            assert event["type"] == name
            events.append(event)
    return events


def stream(client: httpx.Client, payload: dict[str, Any]) -> list[dict[str, Any]]:
    with client.stream("POST", MESSAGES, json=payload) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return sse_events(response)


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(
        e["delta"]["text"]
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta"
    )


def test_default_reply_streams_in_the_anthropic_event_order(
    stub: StubLLM, client: httpx.Client
) -> None:
    events = stream(client, body(user("hi")))

    assert [e["type"] for e in events] == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = events[0]["message"]
    assert start["role"] == "assistant"
    assert start["model"] == "claude-test"
    assert start["content"] == []
    assert start["usage"]["input_tokens"] == INPUT_TOKENS
    assert events[2]["content_block"] == {"type": "text", "text": ""}
    assert text_of(events) == DEFAULT_TEXT
    assert events[-2]["delta"]["stop_reason"] == "end_turn"
    assert events[-2]["usage"] == {"output_tokens": OUTPUT_TOKENS}
    [response] = stub.wait_for_responses(1, timeout=5)
    assert response.completed
    assert response.status == 200


def test_non_streaming_reply_is_one_message(client: httpx.Client) -> None:
    response = client.post(MESSAGES, json=body(user("hi"), stream=False))

    assert response.status_code == 200
    message = response.json()
    assert message["type"] == "message"
    assert message["content"] == [{"type": "text", "text": DEFAULT_TEXT}]
    assert message["stop_reason"] == "end_turn"
    assert message["usage"]["input_tokens"] == INPUT_TOKENS
    assert message["usage"]["output_tokens"] == OUTPUT_TOKENS


def test_tool_directive_streams_a_bash_tool_use_with_fresh_ids(client: httpx.Client) -> None:
    # The CLI puts <system-reminder> blocks before the prompt and a system-role message after it.
    payload = body(
        user(
            [
                {"type": "text", "text": "<system-reminder>\nx\n</system-reminder>\n"},
                {"type": "text", "text": "please [[tool:bash touch created.txt]]"},
            ]
        ),
        {"role": "system", "content": [{"type": "text", "text": "# Environment"}]},
        system=[{"type": "text", "text": "You are a stub test."}],
        tools=[{"name": "Bash", "input_schema": {"type": "object"}}],
    )
    first = stream(client, payload)
    second = stream(client, payload)

    assert text_of(first) == "I will run a command."
    tool_start = [
        e
        for e in first
        if e["type"] == "content_block_start" and e["content_block"]["type"] == "tool_use"
    ]
    assert len(tool_start) == 1
    assert tool_start[0]["index"] == 1
    assert tool_start[0]["content_block"]["name"] == "Bash"
    partial = "".join(
        e["delta"]["partial_json"]
        for e in first
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta"
    )
    assert json.loads(partial) == {"command": "touch created.txt", "description": "run command"}
    assert first[-2]["delta"]["stop_reason"] == "tool_use"
    ids = [
        e["content_block"]["id"]
        for events in (first, second)
        for e in events
        if e["type"] == "content_block_start" and e["content_block"]["type"] == "tool_use"
    ]
    assert ids[0].startswith("toolu_stub_")
    assert ids[0] != ids[1]


@pytest.mark.parametrize(
    "content",
    [
        "(Bash completed with no output)",
        [{"type": "text", "text": "(Bash completed with no output)"}],
    ],
)
def test_tool_result_gets_a_final_answer(client: httpx.Client, content: Any) -> None:
    payload = body(
        user("[[tool:bash true]]"),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}],
        },
        user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": content}]),
    )

    events = stream(client, payload)

    assert text_of(events) == "Tool said: (Bash completed with no output)"
    assert events[-2]["delta"]["stop_reason"] == "end_turn"


def test_echo_counts_messages(client: httpx.Client) -> None:
    payload = body(
        user("first"),
        {"role": "system", "content": "env"},
        {"role": "assistant", "content": "ok"},
        user("[[echo]]"),
        stream=False,
    )

    message = client.post(MESSAGES, json=payload).json()

    assert message["content"][0]["text"] == "Echo: 4"


def test_long_directive_streams_that_many_characters_in_small_deltas(
    client: httpx.Client,
) -> None:
    events = stream(client, body(user("Tell me a story. [[long:2001]]")))

    deltas = [e["delta"]["text"] for e in events if e.get("delta", {}).get("type") == "text_delta"]
    assert len(text_of(events)) == 2001
    assert [len(d) for d in deltas] == [LONG_CHUNK] * 100 + [1]


@pytest.mark.parametrize(
    ("directive", "sizes", "delay"),
    [
        ("[[long:45]]", [LONG_CHUNK, LONG_CHUNK, 5], 0.0),
        ("[[long:45@50]]", [LONG_CHUNK, LONG_CHUNK, 5], 0.02),
        ("[[long:10@150/4]]", [4, 4, 2], 1 / 150),
        ("[[long: 9 @ 2.5 / 3 ]]", [3, 3, 3], 0.4),
        ("[[long:9@0/3]]", [3, 3, 3], 0.0),
    ],
)
def test_long_directive_pace_and_delta_size(directive: str, sizes: list[int], delay: float) -> None:
    plan = plan_reply(f"Tell me a story. {directive}")

    assert isinstance(plan, Plan)
    [part] = plan.parts
    assert isinstance(part, TextPart)
    assert [len(chunk) for chunk in part.chunks] == sizes
    assert part.delay == pytest.approx(delay)
    unpaced = plan_reply(f"[[long:{sum(sizes)}]]")
    assert isinstance(unpaced, Plan)
    assert plan.text == unpaced.text


def test_paced_long_directive_streams_at_most_that_many_deltas_a_second(
    client: httpx.Client,
) -> None:
    started = time.monotonic()
    events = stream(client, body(user("Tell me a story. [[long:40@50/4]]")))
    elapsed = time.monotonic() - started

    deltas = [e["delta"]["text"] for e in events if e.get("delta", {}).get("type") == "text_delta"]
    assert [len(d) for d in deltas] == [4] * 10
    assert len(text_of(events)) == 40
    assert elapsed >= 9 * 0.02  # nine pauses of 20 ms between ten deltas


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (529, "overloaded_error"),
        (500, "api_error"),
        (429, "rate_limit_error"),
        (401, "authentication_error"),
    ],
)
def test_error_directive(client: httpx.Client, status: int, error_type: str) -> None:
    response = client.post(MESSAGES, json=body(user(f"[[error:{status}]]")))

    assert response.status_code == status
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == error_type
    assert (response.headers.get("retry-after") == "0") is (status == 429)


def test_side_requests_get_plain_text_whatever_the_prompt(client: httpx.Client) -> None:
    title_request = body(
        user("Generate a title for: [[tool:bash rm -rf x]] [[error:529]]"),
        model="claude-haiku-4-5",
        tools=[],
    )

    assert is_side_request(title_request)
    assert text_of(stream(client, title_request)) == SIDE_TEXT
    # The main loop with `--tools ""` sends no tools but has thinking on: not a side request.
    main = body(user("[[echo]]"), tools=[], thinking={"type": "adaptive"})
    assert not is_side_request(main)
    assert text_of(stream(client, main)) == "Echo: 1"


def test_records_every_request(stub: StubLLM, client: httpx.Client) -> None:
    stream(client, body(user("hi")))
    counted = client.post("/v1/messages/count_tokens?beta=true", json=body(user("hi")))
    missing = client.get("/v1/models")
    head = client.head("/")

    assert counted.json() == {"input_tokens": INPUT_TOKENS}
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found_error"
    assert head.status_code == 404
    requests = stub.wait_for_requests(4, timeout=5)
    assert [(r.method, r.path) for r in requests] == [
        ("POST", "/v1/messages"),
        ("POST", "/v1/messages/count_tokens"),
        ("GET", "/v1/models"),
        ("HEAD", "/"),
    ]
    first = requests[0]
    assert first.target == MESSAGES
    assert first.query == {"beta": ["true"]}
    assert first.body["messages"] == [user("hi")]
    assert first.last_user_text == "hi"
    assert first.headers["content-type"] == "application/json"
    assert [r.path for r in stub.message_requests()] == ["/v1/messages"]


def test_wait_for_requests_wakes_up_and_times_out(stub: StubLLM, client: httpx.Client) -> None:
    with pytest.raises(TimeoutError):
        stub.wait_for_requests(1, timeout=0.05)

    sender = threading.Thread(target=client.post, args=(MESSAGES,), kwargs={"json": body()})
    sender.start()
    requests = stub.wait_for_message_requests(1, timeout=5)
    sender.join()

    assert len(requests) == 1


def test_slow_stream_stops_when_the_client_leaves(stub: StubLLM, client: httpx.Client) -> None:
    with client.stream("POST", MESSAGES, json=body(user("[[slow:30]]"))) as response:
        for line in response.iter_lines():
            if "tick 1 " in line:
                break

    # A 30 s stream must be noticed as abandoned within a few ticks, not run to the end.
    [answer] = stub.wait_for_responses(1, timeout=5)
    assert not answer.completed


async def test_works_from_async_tests(stub: StubLLM) -> None:
    async with httpx.AsyncClient(base_url=stub.base_url, timeout=10) as http:
        response = await http.post(MESSAGES, json=body(user("[[slow:0.2]]"), stream=False))

    assert response.json()["content"][0]["text"] == "tick 1 tick 2 tick 3 tick 4 "


def test_restart_after_stop() -> None:
    server = StubLLM()
    server.start()
    first_url = server.base_url
    server.stop()
    server.stop()  # idempotent
    with server, httpx.Client(base_url=server.base_url) as http:
        assert http.post(MESSAGES, json=body(user("hi"), stream=False)).status_code == 200
    assert first_url.startswith("http://127.0.0.1:")


def test_call_directive_uses_the_named_tool_with_its_input(client: httpx.Client) -> None:
    todos = {"todos": [{"content": "Read", "status": "in_progress", "activeForm": "Reading"}]}
    payload = body(user(f"plan it [[call:TodoWrite {json.dumps(todos)}]]"))

    events = stream(client, payload)

    assert text_of(events) == "I will use a tool."
    [start] = [
        e
        for e in events
        if e["type"] == "content_block_start" and e["content_block"]["type"] == "tool_use"
    ]
    assert start["content_block"]["name"] == "TodoWrite"
    partial = "".join(
        e["delta"]["partial_json"]
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta"
    )
    assert json.loads(partial) == todos
    assert events[-2]["delta"]["stop_reason"] == "tool_use"
