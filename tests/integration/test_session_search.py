"""Finding a session: its title (``metadata.title``, else its first prompt), and the gateway
searching and filtering the list (``q``, ``provider``, ``status``) however old the match is,
on a running gateway with the fake ``claude`` and the fake ``codex`` app-server; and the
migration that titles the sessions stored before titles existed, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from app.records import TITLE_MAX_CHARS
from app.store.schema import upgrade
from tests.dbservers import PostgresServer
from tests.fakes.gateway import FakeGatewayFactory, fake_server_in
from tests.gateway import follow, is_turn_end
from tests.integration.callers import ALICE, PROBLEM


def new(client: httpx.Client, workspace: Path, **body: Any) -> dict[str, Any]:
    created = client.post("/v1/sessions", json={"workspace": str(workspace), **body})
    assert created.status_code == 201, created.text
    session: dict[str, Any] = created.json()
    return session


def ids(client: httpx.Client, **params: Any) -> list[str]:
    page = client.get("/v1/sessions", params={"limit": 500, **params})
    assert page.status_code == 200, page.text
    return [s["id"] for s in page.json()["sessions"]]


def ask(client: httpx.Client, session_id: str, prompt: str) -> None:
    sent = client.post(f"/v1/sessions/{session_id}/turns", json={"prompt": prompt})
    assert sent.status_code == 202, sent.text
    follow(client, session_id, is_turn_end)


def test_a_session_is_titled_by_its_metadata_else_by_its_first_prompt(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway().start()
    with gateway.client() as client:
        named = new(client, gateway.workspace, metadata={"title": "  Release\n notes  "})
        assert named["title"] == "Release notes"
        untitled = new(client, gateway.workspace, metadata={"title": 7})
        assert untitled["title"] is None
        ask(client, untitled["id"], "Fix the login page\n\nIt fails on Safari.")
        ask(client, untitled["id"], "And the signup page")  # the first prompt stays the title
        titled = client.get(f"/v1/sessions/{untitled['id']}").json()
        assert titled["title"] == "Fix the login page It fails on Safari."
        ask(client, named["id"], "a prompt does not replace a title")
        listed = {s["id"]: s["title"] for s in client.get("/v1/sessions").json()["sessions"]}
        assert listed == {named["id"]: "Release notes", untitled["id"]: titled["title"]}

        long = new(client, gateway.workspace)
        ask(client, long["id"], "word " * 100)
        cut = client.get(f"/v1/sessions/{long['id']}").json()["title"]
        assert len(cut) == TITLE_MAX_CHARS
        assert cut.endswith("…")


def test_the_gateway_searches_every_page_and_combines_the_filters(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    codex = fake_server_in(tmp_path / "bin", "codex")
    gateway = make_fake_gateway(codex={"enabled": True, "executable": str(codex)}).start()
    with gateway.client() as client:
        oldest = new(client, gateway.workspace, metadata={"title": "Migrate the 100% billing_job"})
        filler = [new(client, gateway.workspace)["id"] for _ in range(12)]
        new(client, gateway.workspace, metadata={"title": "Decoy gXj 1000"})  # for _ and %
        on_codex = new(
            client, gateway.workspace, provider="codex", metadata={"title": "Billing dashboard"}
        )
        newest = new(client, gateway.workspace, metadata={"title": "Billing export"})

        # Case-insensitive, every word anywhere, newest first, found past any first page.
        assert ids(client, q="BILLING") == [newest["id"], on_codex["id"], oldest["id"]]
        assert ids(client, q="billing job", limit=1) == [oldest["id"]]
        assert ids(client, q="migrate dashboard") == []
        # % and _ are themselves, not patterns.
        assert ids(client, q="100%") == [oldest["id"]]
        assert ids(client, q="g_j") == [oldest["id"]]
        assert ids(client, q="%") == [oldest["id"]]
        # The id and the workspace are searched too; a blank search is no search.
        assert ids(client, q=filler[3][-10:]) == [filler[3]]
        assert len(ids(client, q=gateway.workspace.name)) == 16
        assert len(ids(client, q="   ")) == 16

        assert ids(client, provider="codex") == [on_codex["id"]]
        assert ids(client, provider="codex", q="export") == []
        assert ids(client, provider="nobody") == []
        client.delete(f"/v1/sessions/{newest['id']}").raise_for_status()
        assert ids(client, status="closed", q="billing") == [newest["id"]]
        assert ids(client, status="idle", q="billing") == [on_codex["id"], oldest["id"]]

        # A search pages with ``before`` like the plain list.
        first = client.get("/v1/sessions", params={"q": "billing", "limit": 2}).json()
        after = first["sessions"][-1]["created_at"]
        assert ids(client, q="billing", limit=2, before=after) == [oldest["id"]]

        refused = client.get("/v1/sessions", params={"q": "x" * 201})
        assert refused.status_code == 422, refused.text
        assert refused.headers["content-type"] == PROBLEM
        assert refused.json()["errors"][0]["location"] == "query.q"


def test_a_search_never_finds_another_keys_sessions(make_fake_gateway: FakeGatewayFactory) -> None:
    gateway = make_fake_gateway(server={"api_keys": [{"name": "alice", "token": ALICE}]}).start()
    alice = {"Authorization": f"Bearer {ALICE}"}
    with (
        gateway.client() as admin,
        httpx.Client(base_url=gateway.base_url, headers=alice) as client,
    ):
        theirs = new(admin, gateway.workspace, metadata={"title": "quarterly report"})
        mine = new(client, gateway.workspace, metadata={"title": "quarterly report draft"})
        assert ids(client, q="quarterly") == [mine["id"]]
        assert ids(admin, q="quarterly") == [mine["id"], theirs["id"]]


# The migration: sessions stored at 0011 get their titles from 0012.

SESSION_COLUMNS = (
    "id, owner, provider, workspace, model, approval_mode, status, metadata, last_seq, "
    "created_at, updated_at, fence"
)


def alembic_upgrade(url: str, revision: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "alembic", "-x", f"url={url}", "upgrade", revision],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def stored_before_titles() -> list[str]:
    """SQL that stores three sessions as 0011 knew them: titled by metadata, by a first prompt
    (after a second one), and neither."""
    now = "'2026-11-01 10:00:00.000000'"
    rows = [
        ("ses_meta", json.dumps({"title": "From metadata"}), ["prompt ignored"]),
        ("ses_prompt", json.dumps({"other": 1}), ["First\nprompt", "second prompt"]),
        ("ses_none", "null", []),
    ]
    session_sql = f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ({{}})"  # noqa: S608
    turn_sql = (
        "INSERT INTO turns (id, session_id, seq_no, prompt, status, provider, created_at, "
        "attempts) VALUES ({})"
    )
    statements = []
    for sid, metadata, prompts in rows:
        values = (
            f"'{sid}', NULL, 'claude_code', '/w', NULL, 'ask', 'idle', '{metadata}', 0, "
            f"{now}, {now}, 0"
        )
        statements.append(session_sql.format(values))
        for number, prompt in enumerate(prompts, start=1):
            values = (
                f"'trn_{sid}_{number}', '{sid}', {number}, '{prompt}', 'completed', "
                f"'claude_code', {now}, 1"
            )
            statements.append(turn_sql.format(values))
    return statements


EXPECTED = {"ses_meta": "From metadata", "ses_prompt": "First prompt", "ses_none": None}


def test_the_migration_titles_sessions_stored_before_on_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "gateway.db"
    url = f"sqlite+aiosqlite:///{path}"
    alembic_upgrade(url, "0011")
    with sqlite3.connect(path) as db:
        for statement in stored_before_titles():
            db.execute(statement)
    upgrade(url)
    with sqlite3.connect(path) as db:
        found = dict(db.execute("SELECT id, title FROM sessions").fetchall())
    assert found == EXPECTED


def test_the_migration_titles_sessions_stored_before_on_postgres(postgres: PostgresServer) -> None:
    url = postgres.create_database("titles_before")
    alembic_upgrade(url, "0011")
    postgres.psql(";\n".join(stored_before_titles()), database="titles_before")
    upgrade(url)
    found = {
        row[0]: row[1] for row in postgres.query("titles_before", "SELECT id, title FROM sessions")
    }
    assert found == {sid: title or "" for sid, title in EXPECTED.items()}  # psql prints NULL as ""
