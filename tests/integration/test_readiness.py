"""``GET /readyz`` tells the truth about the providers: real gateway processes whose CLIs are
the fake ``claude`` or missing, and ``agent-gateway probe`` (the container health check) on it."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from app.api.health import readiness
from app.providers.registry import Health
from tests.fakes.gateway import FakeGateway, fake_gateway_at
from tests.gateway import ROOT

MISSING = "/nonexistent/bin/codex"
_NOW = datetime(2026, 1, 1, tzinfo=UTC)


def probe(gateway: FakeGateway) -> subprocess.CompletedProcess[str]:
    return gateway.command("probe", "--timeout", "30", check=False)


def test_a_missing_cli_is_named_unavailable_while_the_default_serves(tmp_path: Path) -> None:
    gateway = fake_gateway_at(tmp_path, codex={"enabled": True, "executable": MISSING})
    try:
        gateway.start()
        with gateway.client() as client:
            answer = client.get("/readyz")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["status"] == "ready"
        assert body["reasons"] == []
        assert body["checks"]["database"] == "ok"
        assert body["checks"]["provider:claude_code"] == "ok"
        codex = body["checks"]["provider:codex"]
        assert codex.startswith("unavailable: ")
        assert f"{MISSING!r} was not found" in codex
        assert "providers.codex.executable" in codex  # what to fix
        assert body["checks"]["provider:opencode"].startswith("unavailable: disabled")
        assert probe(gateway).returncode == 0
    finally:
        gateway.stop()


def test_no_usable_provider_is_503_with_the_reasons(tmp_path: Path) -> None:
    gateway = fake_gateway_at(
        tmp_path,
        claude_code={"executable": "/nonexistent/bin/claude"},
        codex={"enabled": True, "executable": MISSING},
        selection={"fallback_chain": ["codex"]},
    )
    try:
        gateway.start()  # it still starts: a missing CLI never stops the gateway
        with gateway.client() as client:
            answer = client.get("/readyz")
            assert client.get("/healthz").status_code == 200  # alive, just not ready
        assert answer.status_code == 503, answer.text
        body = answer.json()
        assert body["status"] == "not_ready"
        assert body["checks"]["database"] == "ok"
        [reason] = body["reasons"]
        assert reason.startswith("no provider can serve new sessions")
        assert "claude_code: '/nonexistent/bin/claude' was not found" in reason
        assert f"codex: {MISSING!r} was not found" in reason
        refused = probe(gateway)
        assert refused.returncode == 1
        assert "answered 503: not ready: no provider can serve new sessions" in refused.stderr
        assert refused.stderr.count("\n") == 1
    finally:
        gateway.stop()


def test_a_fallback_that_serves_keeps_the_gateway_ready() -> None:
    up = Health(available=True, reason=None, version="1.0.0", checked_at=_NOW)
    down = Health(available=False, reason="'x' was not found", version=None, checked_at=_NOW)
    chain = ["claude_code", "codex"]
    ready = readiness("ok", {"claude_code": down, "codex": up}, serving=chain)
    assert (ready.status, ready.reasons) == ("ready", [])
    assert ready.checks["provider:claude_code"] == "unavailable: 'x' was not found"
    # A provider outside the chain does not make the gateway ready.
    alone = readiness("ok", {"claude_code": down, "opencode": up}, serving=["claude_code"])
    assert alone.status == "not_ready"
    # Nor does a working provider make up for a database that does not answer.
    broken = readiness("error: OperationalError", {"claude_code": up}, serving=["claude_code"])
    assert broken.status == "not_ready"
    assert broken.reasons == ["the database does not answer (error: OperationalError)"]


def test_the_readiness_answer_is_in_the_contract() -> None:
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    schema = document["components"]["schemas"]["Readiness"]
    assert "reasons" in schema["properties"]
    answers = document["paths"]["/readyz"]["get"]["responses"]
    assert {"200", "503"} <= set(answers)
