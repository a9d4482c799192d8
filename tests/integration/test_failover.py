"""Failover through the running gateway with the fake CLIs: where the chain ends, what the next
agent is told, and what the turn adds up to (the real CLIs: tests/e2e/test_failover.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.gateway import FakeGateway, fake_gateway_at, fake_server_in
from tests.gateway import SseReader, is_turn_end

SSE = {"Accept": "text/event-stream"}


def gateway_with_codex(base: Path, *, codex_present: bool = True) -> FakeGateway:
    """The fake Claude Code first, the fake Codex next in the chain (or missing)."""
    codex = fake_server_in(base / "bin", "codex") if codex_present else base / "bin" / "nothing"
    return fake_gateway_at(
        base,
        codex={
            "enabled": True,
            "executable": str(codex),
            "env": {"FAKE_CODEX_LOG": str(base / "codex.log")},
        },
        selection={"fallback_chain": ["codex"]},
        retry={"enabled": False},
    ).start()


def turn(client: httpx.Client, session_id: str, prompt: str) -> list[dict[str, Any]]:
    after = client.get(f"/v1/sessions/{session_id}").json()["last_seq"]
    headers = {**SSE, "Last-Event-ID": str(after)}
    with client.stream("GET", f"/v1/sessions/{session_id}/events", headers=headers) as response:
        reader = SseReader(response)
        started = client.post(f"/v1/sessions/{session_id}/turns", json={"prompt": prompt})
        assert started.status_code == 202, started.text
        return reader.until(is_turn_end)


def new_session(client: httpx.Client, gateway: FakeGateway) -> str:
    body = {"workspace": str(gateway.workspace), "fallback": True}
    created = client.post("/v1/sessions", json=body)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def codex_prompts(base: Path) -> list[str]:
    """The text of every ``turn/start`` the fake Codex read."""
    texts = []
    for line in (base / "codex.log").read_text().splitlines():
        message = json.loads(line).get("in") or {}
        if message.get("method") == "turn/start":
            texts += [item.get("text", "") for item in message["params"]["input"]]
    return texts


def test_the_next_agent_is_told_the_conversation_and_the_turn_counts_both_parts(
    tmp_path: Path,
) -> None:
    gateway = gateway_with_codex(tmp_path)
    try:
        with gateway.client() as client:
            sid = new_session(client, gateway)
            assert turn(client, sid, "usage:10:4:0:0.5")[-1]["type"] == "turn.completed"
            events = turn(client, sid, "fail-auth")

            assert events[-1]["type"] == "turn.completed", events[-1]
            assert events[-1]["provider"] == "codex"
            switched = next(e["data"] for e in events if e["type"] == "provider.switched")
            assert (switched["reason"], switched["handoff"]["turns"]) == ("auth", 1)
            [first_prompt] = codex_prompts(tmp_path)
            assert "User: usage:10:4:0:0.5" in first_prompt
            assert "Agent: fake reply" in first_prompt
            assert first_prompt.endswith("User: fail-auth")
            assert len(first_prompt) == switched["handoff"]["chars"]

            # The turn's usage is both agents' attempts together.
            turns = client.get(f"/v1/sessions/{sid}/turns").json()["turns"]
            failed_over = next(t for t in turns if t["prompt"] == "fail-auth")
            reported = [e["data"]["usage"] for e in events if e["type"] == "usage"]
            assert len({e["provider"] for e in events if e["type"] == "usage"}) == 2
            assert failed_over["usage"]["input_tokens"] == sum(u["input_tokens"] for u in reported)
    finally:
        gateway.stop()


def test_when_nobody_is_left_to_take_over_the_failure_stands(tmp_path: Path) -> None:
    gateway = gateway_with_codex(tmp_path, codex_present=False)
    try:
        with gateway.client() as client:
            sid = new_session(client, gateway)
            events = turn(client, sid, "fail-auth")
            assert events[-1]["type"] == "turn.failed"
            assert events[-1]["data"]["error"]["kind"] == "auth"
            assert "provider.switched" not in [e["type"] for e in events]
            assert client.get(f"/v1/sessions/{sid}").json()["provider"] == "claude_code"
    finally:
        gateway.stop()


def test_an_explicit_provider_fails_over_only_when_fallback_is_asked(tmp_path: Path) -> None:
    """Sessions and runs alike: the named provider first; with ``fallback: true`` a
    persistent server error moves the turn along the chain, without it the failure stands."""
    gateway = gateway_with_codex(tmp_path)
    explicit = {"workspace": str(gateway.workspace), "provider": "claude_code"}
    try:
        with gateway.client() as client:
            moving = client.post("/v1/sessions", json={**explicit, "fallback": True}).json()
            staying = client.post("/v1/sessions", json=explicit).json()
            assert (moving["provider"], moving["selection"]["fallback"]) == ("claude_code", True)
            assert staying["selection"]["fallback"] is False

            events = turn(client, moving["id"], "fail-retryable")
            switched = [e["data"] for e in events if e["type"] == "provider.switched"]
            assert [(s["from_provider"], s["to_provider"]) for s in switched] == [
                ("claude_code", "codex")
            ]
            assert events[-1]["type"] == "turn.completed"
            assert client.get(f"/v1/sessions/{moving['id']}").json()["provider"] == "codex"

            events = turn(client, staying["id"], "fail-retryable")
            assert events[-1]["type"] == "turn.failed"
            assert "provider.switched" not in [e["type"] for e in events]

            prompt = {"prompt": "fail-retryable"}
            run = client.post("/v1/runs", json={**explicit, **prompt, "fallback": True}).json()
            assert (run["status"], run["provider"]) == ("completed", "codex")
            assert [(s["from_provider"], s["to_provider"]) for s in run["switches"]] == [
                ("claude_code", "codex")
            ]
            run = client.post("/v1/runs", json={**explicit, **prompt}).json()
            assert (run["status"], run["provider"], run["switches"]) == (
                "failed",
                "claude_code",
                [],
            )
    finally:
        gateway.stop()
