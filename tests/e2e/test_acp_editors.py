"""Editors end to end: ACP clients drive the real agents through the gateway's ``/v1/acp``.

Each test runs against a gateway whose one provider is Claude Code, Codex or the Claude Agent
ACP adapter (an ACP agent behind the gateway), every CLI pointed at the stub model:

- ``acpx``, a third-party headless ACP client, with the gateway's relay
  ``agent-gateway-acp`` as its agent command, as an editor is set up: acpx starts the relay
  as a child process and speaks ACP on its stdio. A session is created (``session/new``),
  reopened by acpx's queue owner for its prompts (``initialize``, ``session/resume``),
  prompted, asked a permission it allows, shown a plan, cancelled while it streams, and
  closed; nothing of acpx stays running. Once more with the relay's connection cut mid-turn:
  the relay reconnects and acpx sees the turn end and every update once.
- the ACP Python SDK's client on the WebSocket itself (tests/acpclients.py): a plan, a turn
  cut while it streams and one cut while its permission request is shown, each session
  loaded again after the last update seen (every update once, as the event log over REST
  has it; the permission asked again and allowed), then the whole history replayed; and the
  agent's question answered as a form (elicitation).
- the relay under an editor of its stdio: a permission answered while the relay reconnects
  reaches the gateway, which asks it again after the cut.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import text_block

from tests.acpclients import Editor, connected
from tests.e2e.acp_editors import Acpx, CutProxy, EditorGateways, editor_gateways, require_acpx
from tests.e2e.cli_harness import stored_events
from tests.gateway import TOKEN
from tests.integration.relayproc import Editor as RelayEditor
from tests.integration.relayproc import relay_env

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

PROVIDERS = ["claude_code", "codex", "acp:claude"]
"""The agents behind the gateway: the two native CLIs and one ACP agent (the Claude
adapter: the fastest ACP agent of the suite to start, and it asks questions as forms)."""
COMMAND = "[[tool:bash touch made.txt && echo done]]"
"""The stub model runs one shell command: a permission the editor is asked for."""
STEPS = [("Read the code", "completed"), ("Fix the bug", "in_progress"), ("Ship it", "pending")]
TODOS = [{"content": text, "status": status, "activeForm": text} for text, status in STEPS]
PLANS = {
    "claude_code": "[[call:TodoWrite " + json.dumps({"todos": TODOS}) + "]]",
    "acp:claude": "[[call:TodoWrite " + json.dumps({"todos": TODOS}) + "]]",
    "codex": "[[call:update_plan "
    + json.dumps({"plan": [{"step": text, "status": status} for text, status in STEPS]})
    + "]]",
}
"""A plan through each agent's own tool (Claude Code's TodoWrite, Codex's update_plan)."""
COLOR = {
    "question": "Which color?",
    "header": "Color",
    "multiSelect": False,
    "options": [
        {"label": "Red", "description": "warm"},
        {"label": "Blue", "description": "cool"},
    ],
}
ASK = "[[call:AskUserQuestion " + json.dumps({"questions": [COLOR]}) + "]]"
TURN_S = 60.0
"""How long a turn of the stub may take, at most."""
UPDATING = {
    "message.delta",
    "reasoning.delta",
    "tool.started",
    "tool.output",
    "tool.completed",
    "plan.updated",
    "usage",
    "retry.scheduled",
    "provider.switched",
    "warning",
}
"""The events of a turn that become ``session/update``\\ s (docs/acp.md) when they carry
something to show; the server answers the rest (approvals, questions, the turn's end)."""


@pytest.fixture(scope="module")
def gateways(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EditorGateways]:
    require_acpx()
    with editor_gateways(tmp_path_factory.mktemp("editors")) as state:
        yield state


@pytest.fixture
def make_acpx(tmp_path: Path) -> Iterator[Callable[[str, Path], Acpx]]:
    """acpx with a home of its own per call; at the end, nothing of it may be left running."""
    made: list[Acpx] = []

    def make(gateway_url: str, cwd: Path) -> Acpx:
        home = tmp_path / f"acpx-{len(made)}"
        home.mkdir()
        acpx = Acpx(
            home=home, cwd=cwd, gateway_url=gateway_url, relay_log=tmp_path / f"relay-{len(made)}"
        )
        made.append(acpx)
        return acpx

    yield make
    left: dict[int, str] = {}
    for acpx in made:
        left.update(acpx.stop_all())
    assert not left, f"acpx left these running (now killed): {left}"


def _turn_updates(editor: Editor, turn_id: str) -> list[Any]:
    return [u for _, u in editor.updates if u.field_meta and _meta(u).get("turnId") == turn_id]


def _seqs(updates: list[Any]) -> list[int]:
    return [_meta(u)["seq"] for u in updates]


