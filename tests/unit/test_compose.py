"""docker-compose.yml, parsed: volumes where the CLIs keep their state, loopback publish,
health check, restart and stop policy, and an environment the gateway and entrypoint accept."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.settings import ServerSettings, Settings

ROOT = Path(__file__).resolve().parents[2]

NAMED_VOLUMES = {
    "gateway-data": "/data",
    "claude-data": "/home/agent/.claude",
    "codex-data": "/home/agent/.codex",
    "opencode-config-data": "/home/agent/.config/opencode",
    "opencode-data": "/home/agent/.local/share/opencode",
    "gemini-data": "/home/agent/.gemini",
    "copilot-data": "/home/agent/.copilot",
    "qwen-data": "/home/agent/.qwen",
    "codebuddy-data": "/home/agent/.codebuddy",
}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def gateway(compose: dict[str, Any]) -> dict[str, Any]:
    service = compose["services"]["gateway"]
    assert isinstance(service, dict)
    return service


def interpolate(value: str, environ: dict[str, str]) -> str:
    """Compose's ``${NAME}`` and ``${NAME:-default}`` (empty counts as unset for ``:-``)."""

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(3)
        if default is not None:
            return environ.get(name) or default
        return environ.get(name, "")

    return re.sub(r"\$\{(\w+)(:-([^}]*))?\}", replace, value)


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path → source, from short-syntax volume entries."""
    result = {}
    for entry in service["volumes"]:
        source, _, target = entry.rpartition(":")
        if target in {"ro", "rw"}:
            source, _, target = source.rpartition(":")
        result[target] = source
    return result


def test_the_cli_state_and_the_data_live_on_named_volumes(
    compose: dict[str, Any], gateway: dict[str, Any]
) -> None:
    assert set(compose["volumes"]) == set(NAMED_VOLUMES)
    mounted = mounts(gateway)
    for volume, target in NAMED_VOLUMES.items():
        assert mounted.get(target) == volume, target


def test_the_workspace_is_a_bind_mount_of_a_host_directory(gateway: dict[str, Any]) -> None:
    assert mounts(gateway)["/workspace"] == "${WORKSPACE_DIR:-./workspace}"


def test_it_is_built_here_and_restarts_unless_stopped(gateway: dict[str, Any]) -> None:
    assert gateway["build"] == "."
    assert gateway["restart"] == "unless-stopped"


def test_no_process_can_regain_root_through_setuid(gateway: dict[str, Any]) -> None:
    assert "no-new-privileges:true" in gateway["security_opt"]


def test_the_port_is_published_on_host_loopback_only(gateway: dict[str, Any]) -> None:
    assert gateway["ports"] == ["127.0.0.1:${GATEWAY_PORT:-8765}:8765"]
    for port in gateway["ports"]:
        assert interpolate(port, {}).startswith("127.0.0.1:")


def test_the_health_check_is_the_images(gateway: dict[str, Any]) -> None:
    assert gateway["healthcheck"]["test"] == ["CMD", "agent-gateway", "probe"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'CMD ["agent-gateway", "probe"]' in dockerfile


def _seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+)(s|m)", duration)
    assert match, duration
    return int(match.group(1)) * (60 if match.group(2) == "m" else 1)


def test_docker_waits_longer_than_the_gateways_shutdown_grace(gateway: dict[str, Any]) -> None:
    grace = ServerSettings().shutdown_grace_s
    assert _seconds(gateway["stop_grace_period"]) > grace + 5  # room for the CLIs to stop


def test_the_entrypoints_inputs_are_passed_through(gateway: dict[str, Any]) -> None:
    environment = gateway["environment"]
    for name in (
        "GATEWAY_TOKEN",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "OPENAI_API_KEY",
        "OPENROUTER_API_KEY",
        "CLAUDE_CODE_CLI_VERSION",
        "CODEX_CLI_VERSION",
        "OPENCODE_CLI_VERSION",
    ):
        # from the host environment or .env, empty when unset (the entrypoint's "not given")
        assert environment[name] == f"${{{name}:-}}", name
    assert environment["PUID"] == "${PUID:-1000}"
    assert environment["PGID"] == "${PGID:-1000}"
    script = (ROOT / "docker" / "entrypoint.sh").read_text()
    for name in ("PUID", "PGID", "CLAUDE_CODE_CLI_VERSION", "GATEWAY_TOKEN"):
        assert name in script


def test_its_defaults_are_a_configuration_the_gateway_accepts(
    gateway: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("GATEWAY_"):
            monkeypatch.delenv(name)
    for name, value in gateway["environment"].items():
        if name.startswith("GATEWAY_"):
            monkeypatch.setenv(name, interpolate(str(value), {}))

    settings = Settings()

    assert settings.server.allowed_hosts == []
    assert settings.server.allowed_origins == []
    assert settings.server.metrics_public is False
    assert (settings.log_level, settings.log_format) == ("info", "json")


def test_a_user_can_set_hosts_and_origins_as_json_lists(
    gateway: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    given = {
        "GATEWAY_SERVER__ALLOWED_HOSTS": json.dumps(["gateway.example.com"]),
        "GATEWAY_SERVER__ALLOWED_ORIGINS": json.dumps(["https://app.example.com"]),
        "GATEWAY_LOG_FORMAT": "text",
    }
    for name in list(os.environ):
        if name.startswith("GATEWAY_"):
            monkeypatch.delenv(name)
    for name, value in gateway["environment"].items():
        if name.startswith("GATEWAY_"):
            monkeypatch.setenv(name, interpolate(str(value), given))

    settings = Settings()

    assert settings.server.allowed_hosts == ["gateway.example.com"]
    assert settings.server.allowed_origins == ["https://app.example.com"]
    assert settings.log_format == "text"
