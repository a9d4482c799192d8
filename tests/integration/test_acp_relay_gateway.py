"""``agent-gateway-acp`` against the real gateway: the relay runs as editors run it (a child
process, ACP on its stdin and stdout, the ACP SDK's own client on its pipes) and reaches a
gateway whose ``claude`` is the fake (tests/fakes/fake_claude.py) through a TCP proxy on
127.0.0.1 that the test cuts (tests/integration/cutproxy.py). The editor must see one
unbroken agent: every update once, in order; a prompt answered with its stop reason; a
permission or question asked once however often the gateway asks it, answered once; a cancel
sent while the connection is down delivered."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import sys
import termios
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from acp import PROTOCOL_VERSION, Client, spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import Implementation

from tests.acpclients import Editor, capabilities
from tests.fakes.gateway import FakeGateway
from tests.gateway import TOKEN, log_lines
from tests.integration.cutproxy import CutProxy
from tests.integration.relayproc import relay_env

pytestmark = pytest.mark.timeout(120)

LIMIT_S = 30.0


class Relayed:
    """The relay process, the SDK client on its pipes, and the proxy it reaches the gateway
    through."""

    def __init__(
        self,
        connection: ClientSideConnection,
        process: asyncio.subprocess.Process,
        proxy: CutProxy,
        log: Path,
    ) -> None:
        self.connection = connection
        self.process = process
        self.proxy = proxy
        self.log = log

    async def new_session(self, gateway: FakeGateway) -> str:
        created = await self.connection.new_session(cwd=str(gateway.workspace), mcp_servers=[])
        return str(created.session_id)

    def prompt(self, session_id: str, text: str) -> asyncio.Task[Any]:
        return asyncio.create_task(
            self.connection.prompt(session_id=session_id, prompt=[text_block(text)])
        )

    async def logged(self, text: str) -> None:
        """Until the relay's log says ``text`` (its log file is outside the test's reach)."""
        deadline = time.monotonic() + LIMIT_S
        while text not in (self.log.read_text() if self.log.exists() else ""):
            assert time.monotonic() < deadline, f"the relay never logged {text!r}"
            await asyncio.sleep(0.02)

    async def reconnected(self, times: int = 1) -> None:
        """Until the relay is connected again after ``times`` cuts."""
        await self.proxy.wait_for(lambda: self.proxy.accepted > times and self.proxy.open)

    async def read_by_relay(self) -> None:
        """Until the relay has read everything the editor wrote to its stdin."""
        stdin = self.process.stdin
        assert stdin is not None
        pipe = stdin.transport.get_extra_info("pipe")
        deadline = time.monotonic() + LIMIT_S
        while stdin.transport.get_write_buffer_size() or _unread(pipe.fileno()):
            assert time.monotonic() < deadline, "the relay stopped reading its stdin"
            await asyncio.sleep(0.01)


def _unread(fileno: int) -> int:
    """Bytes in a pipe not read yet (FIONREAD works on either end of a Linux pipe)."""
    count = bytearray(4)
    fcntl.ioctl(fileno, termios.FIONREAD, count)
    return int.from_bytes(count, sys.byteorder)


@contextlib.asynccontextmanager
async def relayed(
    gateway: FakeGateway, editor: Editor, tmp_path: Path, *, forms: bool = False
) -> AsyncIterator[Relayed]:
    """The relay, started as an editor starts it, initialized, reaching ``gateway`` through
    a proxy."""
    log = tmp_path / "relay.log"
    async with (
        CutProxy(gateway.port) as proxy,
        spawn_agent_process(
            cast(Client, editor),
            sys.executable,
            "-m",
            "agent_gateway_acp",
            "--url",
            proxy.url,
            "--log-file",
            str(log),
            env=relay_env(TOKEN),
            use_unstable_protocol=True,
        ) as (connection, process),
    ):
        initialized = await connection.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=capabilities(forms=forms),
            client_info=Implementation(name="test-editor", version="1"),
        )
        assert initialized.agent_info is not None
        assert initialized.agent_info.name == "agent-gateway"
        yield Relayed(connection, process, proxy, log)


def events(gateway: FakeGateway, session_id: str) -> list[dict[str, Any]]:
    with gateway.client() as client:
        page = client.get(f"/v1/sessions/{session_id}/events", params={"limit": 1000})
    page.raise_for_status()
    found: list[dict[str, Any]] = page.json()["events"]
    return found


def delta_seqs(log: list[dict[str, Any]]) -> list[int]:
    return [e["seq"] for e in log if e["type"] == "message.delta"]


def chunk_seqs(editor: Editor) -> list[int]:
    return [
        u.field_meta["agentGateway"]["seq"]
        for _, u in editor.updates
        if u.session_update == "agent_message_chunk"
    ]


def turns(gateway: FakeGateway, session_id: str) -> list[dict[str, Any]]:
    with gateway.client() as client:
        page = client.get(f"/v1/sessions/{session_id}/turns")
    page.raise_for_status()
    found: list[dict[str, Any]] = page.json()["turns"]
    return found


def errors_logged(gateway: FakeGateway) -> list[str]:
    """What the gateway logged as an error: a connection cut is no error of the gateway's."""
    return [line["msg"] for line in log_lines(gateway) if line["level"] in ("error", "critical")]


