"""A first run as a new user meets it, on real gateway processes (``python -m app serve``):
the block that says where the console and the token are and which agents are ready, logs for
a person on a terminal and JSON otherwise, Alembic quiet, ``/`` to the console, a port in use
or a second gateway said in one line with its own exit status, ``--version``, and global
options after the command.
"""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic import command
from alembic.script import ScriptDirectory

from app import __version__
from app.store.schema import MIGRATIONS_DIR, alembic_config
from tests.fakes.gateway import FakeGateway, FileTokenGateway, fake_gateway_at
from tests.gateway import ROOT, TOKEN, log_lines, wait_until
from tests.integration.callers import assert_problem

HEAD = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head() or ""
MISSING_CODEX = "/nonexistent/bin/codex"
BANNER_END = "Stop it with Ctrl-C."


def first_run_gateway(base: Path, **overrides: Any) -> FakeGateway:
    """A gateway with no configured token (its token is generated into the data directory),
    the fake ``claude``, a ``codex`` that is not installed and ``opencode`` disabled."""
    return fake_gateway_at(
        base, FileTokenGateway, codex={"enabled": True, "executable": MISSING_CODEX}, **overrides
    )


@pytest.fixture
def stopped(tmp_path: Path) -> Iterator[list[FakeGateway]]:
    """Gateways a test starts, stopped when it ends."""
    gateways: list[FakeGateway] = []
    yield gateways
    for gateway in gateways:
        gateway.stop()


def app_command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``agent-gateway <args>`` with none of the developer's settings."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=ROOT,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# --- the start-up block ----------------------------------------------------------------------


def test_the_start_banner_says_where_the_console_and_token_are_and_which_agents_are_ready(
    tmp_path: Path, stopped: list[FakeGateway]
) -> None:
    gateway = first_run_gateway(tmp_path)
    gateway.config["log_format"] = "text"
    stopped.append(gateway)
    gateway.start()
    text = wait_until(lambda: BANNER_END in gateway.log() and gateway.log(), timeout=30)
    lines = text.splitlines()
    start = lines.index("Agent Gateway " + __version__ + " is ready.")
    block = lines[start : lines.index(BANNER_END) + 1]
    token_file = gateway.data_dir / "token"
    assert block[1] == f"  Console  {gateway.base_url}/console/ (sign in with the admin token)"
    assert block[2] == (
        f"  Token    new, saved in {token_file}; print it with: agent-gateway token show"
    )
    agents = {line[11:].split()[0]: line for line in block[3:6]}
    assert set(agents) == {"claude_code", "codex", "opencode"}
    assert agents["claude_code"].split("claude_code", 1)[1].strip().startswith("ready (")
    assert f"not ready: {MISSING_CODEX!r} was not found" in agents["codex"]
    assert "not ready: disabled: set providers.opencode.enabled = true" in agents["opencode"]
    assert block[6].startswith("  Docs     README.md")
    # Said once the server listens (after uvicorn's start-up), never before.
    assert lines.index("Agent Gateway " + __version__ + " is ready.") > next(
        i for i, line in enumerate(lines) if "Application startup complete" in line
    )
    token = token_file.read_text().strip()
    assert token not in text  # stderr is no terminal here: the token stays in its file
    assert not any(line.startswith("{") for line in lines)  # text logs, as configured
    shown = gateway.command("token", "show")  # the hint works as written
    assert shown.stdout.strip() == token


def _read_until(fd: int, marker: bytes, timeout: float) -> bytes:
    """What the terminal ``fd`` shows until ``marker`` appears (or its end, or ``timeout``)."""
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        seen += chunk
    return seen


def test_on_a_terminal_logs_are_text_and_a_new_token_is_shown_once(
    tmp_path: Path, stopped: list[FakeGateway]
) -> None:
    gateway = first_run_gateway(tmp_path)  # log_format unset: auto
    stopped.append(gateway)
    gateway.data_dir.mkdir(parents=True)
    controller, terminal = pty.openpty()
    try:
        gateway.process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve"],
            cwd=ROOT,
            env=gateway._env(),
            stdin=subprocess.DEVNULL,
            stdout=terminal,
            stderr=terminal,
        )
        os.close(terminal)
        shown = _read_until(controller, BANNER_END.encode(), timeout=60).decode(errors="replace")
        assert BANNER_END in shown, shown
        gateway.stop()
        shown += _read_until(controller, b"\0", timeout=5).decode(errors="replace")
    finally:
        os.close(controller)
    token = (gateway.data_dir / "token").read_text().strip()
    assert shown.count(token) == 1
    assert f"  Token    {token}\r\n" in shown
    lines = [line for line in shown.splitlines() if line.strip()]
    assert not any(line.lstrip().startswith("{") for line in lines)
    assert any(" INFO uvicorn.error: Application startup complete." in line for line in lines)


