"""Routing by measurement with the real CLIs: ``lowest_latency`` learns which provider is faster.

Claude Code and Codex both answer from the stub; the stub holds back the first byte of every
OpenAI Responses answer (Codex's API) by ``CODEX_DELAY_S``, so Codex's time to first text is
at least that, while Claude Code's, a new process per session included, is well under it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import GatewayFactory
from tests.e2e.providers import claude_code
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e

CODEX_DELAY_S = 3.0
MIN_TURNS = 1


def run(client: httpx.Client, workspace: Path) -> dict[str, Any]:
    body = {
        "prompt": "Say hello",
        "workspace": str(workspace),
        "strategy": "lowest_latency",
        "retry": {"enabled": False},
    }
    response = client.post("/v1/runs", json=body, timeout=120)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    assert result["status"] == "completed", result
    assert result["final_text"] == "Hello from stub."
    assert result["switches"] == []
    return result


def selected(client: httpx.Client, session_id: str) -> dict[str, Any]:
    events = client.get(f"/v1/sessions/{session_id}/events").json()["events"]
    event: dict[str, Any] = next(e for e in events if e["type"] == "session.provider_selected")
    return event


def test_lowest_latency_tries_each_provider_then_keeps_to_the_faster_one(
    make_gateway: GatewayFactory, stub: StubLLM, workspace: Path, tmp_path: Path
) -> None:
    stub.delays["openai"] = CODEX_DELAY_S
    gateway = make_gateway(
        "codex",  # first in the selector's order, so only measuring can prefer Claude Code
        claude_code={**claude_code(stub, tmp_path / "home"), "enabled": True},
        selection={"fallback_chain": ["claude_code"], "min_turns": MIN_TURNS},
    ).start()
    with gateway.client() as client:
        # Too few measured turns: each provider is explored, the least tried first.
        explored = [run(client, workspace)["provider"] for _ in range(2 * MIN_TURNS)]
        assert explored == ["codex", "claude_code"] * MIN_TURNS

        figures = {p["name"]: p["figures"] for p in client.get("/v1/providers").json()["providers"]}
        assert figures["codex"]["turns"] == MIN_TURNS
        assert figures["claude_code"]["turns"] == MIN_TURNS
        assert figures["codex"]["first_text_p50_s"] >= CODEX_DELAY_S
        assert figures["claude_code"]["first_text_p50_s"] < figures["codex"]["first_text_p50_s"]
        assert figures["codex"]["failure_rate"] == 0.0
        assert figures["claude_code"]["running"] == 0

        # Both measured: the faster one is chosen, and the choice says why.
        for _ in range(2):
            result = run(client, workspace)
            assert result["provider"] == "claude_code"
            data = selected(client, result["session_id"])["data"]
            assert data["strategy"] == "lowest_latency"
            assert data["reason"] == "fallback"  # its place in the chain, kept as before
            scores = {s["provider"]: s for s in data["scores"]}
            assert [s["provider"] for s in data["scores"]] == ["claude_code", "codex"]
            assert not any(s["exploring"] for s in data["scores"])
            assert scores["claude_code"]["score"] < scores["codex"]["score"]
            assert scores["codex"]["score"] >= CODEX_DELAY_S

        # An explicit provider is never substituted, however slow it measured.
        body = {"workspace": str(workspace), "provider": "codex", "strategy": "lowest_latency"}
        created = client.post("/v1/sessions", json=body)
        assert created.status_code == 201, created.text
        assert created.json()["provider"] == "codex"
        assert created.json()["selection"]["reason"] == "explicit"
