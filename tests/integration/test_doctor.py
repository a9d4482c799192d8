"""``agent-gateway doctor`` on a machine without credentials, then with a key, a model endpoint
that answers or not, and storage it cannot use: its table, its verdict, its exit code and its
``--json`` document. The real command; ``claude`` is the fake (it answers ``--version``)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory, without_credentials
from tests.gateway import free_port

SECRET = "sk-ant-doctor-secret-value-0123456789"


def doctor(gateway: FakeGateway, *args: str) -> tuple[int, str]:
    result = gateway.command("doctor", *args, check=False)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout


def row(output: str, provider: str, check: str) -> list[str]:
    """The table's row of ``check`` of ``provider``: ``[status, detail]`` (columns are two
    spaces or more apart; `` *`` marks an essential provider)."""
    for line in output.splitlines():
        cells = re.split(r"\s{2,}", line, maxsplit=3)
        if len(cells) == 4 and cells[0].removesuffix(" *") == provider and cells[1] == check:
            return cells[2:]
    raise AssertionError(f"no {provider} {check} row in:\n{output}")


class Answering(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def model_server() -> Iterator[str]:
    """A loopback HTTP server that answers every GET with a 404, as a model server answers
    its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Answering)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://localhost:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.fixture
def bare(make_fake_gateway: FakeGatewayFactory, tmp_path: Path) -> FakeGateway:
    """A gateway whose default (the fake Claude Code) has no credential; never started."""
    gateway = make_fake_gateway(claude_code=without_credentials("claude_code", tmp_path / "e"))
    gateway.data_dir.mkdir(parents=True)
    return gateway


def test_without_a_credential_the_default_cannot_run_and_doctor_says_how_to_log_in(
    bare: FakeGateway, tmp_path: Path
) -> None:
    code, output = doctor(bare)
    assert code == 1, output
    status, detail = row(output, "claude_code", "credentials")
    assert status == "FAIL"
    assert detail.startswith("no credential found")
    assert str(tmp_path / "e" / ".claude" / ".credentials.json") in detail  # where it looked
    assert "run `claude auth login` as the gateway's user" in detail
    assert row(output, "claude_code", "version")[1].startswith("2.1.330")  # the CLI runs
    assert row(output, "claude_code", "endpoint") == [
        "skip",
        "not checked: no custom model endpoint configured (the CLI uses its vendor's)",
    ]
    assert row(output, "codex", "enabled")[0] == "warn"
    assert row(output, "gateway", "storage")[0] == "ok"
    assert output.splitlines()[-1] == (
        "not ready: claude_code (the default provider) needs a login: run `claude auth login` "
        "as the gateway's user, or set providers.claude_code.env.ANTHROPIC_API_KEY"
    )

    code, output = doctor(bare, "--json")
    assert code == 1
    document = json.loads(output)
    assert (document["format"], document["exit_code"], document["ready"]) == (1, 1, False)
    assert document["default_provider"] == "claude_code"
    assert document["problems"] == [
        "claude_code (the default provider) needs a login: run `claude auth login` as the "
        "gateway's user, or set providers.claude_code.env.ANTHROPIC_API_KEY"
    ]
    assert [c["check"] for c in document["gateway"]] == [
        "limits",
        "snapshots",
        "tracing",
        "storage",
    ]
    claude = document["providers"]["claude_code"]
    assert (claude["status"], claude["essential"], claude["enabled"]) == ("needs_login", True, True)
    assert claude["installed_version"] == "2.1.330"
    assert claude["credential"]["found"] is False
    assert claude["credential"]["form"] is None
    assert "claude auth login" in claude["credential"]["fix"]
    credentials = next(c for c in claude["checks"] if c["check"] == "credentials")
    assert credentials["status"] == "fail"
    assert document["providers"]["codex"]["status"] == "disabled"
    assert document["providers"]["codex"]["credential"] is None


def test_with_a_key_it_can_run_and_doctor_never_prints_the_key(bare: FakeGateway) -> None:
    bare.config["providers"]["claude_code"]["env"]["ANTHROPIC_API_KEY"] = SECRET
    code, output = doctor(bare)
    assert code == 0, output
    assert row(output, "claude_code", "credentials") == [
        "ok",
        "API key variable: ANTHROPIC_API_KEY in providers.claude_code.env",
    ]
    assert output.splitlines()[-1] == "ready: claude_code (the default provider) can run"
    code, output = doctor(bare, "--json")
    assert code == 0
    document = json.loads(output)
    assert (document["exit_code"], document["ready"], document["problems"]) == (0, True, [])
    credential = document["providers"]["claude_code"]["credential"]
    assert (credential["found"], credential["form"]) == (True, "variable")
    for shown in (output, json.dumps(document)):
        assert SECRET not in shown
        assert SECRET[:12] not in shown


def test_a_model_endpoint_is_checked_unless_offline(bare: FakeGateway, model_server: str) -> None:
    env = bare.config["providers"]["claude_code"]["env"]
    env["ANTHROPIC_BASE_URL"] = model_server
    code, output = doctor(bare)
    assert code == 0, output
    assert row(output, "claude_code", "credentials") == [
        "ok",
        "custom model endpoint: a custom model endpoint (ANTHROPIC_BASE_URL)",
    ]
    assert row(output, "claude_code", "endpoint") == [
        "ok",
        f"{model_server} (ANTHROPIC_BASE_URL): resolves to 127.0.0.1, answers HTTP 404",
    ]

    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env["ANTHROPIC_BASE_URL"] = closed
    code, output = doctor(bare)
    assert code == 1, output
    status, detail = row(output, "claude_code", "endpoint")
    assert status == "FAIL"
    assert detail.startswith(f"{closed} (ANTHROPIC_BASE_URL): resolves to 127.0.0.1 but does not")
    assert detail.endswith("start the model server or fix ANTHROPIC_BASE_URL")
    assert output.splitlines()[-1].startswith(
        "not ready: claude_code (the default provider) cannot run: endpoint: "
    )

    code, output = doctor(bare, "--offline")
    assert code == 0, output
    assert row(output, "claude_code", "endpoint") == [
        "skip",
        f"not checked (--offline): {closed} (ANTHROPIC_BASE_URL)",
    ]
    document = json.loads(doctor(bare, "--offline", "--json")[1])
    [endpoint] = [
        c for c in document["providers"]["claude_code"]["checks"] if c["check"] == "endpoint"
    ]
    assert endpoint["status"] == "skip"


def test_storage_is_checked_without_creating_anything(bare: FakeGateway, tmp_path: Path) -> None:
    bare.config["providers"]["claude_code"]["env"]["ANTHROPIC_API_KEY"] = SECRET
    database = bare.data_dir / "gateway.db"
    code, output = doctor(bare)
    assert row(output, "gateway", "storage") == [
        "ok",
        f"no database yet at {database}: `agent-gateway serve` creates it",
    ]
    assert not database.exists()
    bare.migrate()
    code, output = doctor(bare)
    assert code == 0, output
    status, detail = row(output, "gateway", "storage")
    assert status == "ok"
    assert detail.startswith(f"database at sqlite+aiosqlite:///{database} at this version's")

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    bare.config["storage"] = {"data_dir": str(blocker / "data")}
    code, output = doctor(bare)
    assert code == 1, output
    status, detail = row(output, "gateway", "storage")
    assert status == "FAIL"
    assert detail == (
        f"data directory {blocker / 'data'}: {blocker} is not a directory; make it writable by "
        "the gateway's user or set storage.data_dir"
    )
    assert f"not ready: gateway storage: {detail}" in output.splitlines()
