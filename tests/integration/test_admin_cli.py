"""The admin commands (`token show|rotate`, `sessions list`, `probe`) against one real gateway.

The gateway runs with no ``server.token``, so its admin key is the token file's: rotating
the file must switch the key of the running process. The commands run in-process through
``main([...])`` with that gateway's configuration file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.admin import probe_address
from app.cli import main
from tests.fakes.gateway import FakeGateway, FileTokenGateway, fake_gateway_at
from tests.gateway import TOKEN, free_port, to_toml, wait_until


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FileTokenGateway]:
    gateway = fake_gateway_at(tmp_path_factory.mktemp("admin"), gateway_class=FileTokenGateway)
    assert isinstance(gateway, FileTokenGateway)
    gateway.start()
    yield gateway
    gateway.stop()


@pytest.fixture(autouse=True)
def no_gateway_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the configuration file (and what a test sets) configures the commands."""
    for name in os.environ:
        if name.startswith("GATEWAY_"):
            monkeypatch.delenv(name)


def run(capsys: pytest.CaptureFixture[str], config: Path, *args: str) -> tuple[int, str, str]:
    code = main(["--config", str(config), *args])
    out, err = capsys.readouterr()
    return code, out, err


def config_of(gateway: FakeGateway) -> Path:
    return gateway.data_dir / "gateway.toml"


def token_file(gateway: FakeGateway) -> Path:
    return gateway.data_dir / "token"


def get_sessions(gateway: FakeGateway, token: str) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.get(gateway.base_url + "/v1/sessions", headers=headers, timeout=10).status_code


# --- token ---------------------------------------------------------------------------------


def test_token_show_prints_the_token_file_alone_on_stdout(
    gateway: FileTokenGateway, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, config_of(gateway), "token", "show")
    assert code == 0, err
    assert out == token_file(gateway).read_text()
    assert err == ""
    assert get_sessions(gateway, out.strip()) == 200


