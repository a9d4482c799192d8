"""The stub's fault directives ``[[fail]]``, ``[[cut]]`` and ``[[hang]]`` in all three formats."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import tests.stub_llm
from tests.stub_llm import DEFAULT_TEXT, SIDE_TEXT, StubLLM, fault_directive

MESSAGES = "/v1/messages?beta=true"
RESPONSES = "/v1/responses"
CHAT = "/v1/chat/completions"
PATHS = [MESSAGES, RESPONSES, CHAT]


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubLLM]:
    monkeypatch.setattr(tests.stub_llm, "KEEPALIVE_SECONDS", 0.05)
    with StubLLM() as server:
        yield server


@pytest.fixture
def client(stub: StubLLM) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stub.base_url, timeout=10) as http:
        yield http


def conversation(path: str, *prompts: str, stream: bool = True, **extra: Any) -> dict[str, Any]:
    """A request whose user messages are ``prompts``, with an assistant answer between each."""
    entries: list[dict[str, Any]] = []
    for n, prompt in enumerate(prompts):
        if n:
            entries.append({"role": "assistant", "content": "ok"})
        if path == RESPONSES:
            content = [{"type": "input_text", "text": prompt}]
            entries.append({"type": "message", "role": "user", "content": content})
        else:
            entries.append({"role": "user", "content": prompt})
    key = "input" if path == RESPONSES else "messages"
    return {"model": "m", "max_tokens": 100, "stream": stream, key: entries, **extra}


def text_of(path: str, lines: list[str]) -> str:
    """The assistant text in the SSE ``data:`` lines of any of the three formats."""
    text = ""
    for line in lines:
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line.removeprefix("data: "))
        if path == MESSAGES and event["type"] == "content_block_delta":
            text += event["delta"]["text"]
        elif path == RESPONSES and event["type"] == "response.output_text.delta":
            text += event["delta"]
        elif path == CHAT and event["choices"]:
            text += event["choices"][0]["delta"].get("content") or ""
    return text


def read_stream(client: httpx.Client, path: str, payload: dict[str, Any]) -> tuple[list[str], bool]:
    """``(lines, complete)``: every line received, and whether the body ended properly."""
    lines: list[str] = []
    with client.stream("POST", path, json=payload) as response:
        assert response.status_code == 200
        try:
            for line in response.iter_lines():
                lines.append(line)
        except httpx.RemoteProtocolError:
            return lines, False
    return lines, True


FINAL_EVENTS = ("message_stop", "response.completed", "[DONE]", 'finish_reason": "stop')


@pytest.mark.parametrize("path", PATHS)
def test_fail_answers_the_first_n_requests_of_the_conversation_then_recovers(
    stub: StubLLM, client: httpx.Client, path: str
) -> None:
    # Later attempts send a continuation prompt: the directive sits in an earlier user message.
    first = conversation(path, "[[fail:503:2]]")
    later = conversation(path, "[[fail:503:2]]", "Continue the task.")

    failed = [client.post(path, json=first), client.post(path, json=later)]
    lines, complete = read_stream(client, path, later)

    assert [r.status_code for r in failed] == [503, 503]
    for response in failed:
        assert response.headers["retry-after"] == "0"
        assert "error" in response.json()
    assert complete
    assert text_of(path, lines) == DEFAULT_TEXT
    assert stub.fault_uses("[[fail:503:2]]") == 2
    # Another conversation with the same directive text shares the spent counter.
    assert client.post(path, json=conversation(path, "again [[fail:503:2]]")).status_code == 200


def test_fail_counters_are_per_directive_text_and_thread_safe(
    stub: StubLLM, client: httpx.Client
) -> None:
    statuses: list[int] = []
    lock = threading.Lock()

    def send(path: str) -> None:
        with httpx.Client(base_url=stub.base_url, timeout=10) as http:
            status = http.post(path, json=conversation(path, "[[fail:500:3]]", stream=False))
        with lock:
            statuses.append(status.status_code)

    threads = [threading.Thread(target=send, args=(PATHS[n % 3],)) for n in range(9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(statuses) == [200] * 6 + [500] * 3
    assert client.post(CHAT, json=conversation(CHAT, "[[fail:529:1]]")).status_code == 529
    assert stub.fault_uses("[[fail:500:3]]") == 3
    assert stub.fault_uses("[[fail:529:1]]") == 1


@pytest.mark.parametrize("path", PATHS)
def test_cut_streams_k_deltas_then_drops_the_connection_every_time(
    stub: StubLLM, client: httpx.Client, path: str
) -> None:
    payload = conversation(path, "[[cut:2]]", "Continue.")

    for _ in range(2):
        lines, complete = read_stream(client, path, payload)
        assert not complete
        assert text_of(path, lines) == "part 1 part 2 "
        assert not any(final in line for line in lines for final in FINAL_EVENTS)

    answers = stub.wait_for_responses(2, timeout=5)
    assert [(a.status, a.completed, a.cut) for a in answers] == [(200, False, True)] * 2


@pytest.mark.parametrize("path", PATHS)
def test_cut_with_a_count_cuts_only_the_first_n_requests(
    stub: StubLLM, client: httpx.Client, path: str
) -> None:
    payload = conversation(path, "[[cut:1:1]]")

    cut_lines, cut_complete = read_stream(client, path, payload)
    lines, complete = read_stream(client, path, payload)

    assert (cut_complete, text_of(path, cut_lines)) == (False, "part 1 ")
    assert (complete, text_of(path, lines)) == (True, DEFAULT_TEXT)


@pytest.mark.parametrize("path", PATHS)
def test_a_cut_non_streaming_answer_is_half_a_body(
    stub: StubLLM, client: httpx.Client, path: str
) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        client.post(path, json=conversation(path, "[[cut:3]]", stream=False))

    [answer] = stub.wait_for_responses(1, timeout=5)
    assert answer.cut


@pytest.mark.parametrize("path", PATHS)
def test_hang_sends_the_start_then_only_keep_alive_until_the_client_leaves(
    stub: StubLLM, client: httpx.Client, path: str
) -> None:
    lines: list[str] = []
    pings = 0
    with client.stream("POST", path, json=conversation(path, "[[hang]]", "Go on.")) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            lines.append(line)
            if line in (": ping", 'data: {"type": "ping"}'):
                pings += 1
            if pings == 4:
                break

    data = [json.loads(x.removeprefix("data: ")) for x in lines if x.startswith("data: ")]
    if path == MESSAGES:
        assert [d["type"] for d in data] == ["message_start", "ping", "ping", "ping", "ping"]
    elif path == RESPONSES:
        assert [d["type"] for d in data] == ["response.created", "response.in_progress"]
    else:
        assert [d["choices"][0]["delta"] for d in data] == [{"role": "assistant", "content": ""}]
    # The client left: the stub stops instead of pinging forever.
    [answer] = stub.wait_for_responses(1, timeout=5)
    assert (answer.completed, answer.cut) == (False, False)


def test_a_hung_non_streaming_request_gets_nothing_until_the_client_leaves(
    stub: StubLLM,
) -> None:
    with (
        httpx.Client(base_url=stub.base_url, timeout=0.3) as http,
        pytest.raises(httpx.ReadTimeout),
    ):
        http.post(CHAT, json=conversation(CHAT, "[[hang]]", stream=False))

    [answer] = stub.wait_for_responses(1, timeout=5)
    assert not answer.completed


@pytest.mark.parametrize("path", PATHS)
def test_side_requests_never_play_a_fault(stub: StubLLM, client: httpx.Client, path: str) -> None:
    extra: dict[str, Any] = {"tools": []}
    if path == MESSAGES:
        extra["model"] = "claude-haiku-4-5"
    payload = conversation(path, "Title for: [[fail:500:5]] [[cut:1]] [[hang]]", **extra)

    lines, complete = read_stream(client, path, payload)

    assert (complete, text_of(path, lines)) == (True, SIDE_TEXT)
    assert stub.fault_uses("[[fail:500:5]]") == 0


def test_fault_directive_precedence_and_parsing() -> None:
    assert fault_directive("nothing here") is None
    fail = fault_directive("[[hang]] [[cut:2]] [[fail:429:1]]")
    assert fail is not None
    assert (type(fail).__name__, getattr(fail, "status", None)) == ("ErrorPlan", 429)
    cut = fault_directive("[[hang]] [[cut: 4 : 2 ]]")
    assert cut == tests.stub_llm.CutPlan(4)
    assert fault_directive("x [[hang]] y") == tests.stub_llm.HangPlan()
    # A counted directive that is spent lets the next one play.
    spent = fault_directive("[[fail:500:1]] [[cut:1]]", lambda key, n: not key.startswith("[[f"))
    assert spent == tests.stub_llm.CutPlan(1)
