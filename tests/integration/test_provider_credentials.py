"""A provider whose CLI has no credential needs a login: ``GET /v1/providers`` and ``/readyz``
say so with the fix, selection passes it over for the next of the chain, and a login counts
at once. Real gateway processes; ``claude`` is the fake (it answers ``--version``), ``codex``
the fake app-server with a key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.gateway import (
    FakeGateway,
    FakeGatewayFactory,
    fake_server_in,
    without_credentials,
)
from tests.integration.callers import assert_problem


def providers(gateway: FakeGateway) -> dict[str, dict[str, Any]]:
    with gateway.client() as client:
        listed = client.get("/v1/providers").json()["providers"]
    return {p["name"]: p for p in listed}


def test_a_provider_without_credentials_needs_login_and_selection_moves_on_to_the_next(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    config_dir = tmp_path / "empty" / ".claude"
    gateway = make_fake_gateway(
        claude_code=without_credentials("claude_code", tmp_path / "empty"),
        codex={
            "enabled": True,
            "executable": str(fake_server_in(tmp_path / "bin", "codex")),
            "env": {"FAKE_CODEX_LOG": str(tmp_path / "codex.log")},
        },
        selection={"default": "claude_code", "fallback_chain": ["codex"]},
    ).start()
    listed = providers(gateway)
    claude, codex = listed["claude_code"], listed["codex"]
    assert claude["health"]["status"] == "needs_login"
    assert claude["health"]["available"] is False
    reason = claude["health"]["reason"]
    assert reason.startswith("no credential found")
    assert "`claude auth login`" in reason
    assert "providers.claude_code.env.ANTHROPIC_API_KEY" in reason
    assert str(config_dir / ".credentials.json") in reason  # where it looked
    assert claude["installed_version"] is not None  # the CLI itself runs
    assert (codex["health"]["status"], codex["health"]["available"]) == ("available", True)
    assert codex["health"]["reason"] is None
    assert listed["opencode"]["health"]["status"] == "unavailable"  # disabled

    with gateway.client() as client:
        ready = client.get("/readyz")
        assert ready.status_code == 200, ready.text  # the fallback serves
        assert ready.json()["checks"]["provider:claude_code"] == f"needs_login: {reason}"
        assert ready.json()["checks"]["provider:codex"] == "ok"

        body = {"workspace": str(gateway.workspace)}
        chosen = client.post("/v1/sessions", json=body)
        assert chosen.status_code == 201, chosen.text
        session = chosen.json()
        assert session["provider"] == "codex"
        assert session["selection"]["reason"] == "fallback"
        [skipped] = session["selection"]["skipped"]
        assert skipped == {"provider": "claude_code", "reason": reason}

        explicit = client.post("/v1/sessions", json={**body, "provider": "claude_code"})
        problem = assert_problem(explicit, 503)
        assert problem["candidates"] == [{"provider": "claude_code", "reason": reason}]

        # A login counts at once: no fresh probe, no restart.
        login = config_dir / ".credentials.json"
        login.write_text(json.dumps({"claudeAiOauth": {"accessToken": "fake"}}))
        health = client.get("/v1/providers/claude_code").json()["health"]
        assert (health["status"], health["available"], health["reason"]) == (
            "available",
            True,
            None,
        )
        after = client.post("/v1/sessions", json=body)
        assert after.status_code == 201, after.text
        assert after.json()["provider"] == "claude_code"
        assert after.json()["selection"]["reason"] == "default"

        # And a login that goes away counts at once too.
        login.unlink()
        assert client.get("/v1/providers/claude_code").json()["health"]["status"] == ("needs_login")


def test_a_default_that_needs_login_and_no_fallback_is_not_ready(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    gateway = make_fake_gateway(
        claude_code=without_credentials("claude_code", tmp_path / "empty")
    ).start()
    with gateway.client() as client:
        ready = client.get("/readyz")
        assert ready.status_code == 503, ready.text
        [reason] = ready.json()["reasons"]
        assert reason.startswith("no provider can serve new sessions")
        assert "claude_code: no credential found" in reason
        assert "`claude auth login`" in reason
        refused = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
        assert assert_problem(refused, 503)["candidates"][0]["provider"] == "claude_code"
    probe = gateway.command("probe", "--timeout", "30", check=False)
    assert probe.returncode == 1
    assert "not ready: no provider can serve new sessions" in probe.stderr
