"""The JSON-RPC client against a fake app-server process: answers, routing, crash, hang."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.process.childspec import ProcessSpec
from app.process.runner import ProcessRunner
from app.providers.codex.approvals import refusal
from app.providers.codex.jsonrpc import (
    ConnectionLost,
    Disconnected,
    InboxItem,
    JsonRpcClient,
    RpcError,
    RpcTimeout,
)
from app.providers.codex.protocol import MethodNotAllowed, Notification, ServerRequest

FAKE = Path(__file__).resolve().parent.parent / "fakes" / "fake_codex_app_server.py"

pytestmark = pytest.mark.uvloop


@pytest.fixture
async def runner() -> AsyncIterator[ProcessRunner]:
    runner = ProcessRunner()
    yield runner
    await runner.aclose(grace_s=1)


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "fake.log"


@pytest.fixture
async def client(runner: ProcessRunner, log_path: Path) -> AsyncIterator[JsonRpcClient]:
    env = {"PATH": os.environ["PATH"], "FAKE_CODEX_LOG": str(log_path)}
    process = await runner.spawn(ProcessSpec(argv=(str(FAKE),), cwd=Path("/"), env=env))
    client = JsonRpcClient(process, refuse=refusal)
    yield client
    await client.aclose()


def received(log_path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log_path.read_text().splitlines()]
    return [line["in"] for line in lines if "in" in line]


class Subscriber:
    """Collects a thread's messages; lets a test wait for one that matches."""

    def __init__(self) -> None:
        self.items: list[InboxItem] = []
        self._changed = asyncio.Event()

    def __call__(self, item: InboxItem) -> None:
        self.items.append(item)
        self._changed.set()

    async def wait_for(self, method: str) -> InboxItem:
        async with asyncio.timeout(10):
            while True:
                for item in self.items:
                    if getattr(item, "method", None) == method or type(item).__name__ == method:
                        return item
                self._changed.clear()
                await self._changed.wait()


async def initialize(client: JsonRpcClient) -> None:
    await client.request("initialize", {"clientInfo": {"name": "t", "version": "0"}}, timeout_s=5)
    await client.notify("initialized")


async def test_requests_get_their_own_answers_and_errors(client: JsonRpcClient) -> None:
    with pytest.raises(RpcError) as refused:
        await client.request("thread/start", {}, timeout_s=5)
    assert (refused.value.code, refused.value.message) == (-32600, "Not initialized")
    await initialize(client)
    first, second = await asyncio.gather(
        client.request("thread/start", {"cwd": "/"}, timeout_s=5),
        client.request("thread/start", {"cwd": "/"}, timeout_s=5),
    )
    assert {first["thread"]["id"], second["thread"]["id"]} == {"thr_1", "thr_2"}


@pytest.mark.parametrize(
    "method", ["command/exec", "thread/shellCommand", "fs/readFile", "config/batchWrite"]
)
async def test_t15_methods_outside_the_vocabulary_are_never_sent(
    client: JsonRpcClient, log_path: Path, method: str
) -> None:
    await initialize(client)
    with pytest.raises(MethodNotAllowed):
        await client.request(method, {"command": ["touch", "/tmp/x"]}, timeout_s=5)
    with pytest.raises(MethodNotAllowed):
        await client.notify(method)
    # The connection is fine and the server never saw the refused method.
    await client.request("thread/loaded/list", {}, timeout_s=5)
    assert method not in [message.get("method") for message in received(log_path)]


async def test_notifications_reach_only_their_thread_in_order(client: JsonRpcClient) -> None:
    await initialize(client)
    thread = (await client.request("thread/start", {}, timeout_s=5))["thread"]["id"]
    mine = Subscriber()
    client.subscribe(thread, mine)
    params = {"threadId": thread, "input": [{"type": "text", "text": "hi"}]}
    await client.request("turn/start", params, timeout_s=5)
    await mine.wait_for("turn/completed")
    methods = [item.method for item in mine.items if isinstance(item, Notification)]
    assert methods[0] == "turn/started"
    assert methods[-1] == "turn/completed"
    # The fake also talks about thread "thr_other"; none of that reached this subscriber.
    assert all(item.thread_id == thread for item in mine.items if isinstance(item, Notification))
    client.unsubscribe(thread, mine)
    before = len(mine.items)
    await client.request("turn/start", params, timeout_s=5)
    await client.request("thread/loaded/list", {}, timeout_s=5)  # a round trip after the turn
    assert len(mine.items) == before


