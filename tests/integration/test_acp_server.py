"""The gateway as an ACP agent (``/v1/acp``), driven by the ACP Python SDK's own client over a
real WebSocket to a running gateway whose ``claude`` is the fake (tests/fakes/fake_claude.py):
prompts and their updates, permissions, questions as forms, cancel, a reconnect that loses
and doubles nothing, and bad input answered with JSON-RPC errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import websockets
from acp import RequestError, text_block
from acp.schema import HttpMcpServer, McpServerStdio

from tests.acpclients import Editor, capabilities, choose, connected
from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import TOKEN, log_lines, wait_until
from tests.integration.callers import ALICE, BOB, KEYS

pytestmark = pytest.mark.timeout(120)


def rest(gateway: FakeGateway) -> httpx.Client:
    return gateway.client()


async def new_session(connection: Any, gateway: FakeGateway, **meta: Any) -> str:
    extra = {"agentGateway": meta} if meta else {}
    created = await connection.new_session(cwd=str(gateway.workspace), mcp_servers=[], **extra)
    return str(created.session_id)


async def test_initialize_offers_sessions_and_asks_nothing_of_the_editors_files(
    fake_gateway: FakeGateway,
) -> None:
    editor = Editor()
    async with connected(fake_gateway, editor, initialize=False) as connection:
        answer = await connection.initialize(protocol_version=1, client_capabilities=capabilities())
    assert answer.protocol_version == 1
    offered = answer.agent_capabilities
    assert offered is not None
    assert offered.load_session is True
    sessions = offered.session_capabilities
    assert sessions is not None
    assert None not in (sessions.list, sessions.resume, sessions.close, sessions.fork)
    assert offered.prompt_capabilities is not None
    assert offered.prompt_capabilities.image is False
    assert answer.auth_methods == []
    assert answer.agent_info is not None
    assert answer.agent_info.name == "agent-gateway"


async def test_a_prompt_streams_its_updates_and_answers_with_the_stop_reason(
    fake_gateway: FakeGateway,
) -> None:
    editor = Editor()
    async with connected(fake_gateway, editor) as connection:
        created = await connection.new_session(cwd=str(fake_gateway.workspace), mcp_servers=[])
        sid = created.session_id
        assert created.modes is not None
        assert created.modes.current_mode_id == "ask"
        assert {m.id for m in created.modes.available_modes} == {"ask", "auto_edits", "read_only"}
        assert {o.id for o in created.config_options or []} >= {
            "mode",
            "model",
            "provider",
        }
        answered = await connection.prompt(session_id=sid, prompt=[text_block("hello")])
    assert answered.stop_reason == "end_turn"
    assert answered.field_meta is not None
    turn_id = answered.field_meta["agentGateway"]["turnId"]
    assert editor.texts() == "fake reply"
    assert editor.texts("user_message_chunk") == ""  # its own prompt is not echoed back
    seqs = editor.seqs()
    assert seqs == sorted(seqs)
    assert seqs
    with rest(fake_gateway) as client:
        session = client.get(f"/v1/sessions/{sid}").json()
        turn = client.get(f"/v1/sessions/{sid}/turns/{turn_id}").json()
    assert session["id"] == sid
    assert turn["status"] == "completed"
    assert turn["prompt"] == "hello"


async def test_a_tool_call_asks_the_editor_and_runs_once_allowed(
    fake_gateway: FakeGateway,
) -> None:
    editor = Editor()
    async with connected(fake_gateway, editor) as connection:
        sid = await new_session(connection, fake_gateway)
        answered = await connection.prompt(session_id=sid, prompt=[text_block("ask:echo hi")])
    assert answered.stop_reason == "end_turn"
    (asked,) = editor.permissions
    assert asked.session_id == sid
    assert asked.meta["agentGateway"]["approvalId"].startswith("apr_")
    assert {o.kind for o in asked.options} >= {"allow_once", "reject_once"}
    assert "echo hi" in json.dumps(asked.tool_call.raw_input)
    assert editor.texts().endswith("ran: echo hi")


async def test_a_rejected_tool_call_is_denied(fake_gateway: FakeGateway) -> None:
    editor = Editor(answer=choose("reject_once"))
    async with connected(fake_gateway, editor) as connection:
        sid = await new_session(connection, fake_gateway)
        answered = await connection.prompt(session_id=sid, prompt=[text_block("ask:rm -rf x")])
    assert answered.stop_reason == "end_turn"
    assert "denied" in editor.texts()


async def test_a_question_is_asked_as_a_form_and_its_answer_reaches_the_agent(
    fake_gateway: FakeGateway,
) -> None:
    editor = Editor(form_answers={"question_0": "Yes", "question_0_custom": "carefully"})
    async with connected(fake_gateway, editor, forms=True) as connection:
        sid = await new_session(connection, fake_gateway)
        answered = await connection.prompt(session_id=sid, prompt=[text_block("question:Proceed?")])
    ((message, mode, meta),) = editor.forms
    assert message == "Proceed?"
    assert meta["agentGateway"]["questionId"]
    assert set(mode.requested_schema.properties) == {"question_0", "question_0_custom"}
    assert answered.stop_reason == "end_turn"
    assert editor.texts().endswith('answered: {"Proceed?": "Yes, carefully"}')


async def test_a_client_without_forms_is_told_the_question(fake_gateway: FakeGateway) -> None:
    editor = Editor()
    async with connected(fake_gateway, editor) as connection:
        sid = await new_session(connection, fake_gateway)
        prompting = asyncio.ensure_future(
            connection.prompt(session_id=sid, prompt=[text_block("question:Proceed?")])
        )
        await editor.wait_for(lambda: "The agent asks: Proceed?" in editor.texts())
        with rest(fake_gateway) as client:
            (pending,) = client.get(f"/v1/sessions/{sid}/questions").json()["questions"]
            url = f"/v1/sessions/{sid}/questions/{pending['id']}"
            body = {"answers": [{"selected": ["No"]}]}
            assert client.post(url, json=body).status_code == 200
        answered = await prompting
    assert answered.stop_reason == "end_turn"
    assert editor.forms == []
    assert editor.texts().endswith('answered: {"Proceed?": "No"}')


async def test_cancel_interrupts_the_running_turn(fake_gateway: FakeGateway) -> None:
    editor = Editor()
    async with connected(fake_gateway, editor) as connection:
        sid = await new_session(connection, fake_gateway)
        prompting = asyncio.ensure_future(
            connection.prompt(session_id=sid, prompt=[text_block("slow")])
        )
        await editor.wait_for(editor.texts)
        await connection.cancel(session_id=sid)
        answered = await prompting
    assert answered.stop_reason == "cancelled"


async def test_a_reconnect_mid_turn_loses_and_doubles_no_update(
    fake_gateway: FakeGateway,
) -> None:
    first = Editor()
    async with connected(fake_gateway, first) as connection:
        sid = await new_session(connection, fake_gateway)
        prompting = asyncio.ensure_future(
            connection.prompt(session_id=sid, prompt=[text_block("deltas:60@30")])
        )
        await first.wait_for(lambda: len(first.seqs()) >= 5)
        prompting.cancel()
    # The first connection is gone mid-turn; the turn goes on.
    seen = first.seqs()
    second = Editor()
    async with connected(fake_gateway, second) as connection:
        await connection.load_session(
            cwd=str(fake_gateway.workspace),
            session_id=sid,
            mcp_servers=[],
            agentGateway={"after": seen[-1]},
        )
        turn_id = first.updates[0][1].field_meta["agentGateway"]["turnId"]
        ended = await connection.ext_method(
            "agentGateway/awaitTurn", {"sessionId": sid, "turnId": turn_id}
        )
    assert ended["stopReason"] == "end_turn"
    with rest(fake_gateway) as client:
        events = client.get(f"/v1/sessions/{sid}/events", params={"limit": 1000}).json()["events"]
    streamed = "".join(e["data"]["text"] for e in events if e["type"] == "message.delta")
    assert first.texts() + second.texts() == streamed
    assert not set(first.seqs()) & set(second.seqs())


@pytest.mark.parametrize(
    ("prompt", "asked", "ran"),
    [
        ("ask:echo hi", "permissions", "ran: echo hi"),
        ("question:Proceed?", "forms", 'answered: {"Proceed?": "Yes"}'),
    ],
)
async def test_what_a_dropped_client_left_unanswered_is_asked_again_on_load(
    fake_gateway: FakeGateway, prompt: str, asked: str, ran: str
) -> None:
    """The connection drops while the editor shows a permission request or a form; the
    editor that loads the session is asked it again, with the same id, and its answer
    settles the turn."""
    first = Editor(hold=True)
    async with connected(fake_gateway, first, forms=True) as connection:
        created = await connection.new_session(cwd=str(fake_gateway.workspace), mcp_servers=[])
        sid = created.session_id
        prompting = asyncio.ensure_future(
            connection.prompt(session_id=sid, prompt=[text_block(prompt)])
        )
        await first.wait_for(lambda: getattr(first, asked))
        prompting.cancel()
    assert created.field_meta is not None
    seen = max([created.field_meta["agentGateway"]["seq"], *first.seqs()])
    second = Editor(form_answers={"question_0": "Yes"})
    async with connected(fake_gateway, second, forms=True) as connection:
        await connection.load_session(
            cwd=str(fake_gateway.workspace),
            session_id=sid,
            mcp_servers=[],
            agentGateway={"after": seen},
        )
        await second.wait_for(lambda: getattr(second, asked))
        with rest(fake_gateway) as client:
            turn_id = client.get(f"/v1/sessions/{sid}/turns").json()["turns"][0]["id"]
        ended = await connection.ext_method(
            "agentGateway/awaitTurn", {"sessionId": sid, "turnId": turn_id}
        )
    if asked == "permissions":
        (before,), (again,) = first.permissions, second.permissions
        assert again.meta["agentGateway"] == before.meta["agentGateway"]
        assert again.tool_call.tool_call_id == before.tool_call.tool_call_id
    else:
        ((_, _, before),), ((message, _, again),) = first.forms, second.forms
        assert again["agentGateway"] == before["agentGateway"]
        assert message == "Proceed?"
    assert ended["stopReason"] == "end_turn"
    assert second.texts().endswith(ran)


async def test_a_pending_permission_is_asked_again_of_a_client_that_loads_the_session(
    fake_gateway: FakeGateway,
) -> None:
    first = Editor(decided=asyncio.Event())  # never answers
    async with connected(fake_gateway, first) as connection:
        sid = await new_session(connection, fake_gateway)
        prompting = asyncio.ensure_future(
            connection.prompt(session_id=sid, prompt=[text_block("ask:echo later")])
        )
        await first.wait_for(lambda: first.permissions)
        prompting.cancel()
    (asked,) = first.permissions
    approval_id = asked.meta["agentGateway"]["approvalId"]
    turn_id = asked.meta["agentGateway"]["turnId"]
    with rest(fake_gateway) as client:
        last_seq = client.get(f"/v1/sessions/{sid}").json()["last_seq"]  # waiting: no new events
    second = Editor()
    async with connected(fake_gateway, second) as connection:
        loaded = await connection.load_session(
            cwd=str(fake_gateway.workspace), session_id=sid, mcp_servers=[]
        )
        assert loaded.field_meta == {"agentGateway": {"seq": last_seq}}
        await second.wait_for(lambda: second.permissions)
        ended = await connection.ext_method(
            "agentGateway/awaitTurn", {"sessionId": sid, "turnId": turn_id}
        )
    assert ended["stopReason"] == "end_turn"
    (again,) = second.permissions
    assert again.meta["agentGateway"] == {"approvalId": approval_id, "turnId": turn_id}
    assert [o.option_id for o in again.options] == [o.option_id for o in asked.options]
    assert again.tool_call.tool_call_id == asked.tool_call.tool_call_id
    assert second.texts().endswith("ran: echo later")


async def test_a_pending_question_is_asked_again_of_a_client_that_loads_the_session(
    fake_gateway: FakeGateway,
) -> None:
    first = Editor(decided=asyncio.Event())
    async with connected(fake_gateway, first, forms=True) as connection:
        sid = await new_session(connection, fake_gateway)
        prompting = asyncio.ensure_future(
            connection.prompt(session_id=sid, prompt=[text_block("question:Proceed?")])
        )
        await first.wait_for(lambda: first.forms)
        prompting.cancel()
    ((message, mode, meta),) = first.forms
    second = Editor(form_answers={"question_0": "No"})
    async with connected(fake_gateway, second, forms=True) as connection:
        await connection.load_session(
            cwd=str(fake_gateway.workspace), session_id=sid, mcp_servers=[]
        )
        await second.wait_for(lambda: second.forms)
        ended = await connection.ext_method(
            "agentGateway/awaitTurn",
            {"sessionId": sid, "turnId": meta["agentGateway"]["turnId"]},
        )
    assert ended["stopReason"] == "end_turn"
    ((again_message, again_mode, again_meta),) = second.forms
    assert again_meta == meta
    assert again_message == message
    assert again_mode.requested_schema == mode.requested_schema
    assert second.texts().endswith('answered: {"Proceed?": "No"}')


async def test_a_client_that_leaves_mid_prompt_is_no_error_of_the_gateways(
    fake_gateway: FakeGateway,
) -> None:
    editor = Editor()
    async with connected(fake_gateway, editor) as connection:
        sid = await new_session(connection, fake_gateway)
        prompting = asyncio.ensure_future(
            connection.prompt(session_id=sid, prompt=[text_block("slow")])
        )
        await editor.wait_for(editor.texts)
    prompting.cancel()

    def errors() -> list[str]:
        return [line["msg"] for line in log_lines(fake_gateway) if line["level"] == "error"]

    # The prompt's answer (the turn's end is unknown to a connection that closed) finds the
    # socket closed: a client that left, not an error of the gateway's.
    wait_until(lambda: "left before its request" in fake_gateway.log() or errors())
    assert errors() == []
    with rest(fake_gateway) as client:
        assert client.get(f"/v1/sessions/{sid}").json()["status"] == "running"


async def test_await_turn_of_an_ended_turn_answers_as_its_prompt_did(
    fake_gateway: FakeGateway,
) -> None:
    """The answer a dropped connection lost comes the same through ``awaitTurn`` (or a
    prompt sent again under its ``promptId``) as it came to ``session/prompt``."""
    editor = Editor()
    async with connected(fake_gateway, editor) as connection:
        sid = await new_session(connection, fake_gateway)
        completed = await connection.prompt(session_id=sid, prompt=[text_block("hello")])
        with pytest.raises(RequestError) as failed:
            await connection.prompt(session_id=sid, prompt=[text_block("fail-auth")])
        assert completed.field_meta is not None
        assert failed.value.data is not None
        ended = [completed.field_meta["agentGateway"]["turnId"], failed.value.data["turn_id"]]
        again = await connection.ext_method(
            "agentGateway/awaitTurn", {"sessionId": sid, "turnId": ended[0]}
        )
        with pytest.raises(RequestError) as failed_again:
            await connection.ext_method(
                "agentGateway/awaitTurn", {"sessionId": sid, "turnId": ended[1]}
            )
    assert again == completed.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert failed_again.value.code == failed.value.code
    assert str(failed_again.value) == str(failed.value)
    assert failed_again.value.data == failed.value.data


async def test_load_replays_the_history_then_goes_live(fake_gateway: FakeGateway) -> None:
    first = Editor()
    async with connected(fake_gateway, first) as connection:
        sid = await new_session(connection, fake_gateway)
        await connection.prompt(session_id=sid, prompt=[text_block("hello")])
    second = Editor()
    async with connected(fake_gateway, second) as connection:
        await connection.load_session(
            cwd=str(fake_gateway.workspace), session_id=sid, mcp_servers=[]
        )
        assert second.texts("user_message_chunk") == "hello"
        assert second.texts() == "fake reply"
        answered = await connection.prompt(session_id=sid, prompt=[text_block("again")])
    assert answered.stop_reason == "end_turn"
    assert second.texts() == "fake replyfake reply"


async def test_sessions_are_listed_and_closed(fake_gateway: FakeGateway) -> None:
    editor = Editor()
    async with connected(fake_gateway, editor) as connection:
        sid = await new_session(connection, fake_gateway)
        listed = await connection.list_sessions()
        assert sid in [s.session_id for s in listed.sessions]
        await connection.close_session(session_id=sid)
    with rest(fake_gateway) as client:
        assert client.get(f"/v1/sessions/{sid}").json()["status"] == "closed"


async def test_a_fork_answers_with_the_seq_it_follows_from(fake_gateway: FakeGateway) -> None:
    editor = Editor()
    async with connected(fake_gateway, editor) as connection:
        sid = await new_session(connection, fake_gateway)
        await connection.prompt(session_id=sid, prompt=[text_block("hello")])
        forked = await connection.fork_session(
            cwd=str(fake_gateway.workspace), session_id=sid, mcp_servers=[]
        )
        with rest(fake_gateway) as client:
            fork = client.get(f"/v1/sessions/{forked.session_id}").json()
        assert forked.field_meta == {"agentGateway": {"seq": fork["last_seq"]}}
        answered = await connection.prompt(
            session_id=forked.session_id, prompt=[text_block("again")]
        )
    assert answered.stop_reason == "end_turn"


# --- refusals ---------------------------------------------------------------------------------


async def test_a_second_prompt_while_one_runs_is_refused(fake_gateway: FakeGateway) -> None:
    editor = Editor()
    async with connected(fake_gateway, editor) as connection:
        sid = await new_session(connection, fake_gateway)
        prompting = asyncio.ensure_future(
            connection.prompt(session_id=sid, prompt=[text_block("slow")])
        )
        await editor.wait_for(editor.texts)
        with pytest.raises(RequestError) as refused:
            await connection.prompt(session_id=sid, prompt=[text_block("second")])
        assert refused.value.code == -32602
        assert str((refused.value.data or {})["type"]).endswith("turn_in_progress")
        await connection.cancel(session_id=sid)
        assert (await prompting).stop_reason == "cancelled"


async def test_a_refused_prompt_hides_no_later_turn_with_the_same_text(
    fake_gateway: FakeGateway,
) -> None:
    editor = Editor()
    async with connected(fake_gateway, editor) as connection:
        sid = await new_session(connection, fake_gateway)
        prompting = asyncio.ensure_future(
            connection.prompt(session_id=sid, prompt=[text_block("slow")])
        )
        await editor.wait_for(editor.texts)
        with pytest.raises(RequestError):
            await connection.prompt(session_id=sid, prompt=[text_block("hello")])
        await connection.cancel(session_id=sid)
        assert (await prompting).stop_reason == "cancelled"
        with rest(fake_gateway) as client:  # someone else asks the same
            started = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hello"})
            assert started.status_code == 202
        await editor.wait_for(lambda: editor.texts().endswith("fake reply"))
    assert editor.texts("user_message_chunk") == "hello"


@pytest.mark.parametrize(
    ("cwd", "servers", "expected"),
    [
        ("/etc", [], "workspace"),
        (
            None,
            [McpServerStdio(name="evil", command="/bin/sh", args=["-c", "id"], env=[])],
            "stdio",
        ),
        (
            None,
            [HttpMcpServer(type="http", name="mine", url="http://127.0.0.1:1/mcp", headers=[])],
            "acp.client_mcp_servers",
        ),
    ],
)
async def test_a_session_the_gateway_cannot_take_is_refused_and_nothing_is_made(
    fake_gateway: FakeGateway, cwd: str | None, servers: list[Any], expected: str
) -> None:
    editor = Editor()
    async with connected(fake_gateway, editor) as connection:
        with pytest.raises(RequestError) as refused:
            await connection.new_session(
                cwd=cwd or str(fake_gateway.workspace), mcp_servers=servers
            )
    assert refused.value.code == -32602
    assert expected in json.dumps(refused.value.data) + str(refused.value)
    with rest(fake_gateway) as client:
        assert client.get("/v1/sessions").json()["sessions"] == []
    assert fake_gateway.spawns() == []


async def raw_exchange(gateway: FakeGateway, frames: list[str]) -> list[dict[str, Any]]:
    """Send ``frames`` as they are; the answers, one per frame."""
    async with websockets.connect(
        f"{gateway.ws_url}/v1/acp", additional_headers={"Authorization": f"Bearer {TOKEN}"}
    ) as socket:
        answers = []
        for frame in frames:
            await socket.send(frame)
            async with asyncio.timeout(10):
                answers.append(json.loads(await socket.recv()))
        return answers


async def test_malformed_messages_get_json_rpc_errors(fake_gateway: FakeGateway) -> None:
    answers = await raw_exchange(
        fake_gateway,
        [
            "{not json",
            "[1, 2]",
            '{"jsonrpc": "2.0", "id": 7, "method": 5}',
            '{"jsonrpc": "2.0", "id": 8, "method": "no/such/method", "params": {}}',
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 9,
                    "method": "session/new",
                    "params": {"cwd": "/tmp", "mcpServers": []},
                }
            ),
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 10,
                    "method": "initialize",
                    "params": {},
                }
            ),
        ],
    )
    codes = [(a.get("id"), a["error"]["code"]) for a in answers]
    assert codes == [
        (None, -32700),
        (None, -32600),
        (7, -32600),
        (8, -32601),
        (9, -32600),
        (10, -32602),
    ]
    assert "initialize" in answers[4]["error"]["data"]["detail"]


async def test_a_connection_without_a_valid_key_is_refused(fake_gateway: FakeGateway) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(
            f"{fake_gateway.ws_url}/v1/acp", additional_headers={"Authorization": "Bearer nope"}
        ):
            pass
    assert refused.value.response.status_code == 401


async def test_an_acp_connection_to_any_replica_serves_any_session(
    replicas: dict[str, FakeGateway],
) -> None:
    """The session runs on gw-a (its first turn was started there); an editor attached to
    gw-b drives it: its prompt and its permission answer are forwarded, its updates mirrored."""
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with a.client() as on_a:
        created = on_a.post("/v1/sessions", json={"workspace": str(a.workspace)})
        sid = created.json()["id"]
        assert on_a.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"}).status_code == 202
        wait_until(lambda: on_a.get(f"/v1/sessions/{sid}").json()["status"] == "idle")
        assert on_a.get(f"/v1/sessions/{sid}").json()["owner"] == "gw-a"
    editor = Editor()
    async with connected(b, editor) as connection:
        await connection.load_session(cwd=str(a.workspace), session_id=sid, mcp_servers=[])
        answered = await connection.prompt(session_id=sid, prompt=[text_block("ask:echo there")])
    assert answered.stop_reason == "end_turn"
    assert len(editor.permissions) == 1
    assert editor.texts() == "fake reply" + "ran: echo there"
    with a.client() as on_a:
        assert on_a.get(f"/v1/sessions/{sid}").json()["owner"] == "gw-a"


async def test_an_operator_may_have_the_editors_mcp_servers_dropped_with_a_note(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(acp={"client_mcp_servers": "ignore"}).start()
    editor = Editor()
    server = HttpMcpServer(type="http", name="mine", url="http://127.0.0.1:1/mcp", headers=[])
    async with connected(gateway, editor) as connection:
        created = await connection.new_session(cwd=str(gateway.workspace), mcp_servers=[server])
        await editor.wait_for(lambda: "left out: mine" in editor.texts())
        stdio = McpServerStdio(name="evil", command="/bin/sh", args=[], env=[])
        with pytest.raises(RequestError) as refused:
            await connection.new_session(cwd=str(gateway.workspace), mcp_servers=[stdio])
    assert "never started" in str(refused.value)
    with gateway.client() as client:
        listed = client.get("/v1/sessions").json()["sessions"]
    assert [s["id"] for s in listed] == [created.session_id]


async def test_a_key_reaches_its_own_sessions_only(make_fake_gateway: FakeGatewayFactory) -> None:
    gateway = make_fake_gateway(server=KEYS).start()
    alice, bob = Editor(), Editor()
    async with connected(gateway, alice, token=ALICE) as connection:
        sid = await new_session(connection, gateway)
    async with connected(gateway, bob, token=BOB) as connection:
        for attempt in (
            connection.load_session(cwd=str(gateway.workspace), session_id=sid, mcp_servers=[]),
            connection.close_session(session_id=sid),
        ):
            with pytest.raises(RequestError) as refused:
                await attempt
            assert refused.value.code == -32002
        assert (await connection.list_sessions()).sessions == []
    with gateway.client() as client:
        assert client.get(f"/v1/sessions/{sid}").json()["status"] != "closed"
