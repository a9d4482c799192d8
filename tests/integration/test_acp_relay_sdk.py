"""The ACP Python SDK's own client (``ClientSideConnection`` over the relay's pipes) as the
editor: a third-party client sees one unbroken agent through a dropped connection."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, cast

from acp import Client, spawn_agent_process, text_block
from acp.schema import AllowedOutcome, RequestPermissionResponse

from tests.integration.relayproc import TIMEOUT_S, relay_env
from tests.integration.scripted_acp import ScriptedGateway


class RecordingClient:
    """An editor that records what the agent sends and answers permissions when told to."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.seqs: list[int] = []
        self.asked: list[str] = []
        self.release = asyncio.Event()
        self._changed = asyncio.Event()

    def _touch(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, predicate: Any) -> None:
        async with asyncio.timeout(TIMEOUT_S):
            while not predicate():
                await self._changed.wait()

    async def session_update(self, session_id: str, update: Any, **meta: Any) -> None:
        self.texts.append(update.content.text)
        self.seqs.append(meta["agentGateway"]["seq"])
        self._touch()

    async def request_permission(
        self, options: Any, session_id: str, tool_call: Any, **meta: Any
    ) -> RequestPermissionResponse:
        self.asked.append(meta["agentGateway"]["approvalId"])
        self._touch()
        await self.release.wait()
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="allow_once")
        )


async def test_the_sdk_client_sees_one_unbroken_agent_through_a_drop(tmp_path: Path) -> None:
    client = RecordingClient()
    log = tmp_path / "relay.log"
    async with ScriptedGateway() as gateway:
        async with spawn_agent_process(
            cast("Client", client),
            sys.executable,
            "-m",
            "agent_gateway_acp",
            "--url",
            gateway.url,
            "--log-file",
            str(log),
            env=relay_env(gateway.token),
        ) as (connection, process):
            initialized = await connection.initialize(protocol_version=1)
            assert initialized.agent_info is not None
            assert initialized.agent_info.name == "scripted-gateway"
            session = await connection.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = session.session_id
            prompt = asyncio.create_task(
                connection.prompt(session_id=sid, prompt=[text_block("run the tests")])
            )
            await gateway.wait_for(lambda: gateway.messages("session/prompt"))
            await gateway.update(sid, "Running ")
            await gateway.ask(sid, "apr_1")
            await client.wait_for(lambda: client.asked)

            gateway.drop()
            second = await gateway.connection(2)
            await gateway.wait_for(lambda: second.asked)
            await gateway.update(sid, "the tests")
            await client.wait_for(lambda: len(client.texts) == 2)
            assert client.asked == ["apr_1"]

            client.release.set()
            await gateway.wait_for(lambda: gateway.sessions[sid].outcomes)
            await gateway.update(sid, ": passed")
            await gateway.finish(sid)
            async with asyncio.timeout(TIMEOUT_S):
                answer = await prompt
        assert process.returncode == 0

        assert answer.stop_reason == "end_turn"
        assert client.texts == ["Running ", "the tests", ": passed"]
        assert client.seqs == sorted(set(client.seqs))
        assert gateway.sessions[sid].outcomes == {
            "apr_1": {"outcome": "selected", "optionId": "allow_once"}
        }
        assert gateway.connections[1].close_code == 1000
    assert "reconnected to" in log.read_text()
