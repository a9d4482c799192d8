"""Threat model T19 with a real CLI: a tool that prints the environment shows no secret.

The pinned ``claude`` against the stub model runs ``env`` in Bash (allowed by the client);
its provider ``env`` carries an API key and a token of the operator's. The tool's output, as
streamed, paged and stored, has each of them replaced by ``[redacted]``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import providers
from tests.e2e.conftest import GatewayFactory
from tests.gateway import SseReader, is_turn_end
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e

API_KEY = "sk-e2e-provider-key-0123456789abcdef"
SERVICE_TOKEN = "operator-service-token-fedcba9876543210"


def test_t19_a_real_tool_printing_the_environment_shows_no_secret(
    make_gateway: GatewayFactory, stub: StubLLM, workspace: Path, tmp_path: Path
) -> None:
    env = providers.claude_code(stub, tmp_path / "home")["env"]
    env |= {"ANTHROPIC_API_KEY": API_KEY, "DEPLOY_SERVICE_TOKEN": SERVICE_TOKEN}
    gateway = make_gateway(claude_code={"env": env}).start()
    with gateway.client() as client:
        created = client.post("/v1/sessions", json={"workspace": str(workspace)}).json()
        sid = created["id"]
        headers = {"Accept": "text/event-stream", "Last-Event-ID": str(created["last_seq"])}
        seen: list[dict[str, Any]] = []
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as stream:
            prompt = {"prompt": "[[tool:bash env]]"}
            assert client.post(f"/v1/sessions/{sid}/turns", json=prompt).status_code == 202
            for message in SseReader(stream):
                seen.append(message.json())
                if seen[-1]["type"] == "approval.requested":
                    approval = seen[-1]["data"]["approval_id"]
                    url = f"/v1/sessions/{sid}/approvals/{approval}"
                    assert client.post(url, json={"decision": "allow"}).status_code == 200
                if is_turn_end(seen[-1]):
                    break
        page = client.get(f"/v1/sessions/{sid}/events", params={"limit": 1000}).text
        turns = client.get(f"/v1/sessions/{sid}/turns").text
    assert seen[-1]["type"] == "turn.completed", seen[-1]
    [done] = [e for e in seen if e["type"] == "tool.completed"]
    output = json.dumps(done["data"])
    assert "DEPLOY_SERVICE_TOKEN=[redacted]" in output, output[:3000]  # printed, then masked
    for shown in (json.dumps(seen), page, turns):
        assert API_KEY not in shown
        assert SERVICE_TOKEN not in shown
    stored = b"".join(p.read_bytes() for p in gateway.data_dir.glob("gateway.db*"))
    assert SERVICE_TOKEN.encode() not in stored
    assert API_KEY.encode() not in stored
