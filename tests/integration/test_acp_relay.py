"""``agent-gateway-acp`` between an editor and a gateway: the relay runs as a child process
speaking ACP on its stdio (as editors start it), against a scripted ACP WebSocket server on
127.0.0.1 that behaves as docs/acp.md says (tests/integration/scripted_acp.py)."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.relayproc import Editor, relay_env
from tests.integration.scripted_acp import ScriptedGateway


@pytest.fixture
async def gateway() -> AsyncIterator[ScriptedGateway]:
    async with ScriptedGateway() as server:
        yield server


@pytest.fixture
async def editor(gateway: ScriptedGateway) -> AsyncIterator[Editor]:
    relay = await Editor.start("--url", gateway.url, env=relay_env(gateway.token))
    try:
        yield relay
    finally:
        await relay.kill()


async def test_a_prompt_streams_its_updates_and_its_answer(
    gateway: ScriptedGateway, editor: Editor, tmp_path: Path
) -> None:
    session = await editor.start_session(tmp_path)
    prompt = await editor.request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}
    )
    await gateway.wait_for(lambda: gateway.messages("session/prompt"))
    for text in ("Hello", ", ", "world"):
        await gateway.update(session, text)
    await gateway.finish(session)

    answer = await editor.response(prompt)
    assert answer["result"]["stopReason"] == "end_turn"
    assert editor.updates() == ["Hello", ", ", "world"]
    assert editor.not_json == []
    sent = gateway.messages("session/prompt")[0]
    assert sent["params"]["prompt"] == [{"type": "text", "text": "hi"}]
    assert sent["params"]["_meta"]["agentGateway"]["promptId"]


async def test_a_dropped_connection_mid_turn_loses_and_doubles_nothing(
    gateway: ScriptedGateway, editor: Editor, tmp_path: Path
) -> None:
    session = await editor.start_session(tmp_path)
    prompt = await editor.request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    )
    await gateway.wait_for(lambda: gateway.messages("session/prompt"))
    await gateway.update(session, "one ")
    await gateway.update(session, "two ")
    await editor.wait_for(lambda: len(editor.updates()) == 2)
    seen = gateway.sessions[session].seq

    # The network fails; the agent goes on meanwhile.
    gateway.drop()
    gateway.log(session, "three ")
    gateway.log(session, "four ")

    loaded = await gateway.wait_for(lambda: gateway.messages("session/load", conn=2))
    assert loaded[0]["params"]["sessionId"] == session
    assert loaded[0]["params"]["cwd"] == str(tmp_path)
    assert loaded[0]["params"]["_meta"]["agentGateway"]["after"] == seen
    awaited = await gateway.wait_for(lambda: gateway.messages("_agentGateway/awaitTurn"))
    assert awaited[0]["params"] == {"sessionId": session, "turnId": "trn_1"}
    await gateway.update(session, "five")
    await gateway.finish(session)

    answer = await editor.response(prompt)
    assert answer["result"]["stopReason"] == "end_turn"
    assert editor.updates() == ["one ", "two ", "three ", "four ", "five"]
    initialized = gateway.messages("initialize")
    assert [m["params"] for m in initialized] == [{"protocolVersion": 1}] * 2
    # The relay's own initialize is answered to the relay: the editor has one answer to its own.
    assert len([m for m in editor.received if "agentInfo" in m.get("result", {})]) == 1
    await editor.wait_for(lambda: b"reconnected to" in editor.stderr)


async def test_a_prompt_cut_before_any_update_is_awaited_by_the_turn_its_replay_names(
    gateway: ScriptedGateway, editor: Editor, tmp_path: Path
) -> None:
    session = await editor.start_session(tmp_path)
    prompt = await editor.request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    )
    await gateway.wait_for(lambda: gateway.messages("session/prompt"))
    gateway.drop()
    gateway.log(session, "after the drop")

    awaited = await gateway.wait_for(lambda: gateway.messages("_agentGateway/awaitTurn"))
    assert awaited[0]["params"] == {"sessionId": session, "turnId": "trn_1"}
    await gateway.finish(session)

    assert (await editor.response(prompt))["result"]["stopReason"] == "end_turn"
    assert editor.updates() == ["after the drop"]
    # The replay brought the prompt back as a user message: the editor shows it already.
    kinds = [
        m["params"]["update"]["sessionUpdate"]
        for m in editor.received
        if m.get("method") == "session/update"
    ]
    assert kinds == ["agent_message_chunk"]
    assert len(gateway.messages("session/prompt")) == 1


async def test_a_prompt_lost_on_the_way_is_sent_again_under_its_prompt_id(
    gateway: ScriptedGateway, editor: Editor, tmp_path: Path
) -> None:
    session = await editor.start_session(tmp_path)
    gateway.losing.add("session/prompt")
    prompt = await editor.request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    )

    resent = await gateway.wait_for(lambda: gateway.messages("session/prompt"))
    assert resent[0]["params"]["_meta"]["agentGateway"]["promptId"]
    assert gateway.messages("session/load", conn=2)
    await gateway.update(session, "started now")
    await gateway.finish(session)

    assert (await editor.response(prompt))["result"]["stopReason"] == "end_turn"
    assert editor.updates() == ["started now"]
    assert len(gateway.sessions[session].turns) == 1


async def test_a_permission_asked_again_after_a_reconnect_is_shown_once(
    gateway: ScriptedGateway, editor: Editor, tmp_path: Path
) -> None:
    session = await editor.start_session(tmp_path)
    prompt = await editor.request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "test"}]}
    )
    await gateway.wait_for(lambda: gateway.messages("session/prompt"))
    await gateway.update(session, "running the tests")
    await gateway.ask(session, "apr_1")
    asked = await editor.wait_for(editor.asked)

    gateway.drop()
    second = await gateway.connection(2)
    await gateway.wait_for(lambda: second.asked)
    # Anything the gateway sends after asking again reaches the editor after the second ask.
    await gateway.update(session, "still waiting")
    await editor.wait_for(lambda: editor.updates()[-1:] == ["still waiting"])
    assert len(editor.asked()) == 1
    assert asked[0]["params"]["_meta"]["agentGateway"]["approvalId"] == "apr_1"

    outcome = {"outcome": "selected", "optionId": "allow_once"}
    await editor.send({"id": asked[0]["id"], "result": {"outcome": outcome}})
    await gateway.wait_for(lambda: gateway.sessions[session].outcomes)
    assert gateway.sessions[session].outcomes == {"apr_1": outcome}
    assert second.asked == {}
    await gateway.finish(session)
    assert (await editor.response(prompt))["result"]["stopReason"] == "end_turn"


async def test_an_answer_given_while_disconnected_reaches_the_gateway_when_it_asks_again(
    gateway: ScriptedGateway, editor: Editor, tmp_path: Path
) -> None:
    session = await editor.start_session(tmp_path)
    await editor.request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "test"}]}
    )
    await gateway.wait_for(lambda: gateway.messages("session/prompt"))
    await gateway.ask(session, "apr_7")
    asked = await editor.wait_for(editor.asked)

    gateway.refuse(503)
    gateway.drop()
    await gateway.wait_for(lambda: gateway.refused)
    outcome = {"outcome": "selected", "optionId": "reject_once"}
    await editor.send({"id": asked[0]["id"], "result": {"outcome": outcome}})
    gateway.refuse(None)

    await gateway.wait_for(lambda: gateway.sessions[session].outcomes)
    assert gateway.sessions[session].outcomes == {"apr_7": outcome}
    assert len(editor.asked()) == 1


async def test_a_cancel_sent_while_disconnected_is_delivered_after_the_reconnect(
    gateway: ScriptedGateway, editor: Editor, tmp_path: Path
) -> None:
    session = await editor.start_session(tmp_path)
    prompt = await editor.request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "long"}]}
    )
    await gateway.wait_for(lambda: gateway.messages("session/prompt"))
    await gateway.update(session, "working")
    await editor.wait_for(editor.updates)

    gateway.refuse(503)
    gateway.drop()
    await gateway.wait_for(lambda: gateway.refused)
    await editor.send({"method": "session/cancel", "params": {"sessionId": session}})
    gateway.refuse(None)

    answer = await editor.response(prompt)
    assert answer["result"]["stopReason"] == "cancelled"
    on_second = [m.get("method") for n, m in gateway.received if n == 2]
    assert on_second.index("session/load") < on_second.index("session/cancel")


async def test_other_requests_cut_by_a_drop_are_answered_with_an_error(
    gateway: ScriptedGateway, editor: Editor, tmp_path: Path
) -> None:
    session = await editor.start_session(tmp_path)
    gateway.refuse(503)
    gateway.losing.add("session/set_mode")
    mode = await editor.request("session/set_mode", {"sessionId": session, "modeId": "ask"})

    answer = await editor.response(mode)
    assert answer["error"]["code"] == -32603
    assert "connection to the gateway was lost" in answer["error"]["message"]
    gateway.refuse(None)
    again = await editor.call("session/list", {})
    assert again["error"]["code"] == -32601  # answered by the gateway on the new connection


async def test_a_malformed_line_goes_to_the_gateway_which_answers_it(
    gateway: ScriptedGateway, editor: Editor
) -> None:
    await editor.call("initialize", {"protocolVersion": 1})
    await editor.write("{this is not json")
    error = await editor.wait_for(lambda: [m for m in editor.received if "error" in m])
    assert error[0]["error"]["code"] == -32700


async def test_the_end_of_stdin_closes_the_websocket_cleanly_and_exits_0(
    gateway: ScriptedGateway, editor: Editor, tmp_path: Path
) -> None:
    await editor.start_session(tmp_path)
    await editor.close_stdin()

    assert await editor.exit_status() == 0
    conn = await gateway.wait_for(lambda: gateway.connections[0].closed and gateway.connections[0])
    assert conn.close_code == 1000
    assert len(gateway.connections) == 1


async def test_sigterm_closes_the_websocket_cleanly_and_exits_0(
    gateway: ScriptedGateway, editor: Editor, tmp_path: Path
) -> None:
    await editor.start_session(tmp_path)
    editor.process.send_signal(signal.SIGTERM)

    assert await editor.exit_status() == 0
    conn = await gateway.wait_for(lambda: gateway.connections[0].closed and gateway.connections[0])
    assert conn.close_code == 1000


async def test_a_refused_key_answers_the_editor_and_exits_2(gateway: ScriptedGateway) -> None:
    relay = await Editor.start("--url", gateway.url, env=relay_env("not-the-key"))
    try:
        answer = await relay.call("initialize", {"protocolVersion": 1})
        assert answer["error"]["code"] == -32000
        assert "refused the key (HTTP 401)" in answer["error"]["message"]
        assert await relay.exit_status() == 2
        assert b"AGENT_GATEWAY_TOKEN" in relay.stderr
    finally:
        await relay.kill()


async def test_a_key_refused_on_reconnecting_fails_the_waiting_prompt_and_exits_2(
    gateway: ScriptedGateway, editor: Editor, tmp_path: Path
) -> None:
    session = await editor.start_session(tmp_path)
    prompt = await editor.request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    )
    await gateway.wait_for(lambda: gateway.messages("session/prompt"))
    gateway.refuse(401)
    gateway.drop()

    answer = await editor.response(prompt)
    assert answer["error"]["code"] == -32000
    assert await editor.exit_status() == 2


async def test_an_unreachable_gateway_answers_the_editor_and_exits_1(
    gateway: ScriptedGateway,
) -> None:
    gateway.refuse(503)
    relay = await Editor.start("--url", gateway.url, env=relay_env(gateway.token))
    try:
        answer = await relay.call("initialize", {"protocolVersion": 1})
        assert answer["error"]["code"] == -32603
        assert "cannot reach the gateway" in answer["error"]["message"]
        assert await relay.exit_status() == 1
        assert gateway.refused == 4
    finally:
        await relay.kill()


async def test_agent_gateway_acp_is_the_same_relay(gateway: ScriptedGateway) -> None:
    relay = await Editor.start(
        "acp", "--url", gateway.url, env=relay_env(gateway.token), module="app"
    )
    try:
        answer = await relay.call("initialize", {"protocolVersion": 1})
        assert answer["result"]["agentInfo"]["name"] == "scripted-gateway"
        await relay.close_stdin()
        assert await relay.exit_status() == 0
    finally:
        await relay.kill()