async def test_server_requests_are_answered_by_id(client: JsonRpcClient, log_path: Path) -> None:
    await initialize(client)
    thread = (await client.request("thread/start", {}, timeout_s=5))["thread"]["id"]
    mine = Subscriber()
    client.subscribe(thread, mine)
    params = {"threadId": thread, "input": [{"type": "text", "text": "[[approve]]"}]}
    await client.request("turn/start", params, timeout_s=5)
    request = await mine.wait_for("item/commandExecution/requestApproval")
    assert isinstance(request, ServerRequest)
    assert request.id == 0  # the server's own id space starts at 0
    await client.respond(request.id, {"decision": "acceptForSession"})
    await mine.wait_for("turn/completed")
    assert {"id": 0, "result": {"decision": "acceptForSession"}} in received(log_path)


@pytest.mark.parametrize(
    ("method", "answer"),
    [
        ("item/commandExecution/requestApproval", {"result": {"decision": "decline"}}),
        ("item/permissions/requestApproval", {"result": {"permissions": {}, "scope": "turn"}}),
        (
            "item/tool/requestUserInput",
            {
                "error": {
                    "code": -32601,
                    "message": "item/tool/requestUserInput is not supported by Agent Gateway",
                }
            },
        ),
    ],
)
async def test_a_server_request_nobody_owns_is_refused_at_once(
    client: JsonRpcClient, method: str, answer: dict[str, Any]
) -> None:
    await initialize(client)
    thread = (await client.request("thread/start", {}, timeout_s=5))["thread"]["id"]
    mine = Subscriber()
    client.subscribe(thread, mine)
    # The fake asks for thread "thr_orphan", waits for the answer, then tells us what it got.
    text = f"[[orphan:{method}]]"
    params = {"threadId": thread, "input": [{"type": "text", "text": text}]}
    await client.request("turn/start", params, timeout_s=5)
    await mine.wait_for("turn/completed")
    replies = [
        item.params["item"]["text"]
        for item in mine.items
        if isinstance(item, Notification) and item.method == "item/completed"
    ]
    assert replies == ["answer: " + json.dumps({"id": 0, **answer}, sort_keys=True)]


async def test_a_crash_fails_pending_requests_and_tells_every_subscriber(
    client: JsonRpcClient,
) -> None:
    await initialize(client)
    thread = (await client.request("thread/start", {}, timeout_s=5))["thread"]["id"]
    mine, other = Subscriber(), Subscriber()
    client.subscribe(thread, mine)
    client.subscribe("thr_other_session", other)
    params = {"threadId": thread, "input": [{"type": "text", "text": "[[crash]]"}]}
    await client.request("turn/start", params, timeout_s=5)
    await mine.wait_for("Disconnected")
    await other.wait_for("Disconnected")
    assert client.is_closed
    assert client.closed_reason == "the app-server closed its output"
    with pytest.raises(ConnectionLost):
        await client.request("thread/loaded/list", {}, timeout_s=5)
    late = Subscriber()
    client.subscribe("thr_late", late)
    assert late.items == [Disconnected(reason="the app-server closed its output")]
    await client.respond(0, {"decision": "accept"})  # answering a dead server is no error


async def test_a_hung_server_times_out_the_request(client: JsonRpcClient) -> None:
    await initialize(client)
    thread = (await client.request("thread/start", {}, timeout_s=5))["thread"]["id"]
    params = {"threadId": thread, "input": [{"type": "text", "text": "[[freeze]]"}]}
    await client.request("turn/start", params, timeout_s=5)
    # The fake answers turn/start, then reads on and answers nothing.
    with pytest.raises(RpcTimeout, match=r"thread/loaded/list: no answer within 0\.2 s"):
        await client.request("thread/loaded/list", {}, timeout_s=0.2)
