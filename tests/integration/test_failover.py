"""Failover through the running gateway with the fake CLIs: where the chain ends, what the next
agent is told, and what the turn adds up to (the real CLIs: tests/e2e/test_failover.py)."""

from __future__ import annotations

import base64
import json
import urllib.parse
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.gateway import FakeGateway, fake_gateway_at, fake_server_in
from tests.gateway import SseReader, is_turn_end, metric, scrape

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


def turn(
    client: httpx.Client, session_id: str, prompt: str, *, limit: int = 10_000
) -> list[dict[str, Any]]:
    after = client.get(f"/v1/sessions/{session_id}").json()["last_seq"]
    headers = {**SSE, "Last-Event-ID": str(after)}
    with client.stream("GET", f"/v1/sessions/{session_id}/events", headers=headers) as response:
        reader = SseReader(response)
        started = client.post(f"/v1/sessions/{session_id}/turns", json={"prompt": prompt})
        assert started.status_code == 202, started.text
        return reader.until(is_turn_end, limit=limit)


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


def test_a_failed_over_turn_counts_its_usage_under_the_model_the_new_agent_runs(
    tmp_path: Path,
) -> None:
    # The session named a model for Claude Code; Codex runs its own (none configured), and
    # that is what the session shows and what the turn's tokens are counted under.
    gateway = gateway_with_codex(tmp_path)
    try:
        with gateway.client() as client:
            body = {"workspace": str(gateway.workspace), "fallback": True, "model": "opus"}
            sid = client.post("/v1/sessions", json=body).json()["id"]
            events = turn(client, sid, "fail-auth")
            assert events[-1]["type"] == "turn.completed", events[-1]
            assert client.get(f"/v1/sessions/{sid}").json()["model"] is None
            samples = scrape(client)
    finally:
        gateway.stop()
    tokens = "agent_gateway_tokens_total"
    assert metric(samples, tokens, provider="codex", model="default", kind="input") > 0
    assert metric(samples, tokens, provider="codex", model="opus", kind="input") == 0


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


PROVIDER_KEY = "sk-ant-api03-Upstream+Key/0123456789=abcdefXYZ"
"""A provider credential with characters base64, percent-encoding and JSON spell their own way."""


def key_forms(key: str) -> list[str]:
    """The key as the fake's ``fail-500-echo`` quotes it, and the longest piece of each
    encoded form that carries only the key's bits."""
    data = key.encode()
    return [
        key,
        base64.b64encode(b"Basic " + data).decode()[8:-4],
        base64.urlsafe_b64encode(b"u:" + data).decode()[3:-4],
        base64.b64encode(b"k:" + data + b"!").decode()[3:-4],
        data.hex(),
        data.hex().upper(),
        urllib.parse.quote(key, safe=""),
    ]


def test_t22_a_key_an_error_quotes_never_reaches_the_next_agent(tmp_path: Path) -> None:
    # The first agent's endpoint answers 500 quoting the key it got, in several encodings; the
    # hand-off to the next agent (another vendor) carries none of them, nor does anything
    # the gateway shows.
    gateway = fake_gateway_at(
        tmp_path,
        claude_code={
            "env": {
                "FAKE_CLAUDE_LOG": str(tmp_path / "spawns.jsonl"),
                "ANTHROPIC_API_KEY": PROVIDER_KEY,
            }
        },
        codex={
            "enabled": True,
            "executable": str(fake_server_in(tmp_path / "bin", "codex")),
            "env": {"FAKE_CODEX_LOG": str(tmp_path / "codex.log")},
        },
        selection={"fallback_chain": ["codex"]},
        retry={"enabled": False},
    ).start()
    try:
        with gateway.client() as client:
            sid = new_session(client, gateway)
            assert turn(client, sid, "hello")[-1]["type"] == "turn.completed"
            events = turn(client, sid, "fail-500-echo")
            page = client.get(f"/v1/sessions/{sid}/events", params={"limit": 1000}).text
    finally:
        gateway.stop()
    switched = next(e["data"] for e in events if e["type"] == "provider.switched")
    assert switched["reason"] == "server_error"
    [handoff] = codex_prompts(tmp_path)
    assert "API Error: 500 upstream refused key [redacted]" in handoff
    for form in key_forms(PROVIDER_KEY):
        assert form not in handoff
        assert form not in page
        assert form not in json.dumps(events)
        assert form not in gateway.log()


def test_the_hand_off_carries_the_newest_turns_of_a_long_session_within_its_bound(
    tmp_path: Path,
) -> None:
    # A turn of 100,000 events early on: the hand-off is read from the log's end, so the
    # turns after it are there, and the oldest (which do not fit in 3,000 characters) not.
    gateway = fake_gateway_at(
        tmp_path,
        codex={
            "enabled": True,
            "executable": str(fake_server_in(tmp_path / "bin", "codex")),
            "env": {"FAKE_CODEX_LOG": str(tmp_path / "codex.log")},
        },
        selection={"fallback_chain": ["codex"]},
        retry={"enabled": False},
        server={"coalesce_deltas_ms": 0},
        sessions={"handoff_max_chars": 3_000},
        # The test reads the 100,000-event turn off SSE: on a loaded machine it may fall
        # behind further than the default lag allowance, which would evict it.
        limits={"subscriber_max_lag_events": 300_000},
    ).start()
    filler = " ".join(["context"] * 80)
    try:
        with gateway.client() as client:
            sid = new_session(client, gateway)
            assert turn(client, sid, f"oldest-turn {filler}")[-1]["type"] == "turn.completed"
            assert turn(client, sid, "deltas:100000", limit=200_000)[-1]["type"] == "turn.completed"
            for n in range(4):
                assert turn(client, sid, f"newer-{n} {filler}")[-1]["type"] == "turn.completed"
            assert client.get(f"/v1/sessions/{sid}").json()["last_seq"] > 100_000
            events = turn(client, sid, "fail-auth")
    finally:
        gateway.stop()
    assert events[-1]["provider"] == "codex"
    [handoff] = codex_prompts(tmp_path)
    assert len(handoff) <= 3_000
    assert "User: newer-3 " in handoff
    assert "User: newer-2 " in handoff
    assert "oldest-turn" not in handoff
    assert "earlier turns are left out for length" in handoff
    assert handoff.endswith("User: fail-auth")
