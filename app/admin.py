"""The admin commands behind ``agent-gateway token``, ``sessions`` and ``probe``.

Each command prints its result on stdout (a token, a table, JSON) and every explanation on
stderr, so its output can be captured by a script, and returns the process's exit status.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import get_args

import httpx
from sqlalchemy import select
from sqlalchemy.engine import make_url

from app.api.security import read_token_file, token_path, write_token_file
from app.records import SessionStatus
from app.settings import Settings
from app.store.db import create_engine, session_factory
from app.store.schema import check_schema
from app.store.tables import SessionRow

SESSION_STATUSES: tuple[str, ...] = get_args(SessionStatus)
PROBE_TIMEOUT_S = 5.0


def _say(message: str) -> None:
    sys.stderr.write(f"agent-gateway: {message}\n")


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _configured_token(settings: Settings) -> str | None:
    token = settings.server.token
    return token.get_secret_value() if token is not None else None


def admin_token(settings: Settings) -> str | None:
    """The admin token: ``server.token`` when configured, else the token file's, else None."""
    return _configured_token(settings) or read_token_file(token_path(settings.storage.data_dir))


# --- token ---------------------------------------------------------------------------------


def show_token(settings: Settings) -> int:
    """Print the admin token; 1 when there is none yet."""
    token = admin_token(settings)
    if token is None:
        path = token_path(settings.storage.data_dir)
        state = "holds no usable token" if path.exists() else "does not exist"
        _say(
            f"no admin token yet: server.token is not configured and {path} {state}. "
            "Create one with `agent-gateway token rotate` (or start `agent-gateway serve` on "
            "loopback once), or configure server.token / GATEWAY_SERVER__TOKEN"
        )
        return 1
    _out(token)
    return 0


def rotate_token(settings: Settings) -> int:
    """Write a new token file and print the token; 2 when the token comes from the config."""
    if _configured_token(settings) is not None:
        _say(
            "the admin token comes from the configuration (server.token or "
            "GATEWAY_SERVER__TOKEN): change it there and restart the gateway; "
            "nothing was written"
        )
        return 2
    path = token_path(settings.storage.data_dir)
    try:
        token = write_token_file(path)
    except OSError as exc:
        _say(f"cannot write {path}: {exc.strerror or exc}")
        return 1
    _out(token)
    _say(
        f"new admin token saved in {path} (mode 600); a running gateway accepts it from its "
        "next request and refuses the old one. It is shown only now: "
        "`agent-gateway token show` prints it again"
    )
    return 0


# --- sessions ------------------------------------------------------------------------------


def session_statuses(value: str) -> list[str]:
    """``--status`` values: one status or a comma list, each one of the session statuses."""
    statuses = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [status for status in statuses if status not in SESSION_STATUSES]
    if unknown or not statuses:
        raise ValueError(
            f"unknown session status {', '.join(map(repr, unknown)) or repr(value)}: "
            f"choose from {', '.join(SESSION_STATUSES)}"
        )
    return statuses


async def recent_sessions(
    settings: Settings, *, statuses: Sequence[str], limit: int
) -> list[SessionRow]:
    """The ``limit`` most recently updated sessions, newest first (``SchemaError`` when the
    database is not at this version's schema)."""
    engine = create_engine(settings.storage.database_url, timeout_s=settings.storage.timeout_s)
    try:
        await check_schema(engine)
        query = select(SessionRow).order_by(SessionRow.updated_at.desc()).limit(limit)
        if statuses:
            query = query.where(SessionRow.status.in_(statuses))
        async with session_factory(engine)() as db:
            return list((await db.scalars(query)).all())
    finally:
        await engine.dispose()


def missing_database(settings: Settings) -> str | None:
    """Why there is nothing to read: a SQLite file that does not exist (not created here)."""
    url = make_url(settings.storage.database_url)
    database = url.database
    if url.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if database.startswith("file:") or Path(database).is_file():
        return None
    return f"no database at {database}: run `agent-gateway migrate` (or serve) first"


