"""``agent-gateway``: serve, migrate, cleanup and doctor."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from app.api.security import load_or_create_token
from app.doctor import render, run_doctor
from app.observability.logs import configure_logging
from app.redaction import Redactor, install_log_redaction, secrets_of
from app.settings import ConfigError, Settings, load_settings
from app.store.db import SchemaError, check_schema, create_engine, upgrade
from app.store.retention import cleanup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agent-gateway", description=__doc__)
    parser.add_argument("--config", type=Path, help="TOML configuration file (or GATEWAY_CONFIG)")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument("--host", help="override server.host")
    serve.add_argument("--port", type=int, help="override server.port")
    commands.add_parser("migrate", help="upgrade the database schema to this version")
    commands.add_parser("cleanup", help="delete bindings past storage.retention_days now")
    commands.add_parser("doctor", help="check every provider and say how to fix what fails")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config)
        if args.command == "serve":
            return _serve(settings, host=args.host, port=args.port)
        if args.command == "migrate":
            upgrade(settings.storage.database_url)
            print(f"database at {settings.storage.database_url} is up to date")
            return 0
        if args.command == "doctor":
            return asyncio.run(_doctor(settings))
        return asyncio.run(_cleanup(settings))
    except (ConfigError, SchemaError) as exc:
        print(f"agent-gateway: {exc}", file=sys.stderr)
        return 2


async def _cleanup(settings: Settings) -> int:
    engine = create_engine(settings.storage.database_url)
    try:
        await check_schema(engine)
        report = await cleanup(
            engine,
            retention_days=settings.storage.retention_days,
            now=datetime.now(UTC),
            max_events_per_session=settings.storage.max_events_per_session,
        )
    finally:
        await engine.dispose()
    print(
        f"deleted {report.bindings_deleted} bindings and {report.events_deleted} events; "
        f"closed {report.sessions_closed} sessions; "
        f"pruned {report.events_pruned} events past storage.max_events_per_session"
    )
    return 0


async def _doctor(settings: Settings) -> int:
    checks, code = await run_doctor(settings)
    print(render(checks, settings))
    return code


async def _check(settings: Settings) -> None:
    engine = create_engine(settings.storage.database_url)
    try:
        await check_schema(engine)
    finally:
        await engine.dispose()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def root_refusal(euid: int, *, allow_root: bool) -> str | None:
    """Why ``serve`` refuses to run as this user, or None when it may."""
    if euid != 0 or allow_root:
        return None
    return (
        "refusing to serve as root: the agent CLIs would run as root too. Run as an "
        "unprivileged user, or set server.allow_root = true (GATEWAY_SERVER__ALLOW_ROOT=true) "
        "to accept that"
    )


def _serve(settings: Settings, *, host: str | None, port: int | None) -> int:
    from app.main import create_app
    from app.server import run

    if host is not None or port is not None:
        server = settings.server.model_copy(
            update={k: v for k, v in {"host": host, "port": port}.items() if v is not None}
        )
        settings = settings.model_copy(update={"server": server})
    configure_logging(level=settings.log_level, log_format=settings.log_format)
    if not _is_loopback(settings.server.host) and settings.server.token is None:
        raise ConfigError(
            f"server.host {settings.server.host!r} is reachable from other machines: set an "
            "explicit server.token (or GATEWAY_SERVER__TOKEN) to serve beyond loopback"
        )
    refusal = root_refusal(os.geteuid(), allow_root=settings.server.allow_root)
    if refusal is not None:
        raise ConfigError(refusal)
    asyncio.run(_check(settings))
    configured = settings.server.token.get_secret_value() if settings.server.token else None
    token, generated = load_or_create_token(configured, settings.storage.data_dir)
    redactor = Redactor(secrets_of(settings, token))
    install_log_redaction(redactor)
    configure_logging(level=settings.log_level, log_format=settings.log_format, redactor=redactor)
    app = create_app(settings)
    shown_host = (
        f"[{settings.server.host}]" if ":" in settings.server.host else settings.server.host
    )
    print(f"Agent Gateway on http://{shown_host}:{settings.server.port}", file=sys.stderr)
    if generated:
        # Shown once, when it is created; afterwards only its location is printed.
        print(
            f"Token (new, saved in {settings.storage.data_dir / 'token'}): {token}", file=sys.stderr
        )
    elif configured:
        print("Token: the configured server.token", file=sys.stderr)
    else:
        print(f"Token: in {settings.storage.data_dir / 'token'}", file=sys.stderr)
    run(app, settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
