"""The credential files the container's entrypoint writes are the ones the real CLIs read.

docker/credentials.py (run as the entrypoint runs it) writes each key from the environment
into a fresh home; then the pinned CLI, with no key in its own environment, talks to the stub
model server, which records the key it was sent. Codex's file is compared with what
``codex login --with-api-key`` itself writes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.settings import PINNED_CLI_BIN
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
HELPER = ROOT / "docker" / "credentials.py"
QUIET_CLAUDE = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_MAX_RETRIES": "0",
}
QUIET_OPENCODE = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
}


def base_env(home: Path) -> dict[str, str]:
    """A fresh home; the XDG directories, CLAUDE_CONFIG_DIR and CODEX_HOME under it."""
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "AGENT_HOME": str(home)}
    for kind in ("config", "data", "cache", "state"):
        env[f"XDG_{kind.upper()}_HOME"] = str(home / f".{kind}")
    env["CLAUDE_CONFIG_DIR"] = str(home / ".claude")
    env["CODEX_HOME"] = str(home / ".codex")
    (home / ".codex").mkdir(parents=True)
    return env


def place(env: dict[str, str], **secrets: str) -> None:
    subprocess.run(
        [sys.executable, "-I", "-S", str(HELPER)],
        env={**env, **secrets},
        check=True,
        capture_output=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("variable", "header", "sent"),
    [
        ("ANTHROPIC_API_KEY", "x-api-key", "{}"),
        ("ANTHROPIC_AUTH_TOKEN", "authorization", "Bearer {}"),
    ],
)
def test_claude_sends_the_key_from_its_settings_file(
    tmp_path: Path, stub: StubLLM, variable: str, header: str, sent: str
) -> None:
    env = base_env(tmp_path / "home")
    key = f"sk-from-settings-{variable.lower()}"
    place(env, **{variable: key})

    result = subprocess.run(
        [str(PINNED_CLI_BIN / "claude"), "-p", "hi", "--setting-sources", "user"],
        env={**env, **QUIET_CLAUDE, "ANTHROPIC_BASE_URL": stub.base_url},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert "Hello from stub." in result.stdout
    request = stub.message_requests()[-1]
    assert request.headers[header] == sent.format(key)


def test_codex_auth_file_is_what_codex_login_writes(tmp_path: Path) -> None:
    key = "sk-openai-from-env-0123456789"
    by_codex = base_env(tmp_path / "by-codex")
    login = subprocess.run(
        [str(PINNED_CLI_BIN / "codex"), "login", "--with-api-key"],
        input=key,
        env=by_codex,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert login.returncode == 0, login.stderr
    by_helper = base_env(tmp_path / "by-helper")
    place(by_helper, OPENAI_API_KEY=key)

    written = json.loads((Path(by_helper["CODEX_HOME"]) / "auth.json").read_text())
    assert written == json.loads((Path(by_codex["CODEX_HOME"]) / "auth.json").read_text())

    status = subprocess.run(
        [str(PINNED_CLI_BIN / "codex"), "login", "status"],
        env=by_helper,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert status.returncode == 0, status.stderr
    assert "API key configured" in status.stdout + status.stderr


def test_opencode_sends_the_key_from_its_auth_file(tmp_path: Path, stub: StubLLM) -> None:
    env = base_env(tmp_path / "home")
    key = "sk-openai-for-opencode-0123456789"
    place(env, OPENAI_API_KEY=key)
    # What the image pre-seeds: OpenCode then skips installing its plugin package.
    config_dir = Path(env["XDG_CONFIG_HOME"]) / "opencode"
    (config_dir / "node_modules").mkdir(parents=True)
    lock = {"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}
    (config_dir / "package-lock.json").write_text(json.dumps(lock))
    config = {
        "provider": {"openai": {"options": {"baseURL": stub.openai_base_url}}},
        "model": "openai/gpt-5",
        "small_model": "openai/gpt-5",
        "autoupdate": False,
        "share": "disabled",
    }

    result = subprocess.run(
        [str(PINNED_CLI_BIN / "opencode"), "run", "--title", "t", "hi"],
        env={**env, **QUIET_OPENCODE, "OPENCODE_CONFIG_CONTENT": json.dumps(config)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert "Hello from stub." in result.stdout
    requests = [r for r in stub.requests if r.is_openai]
    assert requests
    assert {r.headers.get("authorization") for r in requests} == {f"Bearer {key}"}