def _public(row: SessionRow) -> dict[str, str | int | None]:
    return {
        "id": row.id,
        "provider": row.provider,
        "status": row.status,
        "owner": row.owner,
        "workspace": row.workspace,
        "model": row.model,
        "created_at": row.created_at.isoformat(),
        "updated_at": row.updated_at.isoformat(),
        "last_seq": row.last_seq,
    }


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")


def render_sessions(rows: Sequence[SessionRow]) -> str:
    """A plain aligned table: id, provider, status, owner, workspace, updated_at, last_seq."""
    header = ("ID", "PROVIDER", "STATUS", "OWNER", "WORKSPACE", "UPDATED_AT", "LAST_SEQ")
    table = [header] + [
        (
            row.id,
            row.provider,
            row.status,
            row.owner or "-",
            row.workspace,
            _when(row.updated_at),
            str(row.last_seq),
        )
        for row in rows
    ]
    widths = [max(len(line[column]) for line in table) for column in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    )


def list_sessions(settings: Settings, *, statuses: Sequence[str], limit: int, as_json: bool) -> int:
    """Print the newest-updated sessions as a table or one JSON array."""
    missing = missing_database(settings)
    if missing is not None:
        _say(missing)
        return 1
    found = asyncio.run(recent_sessions(settings, statuses=statuses, limit=limit))
    if as_json:
        _out(json.dumps([_public(row) for row in found], indent=2))
        return 0
    if not found:
        matching = f" with status {', '.join(statuses)}" if statuses else ""
        _say(f"no sessions{matching}")
        return 0
    _out(render_sessions(found))
    return 0


# --- probe ---------------------------------------------------------------------------------


def probe_address(host: str) -> str:
    """Where to reach a gateway bound to ``host`` from its own machine (the URL's host part).

    A wildcard bind is reached on loopback of the same family; a specific address or name
    is used as it is.
    """
    if host in ("", "0.0.0.0"):  # noqa: S104 - matching the wildcard, not binding to it
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host
    return f"[{address}]" if address.version == 6 else str(address)


def probe(settings: Settings, *, timeout_s: float = PROBE_TIMEOUT_S) -> int:
    """GET /readyz with the admin token: 0 when the gateway answers 200, else 1."""
    port = settings.server.port
    url = f"http://{probe_address(settings.server.host)}:{port}/readyz"
    if port == 0:
        _say("probe: server.port is 0 (a port chosen at start): set the port to probe it")
        return 1
    token = admin_token(settings)
    if token is None:
        _say(
            "probe: no admin token (server.token is not set and the token file has none): "
            "the gateway has not created one yet"
        )
        return 1
    headers = {
        "Authorization": f"Bearer {token}",
        # The probe runs on the gateway's own machine; loopback names always pass the
        # Host allow-list, whichever address the gateway is bound to.
        "Host": f"localhost:{port}",
    }
    try:
        # trust_env=False: a proxy from the environment must not see the token.
        with httpx.Client(timeout=timeout_s, trust_env=False) as client:
            response = client.get(url, headers=headers)
    except httpx.TimeoutException:
        _say(f"probe: {url} did not answer within {timeout_s:g} s")
        return 1
    except httpx.TransportError as exc:
        _say(f"probe: cannot reach {url}: {exc or type(exc).__name__}")
        return 1
    if response.status_code == 200:
        return 0
    _say(f"probe: {url} answered {response.status_code}: {_why(response)}")
    return 1


def _why(response: httpx.Response) -> str:
    if response.status_code in (401, 429):
        return "the admin token was refused (is this the gateway of this configuration?)"
    try:
        body = response.json()
    except ValueError:
        return response.reason_phrase or "unexpected answer"
    if isinstance(body, dict) and body.get("reasons") and isinstance(body["reasons"], list):
        return "not ready: " + "; ".join(str(reason) for reason in body["reasons"])
    if isinstance(body, dict) and isinstance(body.get("checks"), dict):
        failing = [f"{name} {state}" for name, state in body["checks"].items() if state != "ok"]
        return "not ready: " + ", ".join(failing)
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        return str(body["detail"])
    return response.reason_phrase or "unexpected answer"
