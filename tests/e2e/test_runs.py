"""``POST /v1/runs`` with the real CLIs: fallback along the chain (session failover)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import GatewayFactory
from tests.e2e.providers import claude_code
from tests.gateway import SseReader, free_port
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e


def claude_without_a_model_server(stub: StubLLM, home: Path) -> dict[str, Any]:
    """Claude Code pointed at a loopback port where nothing listens: it fails before output."""
    config = claude_code(stub, home)
    config["env"]["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{free_port()}"
    return {**config, "enabled": True}


@pytest.fixture
def gateway_with_a_broken_first_choice(
    make_gateway: GatewayFactory, stub: StubLLM, tmp_path: Path
) -> Any:
    return make_gateway(
        "codex",
        claude_code=claude_without_a_model_server(stub, tmp_path / "home"),
        selection={"scenarios": {"code_analysis": ["claude_code", "codex"]}},
    ).start()


def test_a_run_falls_back_when_the_scenario_provider_fails_before_output(
    gateway_with_a_broken_first_choice: Any, workspace: Path
) -> None:
    gateway = gateway_with_a_broken_first_choice
    body = {
        "prompt": "Say hello",
        "workspace": str(workspace),
        "scenario": "code_analysis",
        "retry": {"enabled": False},
    }
    with gateway.client() as client:
        response = client.post("/v1/runs", json=body)
        assert response.status_code == 200, response.text
        result = response.json()
        assert result["status"] == "completed"
        assert result["final_text"] == "Hello from stub."
        assert result["provider"] == "codex"
        assert [(s["from_provider"], s["to_provider"]) for s in result["switches"]] == [
            ("claude_code", "codex")
        ]
        assert result["switches"][0]["reason"] == "network"
        events = client.get(
            f"/v1/sessions/{result['session_id']}/events", params={"limit": 1000}
        ).json()["events"]
        kinds = [e["type"] for e in events]
        # One turn that went on with the next provider: it never failed.
        assert kinds.count("turn.started") == 1
        assert "turn.failed" not in kinds
        assert kinds.index("provider.switched") < kinds.index("turn.completed")
        switched = next(e for e in events if e["type"] == "provider.switched")
        # Nothing was said before: the new agent got the prompt as it was.
        assert switched["data"]["handoff"] == {"turns": 0, "chars": len("Say hello")}
        selected = next(e for e in events if e["type"] == "session.provider_selected")
        assert selected["data"]["provider"] == "claude_code"
        assert selected["data"]["reason"] == "scenario"


def test_a_run_streams_its_events_as_sse_and_an_explicit_provider_does_not_fall_back(
    gateway_with_a_broken_first_choice: Any, workspace: Path
) -> None:
    gateway = gateway_with_a_broken_first_choice
    with gateway.client() as client:
        stream = {
            "prompt": "Say hello",
            "workspace": str(workspace),
            "scenario": "code_analysis",
            "retry": {"enabled": False},
        }
        headers = {"Accept": "text/event-stream"}
        with client.stream("POST", "/v1/runs", json=stream, headers=headers) as response:
            assert response.status_code == 200
            envelopes = [message.json() for message in SseReader(response)]
        kinds = [e["type"] for e in envelopes]
        assert kinds[-1] == "turn.completed"
        assert "provider.switched" in kinds
        assert [e["seq"] for e in envelopes] == list(range(1, len(envelopes) + 1))

        explicit = {
            "prompt": "Say hello",
            "workspace": str(workspace),
            "provider": "claude_code",
            "retry": {"enabled": False},
        }
        result = client.post("/v1/runs", json=explicit).json()
        assert result["status"] == "failed"
        assert result["provider"] == "claude_code"
        assert result["switches"] == []
        assert result["error"]["kind"] == "network", json.dumps(result)
