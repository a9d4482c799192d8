"""The relay in this process (``Relay`` over two pipes), for what needs one of its timings
shortened: a gateway that takes too long to reopen the sessions is connected to again."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from agent_gateway_acp import relay
from agent_gateway_acp.endpoint import acp_endpoint
from agent_gateway_acp.relay import Relay
from agent_gateway_acp.stdio import EditorPipe
from tests.integration.relayproc import TIMEOUT_S, Editor
from tests.integration.scripted_acp import ScriptedGateway


@asynccontextmanager
async def relay_on_pipes(
    gateway: ScriptedGateway,
) -> AsyncIterator[tuple[Editor, asyncio.Task[int]]]:
    """A relay to ``gateway`` on two pipes, and the editor at their other ends."""
    loop = asyncio.get_running_loop()
    to_relay, from_editor = os.pipe()
    to_editor, from_relay = os.pipe()
    stdin, stdout = os.fdopen(to_relay, "rb"), os.fdopen(from_relay, "wb")
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(to_editor, "rb")
    )
    protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader())
    transport, _ = await loop.connect_write_pipe(lambda: protocol, os.fdopen(from_editor, "wb"))
    editor = Editor(asyncio.StreamWriter(transport, protocol, None, loop), reader)
    pipe = EditorPipe(stdin=stdin, stdout=stdout)
    running = asyncio.create_task(
        Relay(url=acp_endpoint(gateway.url), token=gateway.token, editor=pipe).run()
    )
    try:
        yield editor, running
    finally:
        if not running.done():
            await editor.close_stdin()
        async with asyncio.timeout(TIMEOUT_S):
            await running
        stdin.close()
        stdout.close()
        await editor.kill()


async def test_a_gateway_slow_to_reopen_the_sessions_is_connected_to_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(relay, "RESTORE_TIMEOUT_S", 0.5)
    threads = threading.active_count()
    async with ScriptedGateway() as gateway, relay_on_pipes(gateway) as (editor, running):
        session = await editor.start_session(tmp_path)
        prompt = await editor.request(
            "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
        )
        await gateway.wait_for(lambda: gateway.messages("session/prompt"))
        await gateway.update(session, "before")
        gateway.ignoring.add("session/load")
        gateway.drop()
        await gateway.wait_for(lambda: gateway.messages("session/load", conn=2))
        gateway.ignoring.clear()

        await gateway.wait_for(lambda: gateway.messages("_agentGateway/awaitTurn", conn=3))
        assert gateway.connections[1].closed
        await gateway.update(session, "after")
        await gateway.finish(session)
        assert (await editor.response(prompt))["result"]["stopReason"] == "end_turn"
        assert editor.updates() == ["before", "after"]
        await editor.close_stdin()
        assert await running == 0
    assert threading.active_count() == threads
