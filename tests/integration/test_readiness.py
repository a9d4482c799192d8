"""``GET /readyz`` tells the truth about the providers, the database and Redis: real gateway
processes whose CLIs are the fake ``claude`` or missing, on a private PostgreSQL and Redis
that the tests stop and start again, and ``agent-gateway probe`` (the container health check)
on it. An outage of either server is one log line when it begins and one when it ends,
however many calls fail meanwhile, and no traceback."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.api.health import readiness
from app.providers.registry import Health
from tests.dbservers import PostgresServer, RedisServer
from tests.fakes.gateway import FakeGateway, FakeGatewayFactory, fake_gateway_at
from tests.gateway import ROOT, GatewayProcess, log_lines, wait_until
from tests.integration.replicas import two_replicas

MISSING = "/nonexistent/bin/codex"
OUTAGE_S = 3.0
"""How long an outage lasts at least in the tests (several seconds of calls failing)."""
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
    up = Health(status="available", reason=None, version="1.0.0", checked_at=_NOW)
    down = Health(status="unavailable", reason="'x' was not found", version=None, checked_at=_NOW)
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
    # Nor for a replica whose Redis does not answer; a single gateway has no Redis check.
    cut_off = readiness("ok", {"claude_code": up}, serving=["claude_code"], redis="error: x")
    assert (cut_off.status, cut_off.checks["redis"]) == ("not_ready", "error: x")
    assert cut_off.reasons[0].startswith("Redis (cluster.redis_url) does not answer (error: x)")
    assert "redis" not in ready.checks


def said(gateway: GatewayProcess, start: str) -> list[dict[str, Any]]:
    """The gateway's log lines whose message starts with ``start``."""
    return [line for line in log_lines(gateway) if str(line.get("msg", "")).startswith(start)]


def tracebacks(gateway: GatewayProcess) -> list[str]:
    return [str(line["msg"]) for line in log_lines(gateway) if "exc" in line]


def test_a_replica_without_redis_is_not_ready_and_logs_the_outage_once(
    tmp_path: Path, postgres: PostgresServer, redis_server: RedisServer
) -> None:
    with two_replicas(tmp_path, postgres, redis_server) as made:
        a = made["gw-a"]
        a.config["log_level"] = "debug"  # to count the calls that fail quietly
        a.start()
        with a.client() as client:
            ready = client.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["checks"]["redis"] == "ok"
            redis_server.stop()
            try:
                answer = client.get("/readyz")
                assert answer.status_code == 503, answer.text
                body = answer.json()
                assert body["status"] == "not_ready"
                assert body["checks"]["database"] == "ok"
                assert body["checks"]["redis"].startswith("error: ")
                [reason] = body["reasons"]
                assert reason.startswith("Redis (cluster.redis_url) does not answer (error: ")

                stopped = time.monotonic()

                def failing_for_a_while() -> bool:
                    assert client.get("/readyz").status_code == 503
                    return (
                        len(said(a, "redis still unreachable")) >= 8
                        and time.monotonic() - stopped >= OUTAGE_S
                    )

                # Readiness checks, and the replica's own loop waiting for forwarded commands.
                wait_until(failing_for_a_while, timeout=60, what="calls failing for a while")
                assert len(said(a, "redis unreachable: ")) == 1
                assert tracebacks(a) == []
            finally:
                redis_server.start()
            wait_until(
                lambda: client.get("/readyz").status_code == 200,
                timeout=30,
                what="ready once Redis is back",
            )
        [back] = said(a, "redis reachable again after ")
        assert back["level"] == "info"
        assert len(said(a, "redis unreachable: ")) == 1
        assert tracebacks(a) == []


def test_a_gateway_without_its_database_is_not_ready_and_logs_the_outage_once(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    with PostgresServer(tmp_path / "own-postgres") as server:
        server.create_database("gateway")
        gateway = make_fake_gateway(storage={"url": server.url("gateway")})
        gateway.config["log_level"] = "debug"
        gateway.start()
        with gateway.client() as client:
            ready = client.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert "redis" not in ready.json()["checks"]  # a single gateway has none
            server.stop()
            try:
                answer = client.get("/readyz")
                assert answer.status_code == 503, answer.text
                [reason] = answer.json()["reasons"]
                assert reason.startswith("the database does not answer (error: ")

                stopped = time.monotonic()

                def failing_for_a_while() -> bool:
                    assert client.get("/readyz").status_code == 503
                    created = client.post(
                        "/v1/sessions", json={"workspace": str(gateway.workspace)}
                    )
                    assert created.status_code == 503, created.text
                    return (
                        len(said(gateway, "database still unreachable")) >= 8
                        and time.monotonic() - stopped >= OUTAGE_S
                    )

                wait_until(failing_for_a_while, timeout=60, what="calls failing for a while")
                [down] = said(gateway, "database unreachable: ")
                assert down["level"] == "warning"
                assert tracebacks(gateway) == []
                assert said(gateway, "storage unavailable") == []
            finally:
                server.start()
            wait_until(
                lambda: client.get("/readyz").status_code == 200,
                timeout=30,
                what="ready once PostgreSQL is back",
            )
        assert len(said(gateway, "database reachable again after ")) == 1
        assert len(said(gateway, "database unreachable: ")) == 1
        assert tracebacks(gateway) == []
        gateway.stop()


def test_the_readiness_answer_is_in_the_contract() -> None:
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    schema = document["components"]["schemas"]["Readiness"]
    assert "reasons" in schema["properties"]
    answers = document["paths"]["/readyz"]["get"]["responses"]
    assert {"200", "503"} <= set(answers)