# --- logs -------------------------------------------------------------------------------------


def test_logs_are_json_when_not_on_a_terminal_without_escape_codes_or_alembic(
    tmp_path: Path, stopped: list[FakeGateway]
) -> None:
    gateway = first_run_gateway(tmp_path)
    stopped.append(gateway)
    gateway.start()
    ready = wait_until(
        lambda: [line for line in log_lines(gateway) if line.get("event") == "server.ready"],
        timeout=30,
    )
    text = gateway.log()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # all JSON
    assert "\x1b" not in text
    assert "\\u001b" not in text
    assert not any("color_message" in line for line in lines)
    assert not any(line["logger"].startswith("alembic") for line in lines)
    migrated = [line for line in lines if line.get("event") == "database.migrated"]
    assert [line["msg"].split(" created at ")[1] for line in migrated] == [
        f"schema revision {HEAD}"
    ]
    assert not [line for line in lines if line.get("event") == "database.revision_applied"]
    [banner] = ready
    assert banner["console_url"] == f"{gateway.base_url}/console/"
    assert banner["token_source"] == "generated"
    assert banner["token_file"] == str(gateway.data_dir / "token")
    assert banner["token_command"] == "agent-gateway token show"
    assert banner["agents"]["claude_code"]["ready"] is True
    assert banner["agents"]["codex"]["ready"] is False
    assert f"{MISSING_CODEX!r} was not found" in banner["agents"]["codex"]["reason"]
    token = (gateway.data_dir / "token").read_text().strip()
    assert token not in text
    gateway.stop()
    gateway.start()  # the same database: nothing migrates, nothing is said about it
    wait_until(lambda: '"server.ready"' in gateway.log(), timeout=30)
    again = log_lines(gateway)
    assert not [line for line in again if line.get("event", "").startswith("database.")]
    assert not any(line["logger"].startswith("alembic") for line in again)


def test_an_upgrade_says_each_revision_it_applies_in_one_line(
    tmp_path: Path, stopped: list[FakeGateway]
) -> None:
    gateway = first_run_gateway(tmp_path)
    stopped.append(gateway)
    gateway.data_dir.mkdir(parents=True)
    previous = ScriptDirectory(str(MIGRATIONS_DIR)).get_revision(HEAD).down_revision
    assert isinstance(previous, str)
    url = f"sqlite+aiosqlite:///{gateway.data_dir / 'gateway.db'}"
    command.upgrade(alembic_config(url), previous)
    gateway.start()
    wait_until(lambda: '"server.ready"' in gateway.log(), timeout=30)
    lines = log_lines(gateway)
    applied = [line for line in lines if line.get("event") == "database.revision_applied"]
    assert [line["revision"] for line in applied] == [HEAD]
    assert applied[0]["msg"].startswith(f"database schema upgraded to revision {HEAD}: ")
    [migrated] = [line for line in lines if line.get("event") == "database.migrated"]
    assert f"upgraded from schema revision {previous} to {HEAD}" in migrated["msg"]
    assert not any(line["logger"].startswith("alembic") for line in lines)


# --- routes a browser tries first -----------------------------------------------------------


def test_the_root_redirects_to_the_console_and_docs_say_where_the_docs_are(
    fake_gateway: FakeGateway,
) -> None:
    root = httpx.get(fake_gateway.base_url + "/", follow_redirects=False)
    assert root.status_code == 307
    assert root.headers["location"] == "/console/"
    assert "default-src 'self'" in root.headers["content-security-policy"]
    followed = httpx.get(fake_gateway.base_url + "/", follow_redirects=True)
    assert followed.url.path == "/console/"
    for path in ("/docs", "/redoc"):
        problem = assert_problem(httpx.get(fake_gateway.base_url + path), 404, "not_found")
        assert "/openapi.json" in problem["detail"]
        assert "README.md" in problem["detail"]
        assert "/console/" in problem["detail"]


# --- refusals in one line ---------------------------------------------------------------------


def test_a_port_in_use_is_said_in_one_line_with_exit_status_4(tmp_path: Path) -> None:
    gateway = first_run_gateway(tmp_path)
    gateway.data_dir.mkdir(parents=True)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", gateway.port))
        taken.listen()
        refused = gateway.command("serve", check=False)
    assert refused.returncode == 4, refused.stderr
    assert refused.stderr.splitlines() == [
        f"agent-gateway: cannot listen on 127.0.0.1:{gateway.port}: the port is already in use "
        "by another program. Stop it, or choose another port: --port, server.port or "
        "GATEWAY_SERVER__PORT"
    ]
    assert not (gateway.data_dir / "gateway.db").exists()  # said before anything was made