def test_rotate_switches_the_running_gateway_to_the_new_token_without_a_restart(
    gateway: FileTokenGateway, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gateway.process is not None
    pid = gateway.process.pid
    _, old, _ = run(capsys, config_of(gateway), "token", "show")
    old = old.strip()
    assert get_sessions(gateway, old) == 200

    code, out, err = run(capsys, config_of(gateway), "token", "rotate")

    assert code == 0, err
    new = out.strip()
    assert out == new + "\n"
    assert len(new) >= 40
    assert new != old
    assert new not in err
    assert "token show" in err
    assert token_file(gateway).read_text() == new + "\n"
    assert stat.S_IMODE(token_file(gateway).stat().st_mode) == 0o600
    assert sorted(p.name for p in gateway.data_dir.glob(".token*")) == []  # no temp file left
    assert get_sessions(gateway, old) == 401
    assert get_sessions(gateway, new) == 200
    assert gateway.process.poll() is None
    assert gateway.process.pid == pid


def test_a_broken_token_file_keeps_the_last_good_token_and_warns(
    gateway: FileTokenGateway, capsys: pytest.CaptureFixture[str]
) -> None:
    _, good, _ = run(capsys, config_of(gateway), "token", "show")
    good = good.strip()
    try:
        token_file(gateway).write_text("short\n")
        assert get_sessions(gateway, "short") == 401
        assert get_sessions(gateway, good) == 200
        wait_until(
            lambda: "token file" in gateway.log() and "last good token" in gateway.log(),
            what="a warning about the unusable token file",
        )
        token_file(gateway).unlink()
        assert get_sessions(gateway, good) == 200
        assert get_sessions(gateway, "x" * 43) == 401
        code, out, err = run(capsys, config_of(gateway), "token", "show")
        assert (code, out) == (1, "")
        assert "token rotate" in err
    finally:
        code, out, _ = run(capsys, config_of(gateway), "token", "rotate")
    assert code == 0
    assert get_sessions(gateway, good) == 401
    assert get_sessions(gateway, out.strip()) == 200


def test_rotate_refuses_a_token_that_comes_from_the_configuration(
    gateway: FileTokenGateway, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = token_file(gateway).read_text()
    monkeypatch.setenv("GATEWAY_SERVER__TOKEN", TOKEN)

    code, out, err = run(capsys, config_of(gateway), "token", "rotate")

    assert (code, out) == (2, "")
    assert "GATEWAY_SERVER__TOKEN" in err
    assert "configuration" in err
    assert token_file(gateway).read_text() == before
    code, out, _ = run(capsys, config_of(gateway), "token", "show")
    assert (code, out) == (0, TOKEN + "\n")


def test_token_show_without_any_token_says_how_to_create_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(
        to_toml({"storage": {"data_dir": str(tmp_path / "data")}, "workspaces": {"roots": ["/"]}})
    )

    code, out, err = run(capsys, config, "token", "show")

    assert (code, out) == (1, "")
    assert "no admin token yet" in err
    assert "agent-gateway token rotate" in err
    assert not (tmp_path / "data" / "token").exists()


# --- probe ---------------------------------------------------------------------------------


def test_probe_exits_0_for_a_ready_gateway_and_prints_nothing(
    gateway: FileTokenGateway, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run(capsys, config_of(gateway), "probe") == (0, "", "")
    # A wildcard bind is probed on loopback.
    monkeypatch.setenv("GATEWAY_SERVER__HOST", "0.0.0.0")  # noqa: S104 - not bound, only probed
    assert run(capsys, config_of(gateway), "probe") == (0, "", "")


def test_probe_exits_1_with_one_line_for_a_closed_port(
    gateway: FileTokenGateway, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    monkeypatch.setenv("GATEWAY_SERVER__PORT", str(port))

    code, out, err = run(capsys, config_of(gateway), "probe", "--timeout", "2")

    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert f"cannot reach http://127.0.0.1:{port}/readyz" in err
    assert token_file(gateway).read_text().strip() not in err


def test_probe_exits_1_when_the_gateway_refuses_the_token(
    gateway: FileTokenGateway, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "wrong-token-0123456789abcdefghijklmnopqrstuvwxyz"
    monkeypatch.setenv("GATEWAY_SERVER__TOKEN", wrong)

    code, out, err = run(capsys, config_of(gateway), "probe")

    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert "answered 401" in err
    assert "token was refused" in err
    assert wrong not in err


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("0.0.0.0", "127.0.0.1"),  # noqa: S104 - a bind address being mapped
        ("::", "[::1]"),
        ("127.0.0.2", "127.0.0.2"),
        ("::1", "[::1]"),
        ("localhost", "localhost"),
    ],
)
def test_probe_reaches_a_wildcard_bind_on_loopback_and_a_specific_one_as_is(
    host: str, address: str
) -> None:
    assert probe_address(host) == address


# --- sessions list -------------------------------------------------------------------------


def listed(capsys: pytest.CaptureFixture[str], gateway: FakeGateway, *args: str) -> Any:
    code, out, err = run(capsys, config_of(gateway), "sessions", "list", "--json", *args)
    assert code == 0, err
    return json.loads(out)


def test_sessions_list_shows_the_newest_updated_first_filtered_by_status(
    gateway: FileTokenGateway, capsys: pytest.CaptureFixture[str]
) -> None:
    _, token, _ = run(capsys, config_of(gateway), "token", "show")
    headers = {"Authorization": f"Bearer {token.strip()}"}
    with httpx.Client(base_url=gateway.base_url, headers=headers, timeout=10) as client:
        created = []
        for _ in range(3):
            response = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
            assert response.status_code == 201, response.text
            created.append(response.json()["id"])
        assert client.delete(f"/v1/sessions/{created[0]}").status_code in (200, 202, 204)
        closed = client.get(f"/v1/sessions/{created[0]}").json()
        assert closed["status"] == "closed"

    everything = listed(capsys, gateway)
    ids = [row["id"] for row in everything]
    assert set(created) <= set(ids)
    assert ids[0] == created[0]  # closing updated it last
    assert [row["updated_at"] for row in everything] == sorted(
        (row["updated_at"] for row in everything), reverse=True
    )
    first = everything[0]
    assert first["provider"] == "claude_code"
    assert first["owner"] == "admin"
    assert first["workspace"] == str(gateway.workspace)
    assert first["last_seq"] == closed["last_seq"]

    assert [row["id"] for row in listed(capsys, gateway, "--status", "closed")] == [created[0]]
    idle = {row["id"] for row in listed(capsys, gateway, "--status", "idle")}
    assert idle >= set(created[1:])
    assert created[0] not in idle
    both = {row["id"] for row in listed(capsys, gateway, "--status", "idle,closed")}
    assert both == {
        row["id"] for row in listed(capsys, gateway, "--status", "idle", "--status", "closed")
    }
    assert set(created) <= both
    assert [row["id"] for row in listed(capsys, gateway, "--limit", "1")] == [created[0]]
    assert listed(capsys, gateway, "--status", "failed") == []

    code, out, err = run(capsys, config_of(gateway), "sessions", "list", "--status", "closed")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split() == [
        "ID",
        "PROVIDER",
        "STATUS",
        "OWNER",
        "WORKSPACE",
        "UPDATED_AT",
        "LAST_SEQ",
    ]
    assert len(rows) == 1
    assert rows[0].split()[:5] == [
        created[0],
        "claude_code",
        "closed",
        "admin",
        str(gateway.workspace),
    ]


@pytest.mark.parametrize(
    "args",
    [["--status", "bogus"], ["--status", "idle,bogus"], ["--limit", "0"], ["--limit", "x"]],
)
def test_sessions_list_refuses_bad_arguments_with_exit_2(
    gateway: FileTokenGateway, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--config", str(config_of(gateway)), "sessions", "list", *args])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if "bogus" in args[1]:
        assert "unknown session status 'bogus'" in err
        assert "awaiting_approval" in err  # the valid ones are listed
    else:
        assert "not a positive whole number" in err


def test_sessions_list_refuses_a_database_without_this_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    config = tmp_path / "gateway.toml"
    config.write_text(to_toml({"storage": {"data_dir": str(data)}, "workspaces": {"roots": ["/"]}}))

    code, out, err = run(capsys, config, "sessions", "list")
    assert (code, out) == (1, "")
    assert "no database at" in err
    assert "agent-gateway migrate" in err
    assert not (data / "gateway.db").exists()  # listing creates nothing

    data.mkdir()
    db = sqlite3.connect(data / "gateway.db")
    db.execute("CREATE TABLE unrelated (x)")
    db.close()
    code, out, err = run(capsys, config, "sessions", "list")
    assert (code, out) == (2, "")
    assert "has no schema: `agent-gateway serve` creates it, or run `agent-gateway migrate`" in err