async def settled(prompting: asyncio.Task[Any]) -> Any:
    async with asyncio.timeout(LIMIT_S):
        return await prompting


# --- streaming --------------------------------------------------------------------------------


async def test_a_prompt_streams_through_the_relay(
    fake_gateway: FakeGateway, tmp_path: Path
) -> None:
    editor = Editor()
    async with relayed(fake_gateway, editor, tmp_path) as relay:
        sid = await relay.new_session(fake_gateway)
        answered = await settled(relay.prompt(sid, "deltas:5"))
    log = events(fake_gateway, sid)
    assert answered.stop_reason == "end_turn"
    assert editor.texts() == "".join(e["data"]["text"] for e in log if e["type"] == "message.delta")
    assert editor.texts("user_message_chunk") == ""  # the editor shows its prompt itself
    assert chunk_seqs(editor) == delta_seqs(log)
    (end,) = [e for e in log if e["type"] == "turn.completed"]
    assert answered.field_meta == {"agentGateway": {"turnId": end["turn_id"], "seq": end["seq"]}}


async def test_a_cut_mid_turn_loses_and_doubles_no_update(
    fake_gateway: FakeGateway, tmp_path: Path
) -> None:
    editor = Editor()
    async with relayed(fake_gateway, editor, tmp_path) as relay:
        sid = await relay.new_session(fake_gateway)
        prompting = relay.prompt(sid, "deltas:80@20")
        for cut, seen in enumerate((10, 40), start=1):

            def enough(seen: int = seen) -> bool:
                return len(chunk_seqs(editor)) >= seen

            await editor.wait_for(enough)
            relay.proxy.sever()
            await relay.reconnected(cut)
        answered = await settled(prompting)
        await relay.logged("reconnected to")
    log = events(fake_gateway, sid)
    assert answered.stop_reason == "end_turn"
    streamed = "".join(e["data"]["text"] for e in log if e["type"] == "message.delta")
    assert all(f"d{i} " in streamed for i in range(80))
    assert chunk_seqs(editor) == delta_seqs(log)  # each once, in order
    assert editor.texts() == streamed
    seqs = editor.seqs()
    assert seqs == sorted(set(seqs))
    (end,) = [e for e in log if e["type"] == "turn.completed"]
    assert answered.field_meta["agentGateway"]["turnId"] == end["turn_id"]
    assert relay.proxy.accepted == 3
    assert errors_logged(fake_gateway) == []


# --- permissions and questions --------------------------------------------------------------


