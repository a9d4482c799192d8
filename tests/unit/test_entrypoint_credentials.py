"""docker/entrypoint.sh and its credentials helper: secrets into files of mode 600, existing
settings kept, and the gateway token required (the harness: tests/unit/entrypoint_box.py)."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.entrypoint_box import (
    AGENT_UID,
    CREDENTIALS,
    Box,
    final_command,
    make_box,
    make_fake_bin,
)


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_fake_bin(tmp_path_factory.mktemp("fake-bin"))


@pytest.fixture
def box(tmp_path: Path, fake_bin: Path) -> Box:
    return make_box(tmp_path, fake_bin)


# --- credentials and the token --------------------------------------------------------------

SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-secret-value-0001",
    "ANTHROPIC_AUTH_TOKEN": "auth-token-secret-value-0002",
    "CLAUDE_CODE_OAUTH_TOKEN": "oauth-secret-value-0003",
    "OPENAI_API_KEY": "sk-openai-secret-value-0004",
    "OPENROUTER_API_KEY": "sk-or-secret-value-0005",
    "GATEWAY_TOKEN": "gateway-token-secret-value-0006-abcdefghij",
}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_secret_list_covers_everything_the_helper_consumes() -> None:
    assert set(SECRETS) == set(CREDENTIALS.INJECTED)


def test_secrets_land_in_files_with_mode_600_and_nowhere_else(box: Box) -> None:
    run = box.start("agent-gateway", "serve", CODEX_CLI_VERSION="0.170.0", **SECRETS)
    final_command(run)

    claude = json.loads((box.home / ".claude" / "settings.json").read_text())
    assert claude == {
        "env": {k: SECRETS[k] for k in CREDENTIALS.CLAUDE_ENV},
    }
    codex = json.loads((box.home / ".codex" / "auth.json").read_text())
    assert codex == {"auth_mode": "apikey", "OPENAI_API_KEY": SECRETS["OPENAI_API_KEY"]}
    opencode = json.loads((box.home / ".local" / "share" / "opencode" / "auth.json").read_text())
    assert opencode == {
        "anthropic": {"type": "api", "key": SECRETS["ANTHROPIC_API_KEY"]},
        "openai": {"type": "api", "key": SECRETS["OPENAI_API_KEY"]},
        "openrouter": {"type": "api", "key": SECRETS["OPENROUTER_API_KEY"]},
    }
    token = box.data / "token"
    assert token.read_text() == SECRETS["GATEWAY_TOKEN"] + "\n"
    written = [
        box.home / ".claude" / "settings.json",
        box.home / ".codex" / "auth.json",
        box.home / ".local" / "share" / "opencode" / "auth.json",
        token,
    ]
    assert [_mode(p) for p in written] == [0o600] * 4

    helper = next(c for c in run.calls if c.name == "setpriv" and "python3" in c.args)
    assert helper.args[0] == f"--reuid={AGENT_UID}"  # written as the agent
    for secret in SECRETS.values():
        assert secret not in run.stdout + run.stderr
        for call in run.calls:
            assert not [a for a in call.args if secret in a], call.argv
    for call in run.named("npm") + run.named("agent-gateway"):  # CLI installs, migrate, serve
        leaked = [k for k, v in call.env.items() if v in SECRETS.values()]
        assert not leaked, (call.argv, leaked)
    assert "ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN" in run.stderr


def test_existing_settings_and_logins_on_the_volumes_are_kept(box: Box) -> None:
    settings = box.home / ".claude" / "settings.json"
    settings.write_text(json.dumps({"theme": "dark", "env": {"HTTPS_PROXY": "http://p:3128"}}))
    codex = box.home / ".codex" / "auth.json"
    codex.write_text(json.dumps({"auth_mode": "chatgpt", "tokens": {"refresh_token": "r"}}))
    opencode = box.home / ".local" / "share" / "opencode" / "auth.json"
    opencode.parent.mkdir(parents=True, exist_ok=True)
    opencode.write_text(json.dumps({"google": {"type": "api", "key": "g"}}))

    run = box.start("agent-gateway", "serve", ANTHROPIC_API_KEY="a-key", OPENAI_API_KEY="o-key")
    final_command(run)

    assert json.loads(settings.read_text()) == {
        "theme": "dark",
        "env": {"HTTPS_PROXY": "http://p:3128", "ANTHROPIC_API_KEY": "a-key"},
    }
    assert json.loads(codex.read_text()) == {
        "auth_mode": "apikey",
        "tokens": {"refresh_token": "r"},
        "OPENAI_API_KEY": "o-key",
    }
    assert json.loads(opencode.read_text()) == {
        "google": {"type": "api", "key": "g"},
        "anthropic": {"type": "api", "key": "a-key"},
        "openai": {"type": "api", "key": "o-key"},
    }


def test_a_settings_file_that_is_not_json_is_refused_not_overwritten(box: Box) -> None:
    settings = box.home / ".claude" / "settings.json"
    settings.write_text("{ not json")
    run = box.start("agent-gateway", "serve", ANTHROPIC_API_KEY="a-key-that-stays-secret")
    assert run.returncode != 0
    assert f"{settings} is not valid JSON" in run.stderr
    assert "a-key-that-stays-secret" not in run.stderr
    assert settings.read_text() == "{ not json"
    assert not run.named("agent-gateway")


def test_an_unchanged_file_is_not_rewritten(box: Box) -> None:
    run = box.start("agent-gateway", "serve", OPENAI_API_KEY="o-key")
    final_command(run)
    auth = box.home / ".codex" / "auth.json"
    before = auth.stat()
    again = box.start("agent-gateway", "serve", OPENAI_API_KEY="o-key")
    final_command(again)
    assert (auth.stat().st_ino, auth.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert "auth.json" not in again.stderr


@pytest.fixture
def no_token(box: Box) -> Box:
    del box.env["GATEWAY_TOKEN"]
    return box


def test_without_any_token_start_up_stops_and_says_how_to_make_one(no_token: Box) -> None:
    run = no_token.start("agent-gateway", "serve")
    assert run.returncode != 0
    for advice in ("GATEWAY_TOKEN", "at least 32 characters", "openssl rand -base64 32"):
        assert advice in run.stderr
    assert not run.named("agent-gateway")


@pytest.mark.parametrize("token", ["short-token", "has space" + "x" * 40, "tab\t" + "y" * 40])
def test_a_short_or_malformed_token_is_refused_without_echoing_it(box: Box, token: str) -> None:
    run = box.start("agent-gateway", "serve", GATEWAY_TOKEN=token)
    assert run.returncode != 0
    assert "GATEWAY_TOKEN" in run.stderr
    assert token not in run.stderr
    assert not (box.data / "token").exists()
    assert not run.named("agent-gateway")


@pytest.mark.parametrize(
    "setup",
    [
        lambda b: (b.data / "token").write_text("x" * 43 + "\n"),
        lambda b: b.env.update(GATEWAY_SERVER__TOKEN="y" * 40),
    ],
    ids=["token-file", "server-token"],
)
def test_an_existing_token_file_or_server_token_is_enough(
    no_token: Box, setup: Callable[[Box], object]
) -> None:
    setup(no_token)
    run = no_token.start("agent-gateway", "serve")
    assert final_command(run).argv == ("agent-gateway", "serve")


def test_a_token_file_too_short_to_be_used_is_refused(no_token: Box) -> None:
    (no_token.data / "token").write_text("short\n")
    run = no_token.start("agent-gateway", "serve")
    assert run.returncode != 0
    assert "fewer than 32 characters" in run.stderr
