"""Provider visibility with the pinned ``codex`` and ``opencode`` (their ``--version``, the
doctor's start-up checks): versions, pins, health, fallback past a missing CLI, and doctor.
No model traffic; ``claude_code`` is the fake or missing."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.gateway import FakeGatewayFactory

PINS: dict[str, str] = json.loads(
    (Path(__file__).resolve().parents[2] / "agents" / "package.json").read_text()
)["dependencies"]
"""What agents/package.json pins, read here so a bump needs no edit of this file."""
MISSING = {"executable": "claude-not-installed"}
REAL_CLIS = {"codex": {"enabled": True}, "opencode": {"enabled": True}}


def test_a_missing_cli_makes_only_its_provider_unavailable(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(
        claude_code=MISSING,
        selection={"default": "claude_code", "fallback_chain": ["codex"]},
        sandbox={"mode": "bwrap"},
        **REAL_CLIS,
    ).start()
    with gateway.client() as client:
        listed = {p["name"]: p for p in client.get("/v1/providers").json()["providers"]}
        assert set(listed) == {"claude_code", "codex", "opencode"}
        claude = listed["claude_code"]
        assert claude["health"]["available"] is False
        assert "claude-not-installed" in claude["health"]["reason"]
        assert "make setup" in claude["health"]["reason"]
        assert claude["installed_version"] is None
        assert claude["pinned_version"] == PINS["@anthropic-ai/claude-code"]
        for name in ("codex", "opencode"):
            info = listed[name]
            assert info["health"]["available"] is True, info
            assert info["health"]["reason"] is None
            assert info["installed_version"] == info["pinned_version"]
            # Sandboxed, each session has a server of its own; the health ping started a
            # throwaway one in a sandbox and it answered.
            assert info["capabilities"]["shared_process"] is False
        assert client.get("/v1/providers/codex").json()["name"] == "codex"
        missing = client.get("/v1/providers/nope")
        assert missing.status_code == 404

        session = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
        assert session.status_code == 201, session.text
        selected = session.json()
        assert selected["provider"] == "codex"
        assert selected["selection"]["reason"] == "fallback"
        assert selected["selection"]["skipped"][0]["provider"] == "claude_code"
        assert "not found" in selected["selection"]["skipped"][0]["reason"]

        explicit = client.post(
            "/v1/sessions", json={"workspace": str(gateway.workspace), "provider": "claude_code"}
        )
        assert explicit.status_code == 503
        assert explicit.headers["content-type"] == "application/problem+json"
        assert explicit.json()["candidates"][0]["provider"] == "claude_code"
    assert gateway.spawns() == []


def test_doctor_prints_the_fix_and_fails_for_an_unusable_default(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(claude_code=MISSING, **REAL_CLIS)
    gateway.data_dir.mkdir(parents=True)
    result = gateway.command("doctor", check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    claude = next(line for line in lines if line.split()[:3] == ["claude_code", "*", "executable"])
    assert "FAIL" in claude
    assert "make setup" in claude
    codex = PINS["@openai/codex"]
    assert any(line.startswith("codex ") and codex in line for line in lines)

    gateway.config["selection"] = {"default": "codex"}
    result = gateway.command("doctor", check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("codex *") for line in lines)
    snapshots = next(line for line in lines if line.split()[:2] == ["gateway", "snapshots"])
    assert " ok " in snapshots

    gateway.config["snapshots"] = {"git": "git-not-installed"}
    result = gateway.command("doctor", check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    snapshots = next(
        line for line in result.stdout.splitlines() if line.split()[:2] == ["gateway", "snapshots"]
    )
    assert "FAIL" in snapshots
    assert "snapshots.enabled = false" in snapshots