def test_a_second_gateway_on_one_data_directory_is_said_in_one_line_with_exit_status_5(
    tmp_path: Path, stopped: list[FakeGateway]
) -> None:
    first = fake_gateway_at(tmp_path)
    second = FakeGateway(data_dir=first.data_dir, config=first.config, config_name="second.toml")
    stopped.extend([first, second])
    first.start()
    assert first.process is not None
    refused = second.command("serve", check=False)
    assert refused.returncode == 5, refused.stderr
    [line] = refused.stderr.splitlines()
    assert line.startswith("agent-gateway: another gateway already serves ")
    assert f"(process {first.process.pid} holds " in line


# --- configuration errors ----------------------------------------------------------------------


def test_an_unknown_key_names_its_line_a_suggestion_and_the_variable(tmp_path: Path) -> None:
    gateway = first_run_gateway(tmp_path, server={"prot": 9000})
    gateway.data_dir.mkdir(parents=True)
    path = gateway._write_config()
    number = path.read_text().splitlines().index("prot = 9000") + 1
    assert tomllib.loads(path.read_text())["server"]["prot"] == 9000
    # --config after the command: the file named there is the one read.
    refused = app_command("serve", "--config", str(path))
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.splitlines() == [
        f"agent-gateway: invalid configuration in {path}:",
        f"  {path}:{number}: server.prot: no such setting; did you mean server.port "
        "(GATEWAY_SERVER__PORT)?",
    ]
    assert not (gateway.data_dir / "gateway.db").exists()


# --- the command line ---------------------------------------------------------------------------


@pytest.mark.parametrize("args", [("--version",), ("serve", "--version"), ("token", "--version")])
def test_version_names_the_gateway_its_api_and_its_schema(args: tuple[str, ...]) -> None:
    shown = app_command(*args)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == (
        f"agent-gateway {__version__} (HTTP API v1, database schema revision {HEAD})\n"
    )


def test_the_package_and_the_code_have_one_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == __version__


def test_config_is_accepted_before_or_after_the_command(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    data = tmp_path / "data"
    config.write_text(
        f'[server]\ntoken = "{TOKEN}"\n[storage]\ndata_dir = "{data}"\n'
        f'[workspaces]\nroots = ["{tmp_path}"]\n'
    )
    migrated = app_command("migrate", "--config", str(config))
    assert migrated.returncode == 0, migrated.stderr
    assert f"created at schema revision {HEAD}" in migrated.stdout
    assert (data / "gateway.db").exists()
    for args in (
        ("--config", str(config), "token", "show"),
        ("token", "--config", str(config), "show"),
        ("token", "show", f"--config={config}"),
    ):
        shown = app_command(*args)
        assert (shown.returncode, shown.stdout) == (0, TOKEN + "\n"), (args, shown.stderr)


def test_help_lists_every_exit_status() -> None:
    shown = app_command("--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    for said in (
        "0 success",
        "1 the command ran and failed",
        "2 unusable configuration, database schema or arguments",
        "3 the gateway failed to start",
        "4 the address cannot be listened on (the port is in use)",
        "5 another gateway already serves this data directory",
        "--config and --version may come before or after the command",
    ):
        assert said in text


def test_an_agent_check_still_running_is_said_as_such_and_ends_with_the_gateway(
    tmp_path: Path, stopped: list[FakeGateway]
) -> None:
    hanging = tmp_path / "bin" / "codex"
    hanging.parent.mkdir(parents=True, exist_ok=True)
    hanging.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(120)\n")  # never answers
    hanging.chmod(0o755)
    gateway = fake_gateway_at(tmp_path, codex={"enabled": True, "executable": str(hanging)})
    stopped.append(gateway)
    gateway.start()
    [ready] = wait_until(
        lambda: [line for line in log_lines(gateway) if line.get("event") == "server.ready"],
        timeout=30,
    )
    assert ready["agents"]["codex"] == {
        "ready": None,
        "needs_login": False,
        "reason": None,
        "version": None,
    }
    assert "still being checked: codex" in ready["msg"]
    assert gateway.stop() == 0
    assert "Traceback" not in gateway.log()
    # Cancelled with the gateway, not waited for (its --version would time out in 15 s).
    assert '"agent.checked"' not in gateway.log()
