"""The gateway of the tests that need no real CLI: a real gateway process whose ``claude`` is
tests/fakes/fake_claude.py (``codex`` and ``opencode`` can be their fakes too).

``fake_gateway_at`` builds one; the ``make_fake_gateway`` and ``fake_gateway`` fixtures
(tests/conftest.py) build and stop them for a test."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.providers.catalog import described
from tests.gateway import TOKEN, GatewayProcess

FAKE_CLAUDE = Path(__file__).resolve().parent / "fake_claude.py"


def fake_claude_in(directory: Path) -> Path:
    """A copy of the fake ``claude`` at ``directory/claude`` run by this interpreter.

    ``/usr/bin/env python3`` may find a pyenv shim first, which costs ~150 ms of CPU a spawn
    and briefly puts the shim's helpers in the CLI's process group.
    """
    directory.mkdir(parents=True, exist_ok=True)
    executable = directory / "claude"
    source = FAKE_CLAUDE.read_text().split("\n", 1)[1]
    executable.write_text(f"#!{sys.executable}\n{source}")
    executable.chmod(0o755)
    return executable


def fake_claude_login(directory: Path) -> dict[str, str]:
    """A Claude Code login the credential detector finds (``.credentials.json`` in the config
    directory ``CLAUDE_CONFIG_DIR`` names), as the ``env`` that points the CLI at it. A file,
    not ``ANTHROPIC_API_KEY``: the tests that pass a key through the gateway's environment
    keep that variable to themselves."""
    login = directory / ".credentials.json"
    login.parent.mkdir(parents=True, exist_ok=True)
    login.write_text(json.dumps({"claudeAiOauth": {"accessToken": "fake-claude-login"}}))
    return {"CLAUDE_CONFIG_DIR": str(directory)}


FAKE_LOGINS: dict[str, dict[str, str]] = {
    "codex": {"CODEX_API_KEY": "fake-codex-key"},
    "opencode": {"OPENROUTER_API_KEY": "fake-openrouter-key"},
}
"""A credential in a form each CLI reads, for the fake servers (and a real CLI a test only
probes): a provider without one needs a login and is never selected."""


def without_credentials(name: str, empty: Path) -> dict[str, Any]:
    """A section for provider ``name`` whose CLI finds no credential whatever the machine
    running the tests has: its key and endpoint variables blank, its HOME and moved config
    directories empty (``empty``)."""
    credentials = described(name).credentials
    env = {v: "" for v in (*credentials.variables, *credentials.endpoint_variables)}
    for variable, relative in credentials.config_dirs.items():
        (empty / relative).mkdir(parents=True, exist_ok=True)
        env[variable] = str(empty / relative)
    empty.mkdir(parents=True, exist_ok=True)
    return {"env": {**env, "HOME": str(empty)}}


FAKES = Path(__file__).resolve().parent


def fake_server_in(directory: Path, name: str) -> Path:
    """``directory/<name>`` running the fake ``codex app-server`` (``codex``) or ``opencode
    serve`` (``opencode``) with this interpreter, which has the packages the fakes need."""
    fake = {"codex": "fake_codex_app_server.py", "opencode": "fake_opencode_serve.py"}[name]
    directory.mkdir(parents=True, exist_ok=True)
    executable = directory / name
    executable.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKES / fake}" "$@"\n')
    executable.chmod(0o755)
    return executable


class FakeGateway(GatewayProcess):
    """A gateway whose ``claude`` is tests/fakes/fake_claude.py, logging every spawn."""

    spawn_log: Path
    workspace: Path

    def spawns(self) -> list[dict[str, Any]]:
        if not self.spawn_log.exists():
            return []
        return [json.loads(line) for line in self.spawn_log.read_text().splitlines()]


class FileTokenGateway(FakeGateway):
    """A fake-claude gateway without ``server.token``: its admin key is ``<data_dir>/token``."""

    def _write_config(self) -> Path:
        path = super()._write_config()
        configured = f"token = {json.dumps(TOKEN)}\n"
        text = path.read_text()
        assert configured in text
        path.write_text(text.replace(configured, ""))
        return path


FakeGatewayFactory = Callable[..., FakeGateway]


def fake_gateway_at(
    base: Path, gateway_class: type[FakeGateway] = FakeGateway, **overrides: Any
) -> FakeGateway:
    """A gateway under ``base`` (not started) whose ``claude`` is the fake, logging every spawn.

    The workspace is ``base/roots/project``, the only root ``base/roots``; ``overrides`` are
    settings sections (``limits={…}``) or provider names (``claude_code={…}``) merged in (a
    provider's ``env`` over the one here). Every provider has a (fake) credential.
    """
    root = base / "roots"
    workspace = root / "project"
    workspace.mkdir(parents=True, exist_ok=True)
    spawn_log = base / "spawns.jsonl"
    config: dict[str, Any] = {
        "workspaces": {"roots": [str(root)]},
        "providers": {
            "claude_code": {
                "executable": str(fake_claude_in(base / "bin")),
                "env": {"FAKE_CLAUDE_LOG": str(spawn_log), **fake_claude_login(base / "login")},
            },
            "codex": {"enabled": False, "env": dict(FAKE_LOGINS["codex"])},
            "opencode": {"enabled": False, "env": dict(FAKE_LOGINS["opencode"])},
        },
        # Unsandboxed unless a test asks (sandbox={"mode": "bwrap"}): the orchestration tests
        # follow each fake by the pid it logs, which the sandbox's PID namespace renumbers
        # (a sandboxed fake is tested in test_sandbox_runner.py and test_sandboxed_fakes.py).
        # Sandboxed, the fakes write their spawn log next to the workspace; the gateway's
        # data directory under ``base`` stays covered.
        "sandbox": {"mode": "none", "read_write": [str(base)]},
    }
    for section, values in overrides.items():
        if section in config["providers"]:
            provider = config["providers"][section]
            env = {**provider["env"], **values.get("env", {})}
            provider.update(values)
            provider["env"] = env
        else:
            config.setdefault(section, {}).update(values)
    gateway = gateway_class(data_dir=base / "data", config=config)
    gateway.spawn_log = spawn_log
    gateway.workspace = workspace
    return gateway
