"""Session failover with the real CLIs: a session whose Claude Code fails for good goes on with
Codex, whose first request carries the conversation so far (the hand-off)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import GatewayFactory
from tests.e2e.providers import CONFIGS
from tests.e2e.test_contract import create_session, run_turn, types
from tests.gateway import GatewayProcess
from tests.stub_llm import DEFAULT_TEXT, StubLLM

pytestmark = pytest.mark.e2e

FIRST = "Remember the code word ALPHA-17."
SECOND = "Also remember BRAVO-42."
THIRD = "Which code words did I give you?"


def two_providers(make_gateway: GatewayFactory, stub: StubLLM, tmp_path: Path) -> GatewayProcess:
    """Claude Code first, Codex next in the chain, both against the stub."""
    codex = {**CONFIGS["codex"](stub, tmp_path / "home"), "enabled": True}
    return make_gateway(
        "claude_code",
        codex=codex,
        selection={"fallback_chain": ["codex"]},
        retry={"cli_request_retries": 0, "strategies": {"default": {"delays_s": [0.2]}}},
    ).start()


def test_a_session_whose_agent_fails_for_good_goes_on_with_the_next_and_its_history(
    make_gateway: GatewayFactory, stub: StubLLM, workspace: Path, tmp_path: Path
) -> None:
    gateway = two_providers(make_gateway, stub, tmp_path)
    with gateway.client() as client:
        session = create_session(client, workspace, fallback=True)
        sid = session["id"]
        assert session["selection"]["fallback"] is True
        for prompt in (FIRST, SECOND):
            assert run_turn(client, sid, prompt)[-1]["type"] == "turn.completed"
        claude_thread = client.get(f"/v1/sessions/{sid}").json()["thread_id"]
        stays = create_session(client, workspace)["id"]  # no fallback
        assert run_turn(client, stays, FIRST)[-1]["type"] == "turn.completed"

        stub.down["anthropic"] = 401  # Claude Code's key is revoked: it fails for good
        # A session without fallback stays failed on its provider.
        failed = run_turn(client, stays, THIRD)
        assert failed[-1]["type"] == "turn.failed"
        assert failed[-1]["data"]["error"]["kind"] == "auth"
        assert "provider.switched" not in types(failed)
        assert client.get(f"/v1/sessions/{stays}").json()["provider"] == "claude_code"
        assert not [r for r in stub.model_requests() if r.is_openai]

        before = len(stub.model_requests())
        events = run_turn(client, sid, THIRD)

        kinds = types(events)
        assert "turn.failed" not in kinds, events[-1]
        assert events[-1]["type"] == "turn.completed", events[-1]
        assert events[-1]["provider"] == "codex"
        assert events[-1]["data"]["final_text"] == DEFAULT_TEXT
        switched = [e for e in events if e["type"] == "provider.switched"]
        assert len(switched) == 1
        data: dict[str, Any] = switched[0]["data"]
        assert (data["from_provider"], data["to_provider"], data["reason"]) == (
            "claude_code",
            "codex",
            "auth",
        )
        assert data["handoff"]["turns"] == 2
        # The turn went on: Codex's attempt counts on from Claude Code's.
        assert events[-1]["attempt"] == switched[0]["attempt"] + 1
        assert {e["turn_id"] for e in events} == {events[0]["turn_id"]}

        # Codex's first request carries the earlier prompts and answers, then the request.
        codex_requests = [r for r in stub.model_requests()[before:] if r.is_openai]
        first = json.dumps(codex_requests[0].body)
        for said in (FIRST, SECOND, DEFAULT_TEXT, THIRD):
            assert said in first, said
        assert first.index(FIRST) < first.index(SECOND) < first.index(THIRD)

        moved = client.get(f"/v1/sessions/{sid}").json()
        assert moved["provider"] == "codex"
        assert moved["thread_id"] not in (None, claude_thread)
        turn = client.get(f"/v1/sessions/{sid}/turns").json()["turns"][0]
        assert (turn["provider"], turn["status"]) == ("codex", "completed")

        # Later turns stay on Codex, in its thread.
        later = run_turn(client, sid, "Thanks.")
        assert later[-1]["type"] == "turn.completed"
        assert later[-1]["provider"] == "codex"
        assert "provider.switched" not in types(later)
        assert client.get(f"/v1/sessions/{sid}").json()["thread_id"] == moved["thread_id"]
