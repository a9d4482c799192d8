"""The Python SDK (clients/python) drives the real Claude Code through a real gateway,
against the stub model: a session created with string enums, a turn streamed, tool calls
allowed and denied from ``run()``'s callback, a slow turn interrupted, and the event stream
carried across a gateway restart mid-turn (each event once, compared with the log)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_gateway_sdk import ApprovalAnswer, Client, ConflictError
from agent_gateway_sdk.events import (
    ApprovalRequestedEvent,
    Event,
    MessageDeltaEvent,
    SessionThreadBoundEvent,
    ToolCompletedEvent,
    TurnCompletedEvent,
    TurnInterruptedEvent,
)

from tests.e2e.conftest import GatewayFactory
from tests.gateway import TOKEN, GatewayProcess
from tests.sdk_restarts import FOLLOW, assert_each_event_once

pytestmark = pytest.mark.e2e


@pytest.fixture
def client(gateway: GatewayProcess) -> Client:
    return Client(gateway.base_url, token=TOKEN)


def test_a_session_streams_its_turns_and_continues_its_thread(
    client: Client, workspace: Path
) -> None:
    with client:
        session = client.sessions.create(
            workspace=workspace, provider="claude_code", approval_mode="ask"
        )
        assert (session.info.provider, session.info.status) == ("claude_code", "idle")
        live: list[Event] = []
        hello = session.run("Say hello", on_event=live.append)
        assert hello.ok, hello.turn
        assert hello.final_text == "Hello from stub."
        assert live == hello.events
        deltas = [e for e in hello.events if isinstance(e, MessageDeltaEvent)]
        assert "".join(e.data.text for e in deltas) == "Hello from stub."
        (bound,) = [e for e in hello.events if isinstance(e, SessionThreadBoundEvent)]
        assert session.refresh().thread_id == bound.data.thread_id

        again = session.run("[[echo]]")
        assert again.final_text is not None
        assert again.final_text.startswith("Echo: ")
        assert int(again.final_text.removeprefix("Echo: ")) > 1  # the same conversation
        assert session.refresh().thread_id == bound.data.thread_id
        assert [t.status for t in session.turns.list()] == ["completed", "completed"]
        assert session.info.usage.turns == 2


def test_tool_calls_are_allowed_and_denied_from_the_approval_callback(
    client: Client, workspace: Path
) -> None:
    asked: list[ApprovalRequestedEvent] = []

    def allow(request: ApprovalRequestedEvent) -> str:
        asked.append(request)
        assert not (workspace / "allowed.txt").exists()  # nothing ran before the answer
        return "allow"

    with client:
        session = client.sessions.create(workspace=workspace, approval_mode="ask")
        allowed = session.run("[[tool:bash touch allowed.txt]]", on_approval=allow)
        assert allowed.ok, allowed.turn
        assert (workspace / "allowed.txt").exists()
        assert allowed.final_text is not None
        assert allowed.final_text.startswith("Tool said:")
        assert len(asked) == 1
        assert "touch allowed.txt" in json.dumps(asked[0].data.input)
        assert {o.decision for o in asked[0].data.options} >= {"allow", "deny"}
        [done] = [e for e in allowed.events if isinstance(e, ToolCompletedEvent)]
        assert done.data.status == "completed"

        denied = session.run(
            "[[tool:bash touch denied.txt]]",
            on_approval=lambda _r: ApprovalAnswer(decision="deny", message="not in this test"),
        )
        assert denied.ok, denied.turn
        [refused] = [e for e in denied.events if isinstance(e, ToolCompletedEvent)]
        assert refused.data.status == "denied"
        assert not (workspace / "denied.txt").exists()
        decisions = [(a.decision, a.message) for a in session.approvals.list()]
        assert decisions == [("deny", "not in this test"), ("allow", None)]


def test_a_slow_turn_is_interrupted_and_the_next_one_runs(client: Client, workspace: Path) -> None:
    with client:
        session = client.sessions.create(workspace=workspace)
        turn = session.turns.start("[[slow:60]]")
        end: Event | None = None
        with session.events(after=0) as stream:
            for event in stream:
                if isinstance(event, MessageDeltaEvent) and event.turn_id == turn.id:
                    with pytest.raises(ConflictError) as busy:
                        session.turns.start("too soon")
                    assert busy.value["turn_id"] == turn.id
                    session.interrupt()
                if event.type in {"turn.completed", "turn.failed", "turn.interrupted"}:
                    end = event
                    break
        assert isinstance(end, TurnInterruptedEvent), end
        assert session.turns.get(turn.id).status == "interrupted"
        after = session.run("Say hello")
        assert after.final_text == "Hello from stub."


@pytest.mark.parametrize(
    ("kind", "kill"), [("sync", True), ("async", False)], ids=["sync-sigkill", "async-sigterm"]
)
def test_the_stream_outlives_a_gateway_restart_mid_turn_with_each_event_once(
    make_gateway: GatewayFactory, workspace: Path, kind: str, kill: bool
) -> None:
    # A short grace: the CLI stops at once on an interrupt; the rest of 10 s is only waited.
    gateway = make_gateway(server={"shutdown_grace_s": 3}).start()
    evidence = FOLLOW[kind](gateway, workspace, slow="[[slow:30]]", then="Say hello", kill=kill)
    assert_each_event_once(evidence)
    deltas = [
        e
        for e in evidence.yielded
        if e.turn_id == evidence.first_turn and e.type == "message.delta"
    ]
    assert deltas, "the restart came mid-turn, after its first text"
    last = evidence.yielded[-1]
    assert isinstance(last, TurnCompletedEvent)
    assert last.data.final_text == "Hello from stub."
