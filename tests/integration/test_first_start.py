"""A first start as a new user meets it: ``agent-gateway serve`` on a database nobody migrated.

Real gateway processes (``python -m app serve``) on real SQLite files: ``serve`` creates the
schema itself, two processes starting on one new database migrate it once and both serve, and a
database a newer gateway migrated is refused with both revisions named and left untouched.
Before anything is created, ``serve`` refuses to run as root (T1) and to listen beyond
loopback while no token exists (T2).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from app.store.schema import MIGRATIONS_DIR
from tests.fakes.gateway import FakeGateway, fake_gateway_at
from tests.gateway import ROOT, TOKEN, migrate_at_once

HEAD = max(path.name.split("_", 1)[0] for path in (MIGRATIONS_DIR / "versions").glob("0*.py"))


def log_lines(gateway: FakeGateway) -> list[dict[str, Any]]:
    return [json.loads(line) for line in gateway.log().splitlines() if line.startswith("{")]


def events(gateway: FakeGateway, name: str) -> list[dict[str, Any]]:
    return [line for line in log_lines(gateway) if line.get("event") == name]


def revision(database: Path) -> list[str]:
    with closing(sqlite3.connect(database)) as connection:
        rows = connection.execute("SELECT version_num FROM alembic_version").fetchall()
    return [row[0] for row in rows]


@contextmanager
def stopping(*gateways: FakeGateway) -> Iterator[None]:
    try:
        yield
    finally:
        for gateway in gateways:
            gateway.stop()


def test_serve_creates_the_schema_of_a_new_database(tmp_path: Path) -> None:
    gateway = fake_gateway_at(tmp_path)
    database = gateway.data_dir / "gateway.db"
    assert not database.exists()
    with stopping(gateway):
        gateway.start()  # no `agent-gateway migrate` before it
        with gateway.client() as client:
            created = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
            assert created.status_code == 201, created.text
        assert revision(database) == [HEAD]
        [migrated] = events(gateway, "database.migrated")
        assert f"created at schema revision {HEAD}" in migrated["msg"]
        gateway.stop()
        gateway.start()  # the same database again: nothing to migrate, the session is there
        assert events(gateway, "database.migrated") == []
        with gateway.client() as client:
            assert len(client.get("/v1/sessions").json()["sessions"]) == 1


def test_a_second_gateway_on_one_sqlite_file_is_refused_while_the_first_serves(
    tmp_path: Path,
) -> None:
    first = fake_gateway_at(tmp_path)
    second = FakeGateway(data_dir=first.data_dir, config=first.config, config_name="second.toml")
    second.spawn_log, second.workspace = first.spawn_log, first.workspace
    with stopping(first, second):
        first.start()
        refused = second.command("serve", check=False)
        assert refused.returncode == 5, refused.stdout + refused.stderr
        assert "another gateway already serves" in refused.stderr
        assert "[cluster]" in refused.stderr
        assert "Traceback" not in refused.stderr
        with first.client() as client:  # the first one is untouched
            created = client.post("/v1/sessions", json={"workspace": str(first.workspace)})
            assert created.status_code == 201, created.text
        first.stop()
        second.start()  # the file is free once its gateway is gone, however it ended
        with second.client() as client:
            assert [s["id"] for s in client.get("/v1/sessions").json()["sessions"]] == [
                created.json()["id"]
            ]


def test_processes_migrating_one_new_sqlite_file_at_once_migrate_it_once(tmp_path: Path) -> None:
    gateway = fake_gateway_at(tmp_path)
    gateway.data_dir.mkdir(parents=True)
    said = migrate_at_once(gateway._env())  # the gateway's own configuration
    assert sum("created" in out for out in said) == 1, said
    assert revision(gateway.data_dir / "gateway.db") == [HEAD]


@pytest.mark.parametrize("command", ["serve", "migrate"])
def test_a_database_a_newer_gateway_migrated_is_refused_and_left_alone(
    tmp_path: Path, command: str
) -> None:
    gateway = fake_gateway_at(tmp_path)
    gateway.data_dir.mkdir(parents=True)
    gateway.migrate()
    database = gateway.data_dir / "gateway.db"
    with closing(sqlite3.connect(database)) as connection, connection:
        connection.execute("UPDATE alembic_version SET version_num = 'f00d'")
    refused = gateway.command(command, check=False)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert (
        f"is at revision f00d, which this gateway (schema revision {HEAD}) does not know"
        in refused.stderr
    )
    assert "Traceback" not in refused.stderr
    assert revision(database) == ["f00d"]


def test_migrate_says_what_it_did(tmp_path: Path) -> None:
    gateway = fake_gateway_at(tmp_path)
    gateway.data_dir.mkdir(parents=True)
    first = gateway.command("migrate")
    assert f"created at schema revision {HEAD}" in first.stdout
    again = gateway.command("migrate")
    assert f"is up to date (schema revision {HEAD})" in again.stdout


# --- T1: no root ---------------------------------------------------------------------------


def test_t1_serve_refuses_to_run_as_root_unless_allowed(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("runs only as root; tests/unit/test_token.py checks the rule with any euid")
    config = tmp_path / "gateway.toml"
    config.write_text(
        f'[server]\ntoken = "{TOKEN}"\nallow_root = false\n'
        f'[storage]\ndata_dir = "{tmp_path}"\n[workspaces]\nroots = ["{tmp_path}"]\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    refused = subprocess.run(
        [sys.executable, "-m", "app", "--config", str(config), "serve", "--port", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2
    assert "root" in refused.stderr
    assert "server.allow_root" in refused.stderr
    assert "GATEWAY_SERVER__ALLOW_ROOT" in refused.stderr
    assert "Traceback" not in refused.stderr


# --- T2: no network exposure before a token exists ------------------------------------------


def serve_on(tmp_path: Path, host: str) -> subprocess.CompletedProcess[str]:
    """``serve --host <host>`` with no server.token, data in ``tmp_path``, no database yet."""
    config = tmp_path / "gateway.toml"
    config.write_text(
        f"[server]\nallow_root = true\n"
        f'[storage]\ndata_dir = "{tmp_path}"\n[workspaces]\nroots = ["{tmp_path}"]\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    return subprocess.run(
        [sys.executable, "-m", "app", "--config", str(config), "serve", "--host", host],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_t2_non_loopback_bind_without_any_token_yet_refuses(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "192.0.2.10"):  # noqa: S104 - the refusal is the point
        refused = serve_on(tmp_path, host)
        assert refused.returncode == 2, refused.stderr
        assert "reachable from other machines" in refused.stderr
        assert "server.token" in refused.stderr
        assert "GATEWAY_SERVER__TOKEN" in refused.stderr
        assert "agent-gateway token rotate" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert not (tmp_path / "token").exists()
    assert not (tmp_path / "gateway.db").exists()  # refused before anything was created


def test_t2_a_token_file_made_before_the_start_counts_as_explicit(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("operator-token-0123456789abcdefghijklmnopqrstuvwxyz\n")
    # Serving stops at binding, after the exposure check (192.0.2.10 is a documentation
    # address no machine here has), before the database is made.
    passed = serve_on(tmp_path, "192.0.2.10")
    assert passed.returncode == 4, passed.stderr
    assert "reachable from other machines" not in passed.stderr
    assert "cannot listen on 192.0.2.10:" in passed.stderr
    assert "Traceback" not in passed.stderr
    assert not (tmp_path / "gateway.db").exists()
