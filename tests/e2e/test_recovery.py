"""Gateway-level recovery with the real CLIs: a turn whose CLI gives up is retried by the
gateway in the same thread with the continuation prompt, then reported failed exactly once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.settings import RetrySettings
from tests.e2e.conftest import GatewayFactory
from tests.e2e.test_contract import create_session, run_turn, types
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e

CONTINUATION = RetrySettings().continuation_prompt
FAST = {"strategies": {"default": {"delays_s": [0.2, 0.3]}}, "cli_request_retries": 0}


@pytest.mark.parametrize("provider", ["claude_code", "codex"])
def test_a_persistent_failure_is_retried_in_the_same_thread_then_reported_once(
    provider: str, make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    gateway = make_gateway(provider, retry=FAST).start()
    with gateway.client() as client:
        sid = create_session(client, workspace)["id"]
        assert run_turn(client, sid, "Say hello")[-1]["type"] == "turn.completed"
        thread = client.get(f"/v1/sessions/{sid}").json()["thread_id"]
        before = len(stub.model_requests())

        events = run_turn(client, sid, "[[fail:500:100]]")
        kinds = types(events)
        assert kinds.count("turn.failed") == 1
        assert kinds[-1] == "turn.failed", events[-1]
        assert "turn.completed" not in kinds
        waits = [e for e in events if e["type"] == "retry.scheduled"]
        gateway_waits = [e["data"] for e in waits if e["data"]["source"] == "gateway"]
        assert [(w["attempt"], w["delay_s"]) for w in gateway_waits] == [(2, 0.2), (3, 0.3)]
        assert {w["kind"] for w in gateway_waits} == {"server_error"}
        assert events[-1]["attempt"] == 3
        assert events[-1]["data"]["error"]["kind"] == "server_error"

        turn = client.get(f"/v1/sessions/{sid}/turns").json()["turns"][0]
        assert turn["status"] == "failed"
        assert turn["attempts"] == 3
        assert client.get(f"/v1/sessions/{sid}").json()["thread_id"] == thread

        sent = stub.model_requests()[before:]
        # Claude Code merges the new user message into the unanswered one before it.
        continued = [r for r in sent if r.last_user_text.strip().endswith(CONTINUATION)]
        assert len(continued) >= 2, [r.last_user_text for r in sent]
        for request in continued:  # same thread: the earlier conversation goes along
            history = json.dumps(request.body)
            assert "Say hello" in history
            assert "[[fail:500:100]]" in history
