"""The agent's plan, published by the real CLIs through the gateway as ``plan.updated``.

The stub model calls each CLI's own plan tool (Codex's ``update_plan``, Claude Code's
``TodoWrite``) with a known plan; the CLI runs it and the gateway's event stream must carry
that plan, whole, with the unified step statuses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import GatewayFactory
from tests.e2e.test_contract import create_session, run_turn, types
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e

EXPECTED = [
    {"text": "Read the code", "status": "completed"},
    {"text": "Fix the bug", "status": "in_progress"},
    {"text": "Run the tests", "status": "pending"},
]


def call(tool: str, arguments: dict[str, Any]) -> str:
    return f"[[call:{tool} {json.dumps(arguments)}]]"


def plans(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [e["data"]["entries"] for e in events if e["type"] == "plan.updated"]


def test_codex_update_plan_is_published_as_the_sessions_plan(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    plan = [
        {"step": "Read the code", "status": "completed"},
        {"step": "Fix the bug", "status": "in_progress"},
        {"step": "Run the tests", "status": "pending"},
    ]
    gateway = make_gateway("codex").start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        events = run_turn(client, session["id"], call("update_plan", {"plan": plan}))
        assert events[-1]["type"] == "turn.completed", events[-1]
        assert plans(events) == [EXPECTED], types(events)
        # The plan arrives while the turn runs, before the model's answer to the tool result.
        kinds = types(events)
        assert kinds.index("plan.updated") < kinds.index("turn.completed")
        assert "Tool said: Plan updated" in events[-1]["data"]["final_text"]


def test_claude_code_todo_write_is_published_as_the_sessions_plan(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    todos = [
        {"content": "Read the code", "status": "completed", "activeForm": "Reading the code"},
        {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
        {"content": "Run the tests", "status": "pending", "activeForm": "Running the tests"},
    ]
    gateway = make_gateway("claude_code").start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        events = run_turn(client, session["id"], call("TodoWrite", {"todos": todos}))
        assert events[-1]["type"] == "turn.completed", events[-1]
        assert plans(events) == [EXPECTED], types(events)
        # The tool's own events stay, and the plan follows its completion.
        kinds = types(events)
        started = next(e for e in events if e["type"] == "tool.started")
        assert started["data"]["name"] == "TodoWrite"
        assert kinds.index("tool.completed") < kinds.index("plan.updated")