async def test_a_permission_pending_at_a_cut_is_shown_once_and_answered(
    fake_gateway: FakeGateway, tmp_path: Path
) -> None:
    editor = Editor(decided=asyncio.Event())
    async with relayed(fake_gateway, editor, tmp_path) as relay:
        sid = await relay.new_session(fake_gateway)
        prompting = relay.prompt(sid, "ask:echo hi")
        await editor.wait_for(lambda: editor.permissions)
        approval_id = editor.permissions[0].meta["agentGateway"]["approvalId"]
        relay.proxy.sever()
        await relay.logged(f"asked approvalId {approval_id} again; the editor is already asked")
        assert editor.decided is not None
        editor.decided.set()
        answered = await settled(prompting)
    assert answered.stop_reason == "end_turn"
    assert len(editor.permissions) == 1
    assert editor.texts().endswith("ran: echo hi")
    with fake_gateway.client() as client:
        (approval,) = client.get(f"/v1/sessions/{sid}/approvals").json()["approvals"]
    assert approval["id"] == approval_id
    assert approval["decision"] == "allow"
    # No update had named the turn when the connection was cut: the relay sent the prompt
    # again under its promptId, and the gateway started no second turn for it.
    assert [t["prompt"] for t in turns(fake_gateway, sid)] == ["ask:echo hi"]
    assert errors_logged(fake_gateway) == []


async def test_a_permission_answered_while_disconnected_reaches_the_gateway(
    fake_gateway: FakeGateway, tmp_path: Path
) -> None:
    editor = Editor(decided=asyncio.Event())
    async with relayed(fake_gateway, editor, tmp_path) as relay:
        sid = await relay.new_session(fake_gateway)
        prompting = relay.prompt(sid, "ask:echo there")
        await editor.wait_for(lambda: editor.permissions)
        approval_id = editor.permissions[0].meta["agentGateway"]["approvalId"]
        relay.proxy.hold()
        relay.proxy.sever()
        await relay.proxy.wait_for(lambda: relay.proxy.held)
        assert editor.decided is not None
        editor.decided.set()
        await relay.logged(f"the editor answered approvalId {approval_id}; held until")
        relay.proxy.release()
        answered = await settled(prompting)
        await relay.logged(f"asked approvalId {approval_id} again; sent the editor's answer")
    assert answered.stop_reason == "end_turn"
    assert len(editor.permissions) == 1
    assert editor.texts().endswith("ran: echo there")
    assert len(turns(fake_gateway, sid)) == 1


async def test_a_question_is_a_form_through_the_relay_across_a_cut(
    fake_gateway: FakeGateway, tmp_path: Path
) -> None:
    editor = Editor(form_answers={"question_0": "Yes"}, decided=asyncio.Event())
    async with relayed(fake_gateway, editor, tmp_path, forms=True) as relay:
        sid = await relay.new_session(fake_gateway)
        prompting = relay.prompt(sid, "question:Proceed?")
        await editor.wait_for(lambda: editor.forms)
        ((message, mode, meta),) = editor.forms
        assert message == "Proceed?"
        assert set(mode.requested_schema.properties) == {"question_0", "question_0_custom"}
        question_id = meta["agentGateway"]["questionId"]
        relay.proxy.sever()
        await relay.logged(f"asked questionId {question_id} again; the editor is already asked")
        assert editor.decided is not None
        editor.decided.set()
        answered = await settled(prompting)
    assert answered.stop_reason == "end_turn"
    assert len(editor.forms) == 1
    assert editor.texts().endswith('answered: {"Proceed?": "Yes"}')
    assert len(turns(fake_gateway, sid)) == 1


# --- cancel -----------------------------------------------------------------------------------


async def test_a_cancel_sent_while_disconnected_is_delivered(
    fake_gateway: FakeGateway, tmp_path: Path
) -> None:
    editor = Editor()
    async with relayed(fake_gateway, editor, tmp_path) as relay:
        sid = await relay.new_session(fake_gateway)
        prompting = relay.prompt(sid, "slow")
        await editor.wait_for(editor.texts)
        relay.proxy.hold()
        relay.proxy.sever()
        await relay.proxy.wait_for(lambda: relay.proxy.held)
        await relay.connection.cancel(session_id=sid)
        await relay.read_by_relay()
        relay.proxy.release()
        answered = await settled(prompting)
    assert answered.stop_reason == "cancelled"
    log = events(fake_gateway, sid)
    assert [e["type"] for e in log if e["type"].startswith("turn.")][-1] == "turn.interrupted"
