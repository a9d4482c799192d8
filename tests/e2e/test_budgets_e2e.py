"""A session's budget stops a real Claude Code turn between two model calls.

The stub model answers every request with 12 input and 7 output tokens, and Claude Code
streams each response's usage (``message_start``, then ``message_delta``); a tool call is one
request and the answer to its result a second one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import GatewayFactory
from tests.e2e.test_contract import create_session, run_turn, types

pytestmark = pytest.mark.e2e


def test_a_session_budget_stops_a_claude_turn_at_the_model_response_that_reaches_it(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway("claude_code").start()
    with gateway.client() as client:
        session = create_session(client, workspace, budget={"max_tokens": 15})
        # Without the budget the turn would wait for the tool's approval (nobody answers).
        events = run_turn(client, session["id"], "[[tool:bash touch budget.txt]]")

        [reached] = [e for e in events if e["type"] == "budget.reached"]
        assert reached["data"]["budget"] == "session"
        assert reached["data"]["measure"] == "tokens"
        assert reached["data"]["used"] == 19  # the first response: 12 in, 7 out
        ended = events[-1]
        assert ended["type"] == "turn.failed", types(events)
        assert ended["data"]["error"]["kind"] == "budget_exceeded"
        assert ended["data"]["error"]["reason"] == "session"
        assert events.index(reached) < events.index(ended)
        assert "tool.completed" not in types(events) or all(
            e["data"]["status"] != "completed" for e in events if e["type"] == "tool.completed"
        )
        assert not (workspace / "budget.txt").exists()

        [turn] = client.get(f"/v1/sessions/{session['id']}/turns").json()["turns"]
        assert turn["status"] == "failed"
        assert turn["usage"]["input_tokens"] + turn["usage"]["output_tokens"] >= 19
        budget = client.get(f"/v1/sessions/{session['id']}").json()["budget"]
        assert (budget["reached"], budget["left"]["tokens"]) == (True, 0)
        refused = client.post(f"/v1/sessions/{session['id']}/turns", json={"prompt": "hi"})
        assert refused.status_code == 402, refused.text
        assert refused.json()["type"] == "urn:agent-gateway:problem:budget_exceeded"