def _text(updates: list[Any]) -> str:
    return "".join(u.content.text for u in updates if u.session_update == "agent_message_chunk")


def _updating(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events that have an update to show (a delta with text, any other kind)."""
    return [
        e
        for e in events
        if e["type"] in UPDATING and (not e["type"].endswith(".delta") or e["data"]["text"])
    ]


def _streamed(events: list[dict[str, Any]], turn_id: str) -> str:
    return "".join(
        e["data"]["text"]
        for e in events
        if e["type"] == "message.delta" and e["turn_id"] == turn_id
    )


def _plan_of(events: list[dict[str, Any]], turn_id: str) -> list[dict[str, Any]]:
    """The turn's plan as the gateway published it, in ACP's words."""
    (published,) = [e for e in events if e["type"] == "plan.updated" and e["turn_id"] == turn_id]
    return [
        {"content": entry["text"], "priority": "medium", "status": entry["status"]}
        for entry in published["data"]["entries"]
    ]


# --- acpx, through the relay ------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_acpx_runs_a_session_through_the_relay(
    gateways: EditorGateways, make_acpx: Callable[[str, Path], Acpx], provider: str
) -> None:
    """One session through acpx and the relay, from its creation to its close."""
    gateway = gateways.gateway(provider)
    workspace = gateways.workspace()
    acpx = make_acpx(gateway.base_url, workspace)
    with gateway.client() as client:
        # initialize and session/new (acpx prints only its result here).
        created = acpx.run("sessions", "new")
        sid = created.action("session_ensured")["acpxSessionId"]
        session = client.get(f"/v1/sessions/{sid}").json()
        assert (session["provider"], session["workspace"]) == (provider, str(workspace))

        # Each prompt is a new acpx process; its queue owner starts the relay once,
        # initializes and reopens the session there (acpx prefers session/resume to load).
        ran = acpx.run("prompt", COMMAND)
        (initialize,) = ran.requests("initialize")
        offered = ran.answer_to(initialize)["result"]
        assert offered["agentInfo"]["name"] == "agent-gateway"
        assert offered["agentCapabilities"]["loadSession"] is True
        (resumed,) = ran.requests("session/resume")
        assert resumed["params"]["sessionId"] == sid
        assert "error" not in ran.answer_to(resumed)
        (asked,) = ran.requests("session/request_permission")
        tool_call = asked["params"]["toolCall"]
        assert tool_call["kind"] == "execute"
        assert "touch made.txt" in json.dumps(tool_call["rawInput"])
        answer = ran.answer_to(asked)["result"]["outcome"]
        assert answer == {"outcome": "selected", "optionId": "allow"}
        finished = [u for u in ran.updates("tool_call_update") if u["status"] == "completed"]
        assert [u["toolCallId"] for u in finished] == [tool_call["toolCallId"]]
        assert (workspace / "made.txt").exists()
        assert "Tool said:" in ran.text()
        assert "done" in ran.text()
        assert ran.stop_reason() == "end_turn"
        (approval,) = client.get(f"/v1/sessions/{sid}/approvals").json()["approvals"]
        assert approval["id"] == asked["params"]["_meta"]["agentGateway"]["approvalId"]
        assert approval["decision"] == "allow"

        planned = acpx.run("prompt", PLANS[provider])
        assert planned.stop_reason() == "end_turn"
        (plan,) = planned.updates("plan")
        turn_id = plan["_meta"]["agentGateway"]["turnId"]
        assert plan["entries"] == _plan_of(stored_events(client, sid), turn_id)
        first = {"content": "Read the code", "priority": "medium", "status": "completed"}
        assert plan["entries"][0] == first

        # Streamed: text arrives while the turn runs; `acpx cancel` sends session/cancel.
        running = acpx.start("prompt", "[[slow:30]]")
        running.wait_for(lambda seen: "tick 2 " in seen.text())
        cancel = acpx.run("cancel")
        assert cancel.action("cancel_result")["cancelled"] is True
        cancelled = running.finish()
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.requests("session/cancel")
        assert cancelled.stop_reason() == "cancelled"
        turns = client.get(f"/v1/sessions/{sid}/turns").json()["turns"]
        assert [t["status"] for t in turns] == ["interrupted", "completed", "completed"]

        closed = acpx.run("sessions", "close")
        assert closed.action("session_closed")["acpxSessionId"] == sid
        assert client.get(f"/v1/sessions/{sid}").json()["status"] == "closed"


def test_acpx_sees_a_turn_end_once_after_the_relay_reconnects(
    gateways: EditorGateways, make_acpx: Callable[[str, Path], Acpx]
) -> None:
    """The relay's connection is cut mid-turn: it reconnects, reloads the session after the
    last update it relayed, and answers acpx's prompt when the turn ends; acpx sees every
    update of the turn once."""
    gateway = gateways.gateway("claude_code")
    proxy = CutProxy(gateway.port)
    acpx = make_acpx(proxy.url, gateways.workspace())
    try:
        sid = acpx.run("sessions", "new").action("session_ensured")["acpxSessionId"]
        running = acpx.start("prompt", "[[slow:3]]")
        running.wait_for(lambda seen: "tick 3 " in seen.text())
        proxy.cut()
        done = running.finish()
        assert done.returncode == 0, done.stderr
        assert done.stop_reason() == "end_turn"
        acpx.run("sessions", "close")
    finally:
        proxy.close()
    with gateway.client() as client:
        events = stored_events(client, sid)
    seqs = [u["_meta"]["agentGateway"]["seq"] for u in done.updates()]
    turn_id = done.updates("agent_message_chunk")[0]["_meta"]["agentGateway"]["turnId"]
    expected = [e["seq"] for e in _updating(events) if e["turn_id"] == turn_id]
    assert seqs == expected
    assert done.text() == _streamed(events, turn_id)
    relayed = acpx.relay_log.read_text()
    assert "reconnected to" in relayed, relayed[-3000:]


# --- the ACP Python SDK's client, on the WebSocket ---------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_sdk_client_loses_and_doubles_nothing_across_cuts(
    gateways: EditorGateways, provider: str
) -> None:
    """One session over four connections. The first shows a plan, then is cut while a turn
    streams; the second loads the session after the last update it saw, sees the turn end,
    then is cut while it shows a permission request; the third loads it, is asked the same
    permission again and allows it. Every update of each cut turn arrives once across the
    connections, as the event log has it; the fourth loads the whole history."""
    gateway = gateways.gateway(provider)
    workspace = gateways.workspace()
    proxy = CutProxy(gateway.port)
    first, second, third = Editor(), Editor(hold=True), Editor()
    try:
        async with connected(gateway, first, via=proxy.ws_url) as connection:
            created = await connection.new_session(cwd=str(workspace), mcp_servers=[])
            sid = created.session_id
            planned = await connection.prompt(session_id=sid, prompt=[text_block(PLANS[provider])])
            assert planned.stop_reason == "end_turn"
            plan_id = _turn_of(planned)
            (plan,) = [u for u in _turn_updates(first, plan_id) if u.session_update == "plan"]

            streaming = asyncio.ensure_future(
                connection.prompt(session_id=sid, prompt=[text_block("[[slow:3]]")])
            )
            await first.wait_for(lambda: "tick 3 " in first.texts())
            proxy.cut()
            (cut_off,) = await asyncio.gather(streaming, return_exceptions=True)
            assert isinstance(cut_off, ConnectionError), cut_off
        (slow_id,) = {_meta(u)["turnId"] for _, u in first.updates[-3:]}

        async with connected(gateway, second, via=proxy.ws_url) as connection:
            await _load(connection, sid, workspace, after=first.seqs()[-1])
            ended = await _await_turn(connection, sid, slow_id)
            assert ended["stopReason"] == "end_turn"
            asking = asyncio.ensure_future(
                connection.prompt(session_id=sid, prompt=[text_block(COMMAND)])
            )
            await second.wait_for(lambda: second.permissions)
            proxy.cut()
            (cut_off,) = await asyncio.gather(asking, return_exceptions=True)
            assert isinstance(cut_off, ConnectionError), cut_off
    finally:
        proxy.close()
    (shown,) = second.permissions
    command_id = shown.meta["agentGateway"]["turnId"]

    async with connected(gateway, third) as connection:
        await _load(connection, sid, workspace, after=second.seqs()[-1])
        ended = await _await_turn(connection, sid, command_id)
    (asked,) = third.permissions
    assert asked.meta["agentGateway"] == shown.meta["agentGateway"]  # the same approval
    assert asked.tool_call.tool_call_id == shown.tool_call.tool_call_id
    assert asked.tool_call.kind == "execute"
    assert ended["stopReason"] == "end_turn"
    assert (workspace / "made.txt").exists()
    assert "Tool said:" in _text(_turn_updates(third, command_id))

    with gateway.client() as client:
        events = stored_events(client, sid)
    assert _dump(plan)["entries"] == _plan_of(events, plan_id)
    for turn_id, before, after in (
        (slow_id, first, second),
        (command_id, second, third),
    ):
        updates = [*_turn_updates(before, turn_id), *_turn_updates(after, turn_id)]
        expected = [e["seq"] for e in _updating(events) if e["turn_id"] == turn_id]
        assert _seqs(updates) == expected, turn_id
        assert _text(updates) == _streamed(events, turn_id)

    # The whole history on a new connection: every update once, in order, with the prompts.
    fourth = Editor()
    async with connected(gateway, fourth) as connection:
        await _load(connection, sid, workspace)
    replayed = [u for _, u in fourth.updates]
    prompts = [e for e in events if e["type"] == "turn.started"]
    assert [u.content.text for u in replayed if u.session_update == "user_message_chunk"] == [
        e["data"]["prompt"] for e in prompts
    ]
    assert _seqs(replayed) == sorted(e["seq"] for e in [*prompts, *_updating(events)])
    for turn_id in (plan_id, slow_id, command_id):
        assert _text(_turn_updates(fourth, turn_id)) == _streamed(events, turn_id)


@pytest.mark.parametrize("provider", ["claude_code", "acp:claude"])
async def test_sdk_client_answers_the_agents_question_as_a_form(
    gateways: EditorGateways, provider: str
) -> None:
    """Claude Code's AskUserQuestion (called by the stub model) reaches the editor as an
    ``elicitation/create`` form; its answer reaches the model. Through the ACP adapter the
    question travels as a form twice: adapter → gateway, gateway → editor."""
    gateway = gateways.gateway(provider)
    editor = Editor(form_answers={"question_0": "Blue"})
    async with connected(gateway, editor, forms=True) as connection:
        created = await connection.new_session(cwd=str(gateways.workspace()), mcp_servers=[])
        sid = created.session_id
        answered = await connection.prompt(session_id=sid, prompt=[text_block(ASK)])
    ((message, mode, meta),) = editor.forms
    assert message == "Which color?"
    assert set(mode.requested_schema.properties) == {"question_0", "question_0_custom"}
    assert answered.stop_reason == "end_turn"
    assert '"Which color?"="Blue"' in editor.texts(), editor.texts()
    with gateway.client() as client:
        (question,) = client.get(f"/v1/sessions/{sid}/questions").json()["questions"]
    assert question["id"] == meta["agentGateway"]["questionId"]
    assert question["status"] == "answered"
    assert question["answers"] == [{"selected": ["Blue"], "text": None}]


# --- the relay, as an editor starts it -------------------------------------------------------


async def test_relay_carries_a_permission_answered_across_a_cut(gateways: EditorGateways) -> None:
    """An editor on the relay's stdio shows a permission request; the relay's connection is
    cut and the editor answers while the relay reconnects. The gateway asks the permission
    again on the new connection, the relay gives it the editor's answer (the editor is asked
    once), and the prompt ends as it would have."""
    gateway = gateways.gateway("claude_code")
    workspace = gateways.workspace()
    proxy = CutProxy(gateway.port)
    editor = await RelayEditor.start("--url", proxy.url, env=relay_env(TOKEN))
    try:
        sid = await editor.start_session(workspace)
        prompt = [{"type": "text", "text": COMMAND}]
        prompting = await editor.request("session/prompt", {"sessionId": sid, "prompt": prompt})
        (asked,) = await editor.wait_for(editor.asked)
        proxy.cut()
        allow = {"outcome": {"outcome": "selected", "optionId": "allow"}}
        await editor.send({"id": asked["id"], "result": allow})
        answered = await editor.response(prompting)
        assert answered["result"]["stopReason"] == "end_turn", answered
        assert len(editor.asked()) == 1
        await editor.close_stdin()
        assert await editor.exit_status() == 0
    finally:
        await editor.kill()
        proxy.close()
    assert "reconnected to" in editor.stderr.decode()
    assert (workspace / "made.txt").exists()
    with gateway.client() as client:
        (approval,) = client.get(f"/v1/sessions/{sid}/approvals").json()["approvals"]
    assert approval["id"] == asked["params"]["_meta"]["agentGateway"]["approvalId"]
    assert approval["decision"] == "allow"


def _turn_of(answer: Any) -> str:
    return str(answer.field_meta["agentGateway"]["turnId"])


def _meta(update: Any) -> dict[str, Any]:
    meta: dict[str, Any] = update.field_meta["agentGateway"]
    return meta


def _dump(update: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = update.model_dump(mode="json", exclude_none=True)
    return dumped


async def _await_turn(connection: Any, sid: str, turn_id: str) -> dict[str, Any]:
    """The turn's stop reason, as a client whose prompt was cut asks for it."""
    async with asyncio.timeout(TURN_S):
        ended: dict[str, Any] = await connection.ext_method(
            "agentGateway/awaitTurn", {"sessionId": sid, "turnId": turn_id}
        )
    return ended


async def _load(connection: Any, sid: str, workspace: Path, *, after: int | None = None) -> None:
    meta = {} if after is None else {"agentGateway": {"after": after}}
    await connection.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[], **meta)
