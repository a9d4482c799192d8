"""``agent-gateway``: serve, migrate, cleanup, doctor, the admin commands (token, sessions,
probe; implemented in ``app.admin``) and ``acp``, the editor's relay (``agent_gateway_acp``)."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.engine import make_url

from app.admin import (
    PROBE_TIMEOUT_S,
    SESSION_STATUSES,
    list_sessions,
    probe,
    rotate_token,
    session_statuses,
    show_token,
)
from app.api.security import load_or_create_token, read_token_file, token_path
from app.doctor import run_doctor
from app.doctor.report import as_json, render
from app.observability.logs import configure_logging
from app.providers.sandboxing import forget_homes
from app.redaction import Redactor, SecretMask, install_log_redaction, secrets_of
from app.runtime.history import history_for
from app.runtime.worktrees import forget_worktrees
from app.settings import ConfigError, Settings, load_settings
from app.store.db import create_engine
from app.store.files import private_directory
from app.store.repository import Store
from app.store.retention import cleanup
from app.store.schema import Migration, SchemaError, check_schema, hold_sole_server, migrate

log = logging.getLogger("app.cli")


def _parser() -> argparse.ArgumentParser:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="agent-gateway",
        description=(
            "Agent Gateway: one HTTP, SSE and WebSocket API in front of the coding-agent CLIs.\n"
            "Serve it, manage its database, its admin token and its sessions."
        ),
        epilog=(
            "Settings come from the TOML file (--config or GATEWAY_CONFIG) and GATEWAY_*\n"
            "variables (sections joined by '__', e.g. GATEWAY_SERVER__PORT=8765).\n"
            "Exit status: 0 success, 1 the command ran and failed (details on stderr),\n"
            "2 unusable configuration, database schema or arguments.\n"
            "Run `agent-gateway <command> --help` for one command."
        ),
        formatter_class=formatter,
    )
    parser.add_argument("--config", type=Path, help="TOML configuration file (or GATEWAY_CONFIG)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")

    def command(
        group: argparse._SubParsersAction[argparse.ArgumentParser],
        name: str,
        summary: str,
        description: str,
        epilog: str,
    ) -> argparse.ArgumentParser:
        return group.add_parser(
            name, help=summary, description=description, epilog=epilog, formatter_class=formatter
        )

    serve = command(
        commands,
        "serve",
        "run the gateway",
        "Serve the API on server.host:server.port until SIGTERM or SIGINT.",
        "Without server.token, the admin token is read from <storage.data_dir>/token, or\n"
        "generated there (mode 600) and printed once on the first start. A host other than\n"
        "loopback is refused while no token exists yet: configure server.token or run\n"
        "`agent-gateway token rotate` first. Refuses to run as root unless server.allow_root.\n"
        "A new database is created and an older one upgraded before serving (one process at a\n"
        "time); a database migrated by a newer gateway is refused.\n"
        "Exit status: 0 after a graceful stop, 2 when the configuration or schema is unusable.",
    )
    serve.add_argument("--host", help="override server.host")
    serve.add_argument("--port", type=int, help="override server.port")
    command(
        commands,
        "migrate",
        "upgrade the database schema to this version",
        "Upgrade the database (storage.url, default <storage.data_dir>/gateway.db) to the\n"
        "schema this version needs, creating it if missing. `serve` does the same by itself;\n"
        "this is for operators who migrate as a separate step.",
        "Safe to run again, and beside a starting gateway (one of them migrates, the other\n"
        "waits). Prints where the database is and what changed. Exit status 2 when a newer\n"
        "gateway has migrated the database.",
    )
    command(
        commands,
        "cleanup",
        "delete bindings past storage.retention_days now",
        "Run the retention task once: delete thread bindings unused for\n"
        "storage.retention_days with their ended sessions' events, and prune events past\n"
        "storage.max_events_per_session.",
        "Prints what it deleted. Exit status 2 when the database schema is not this version's.",
    )
    doctor = command(
        commands,
        "doctor",
        "check every provider and say how to fix what fails",
        "Check every configured provider (its CLI installed and its version, a credential in\n"
        "a form its CLI reads, its custom model endpoint resolving and answering, its sandbox)\n"
        "and the gateway (limits, snapshots, tracing, storage). Never prints a secret.",
        "Prints one line per check with the fix for each failure, then the verdict. Exit\n"
        "status 1 when the default provider or a fallback cannot run (no credential counts)\n"
        "or a gateway check fails, 0 otherwise.",
    )
    doctor.add_argument(
        "--json", action="store_true", help="print one JSON document instead of the table"
    )
    doctor.add_argument(
        "--offline",
        action="store_true",
        help="do not contact the model endpoints (their checks say: not checked)",
    )

    token = command(
        commands,
        "token",
        "show or rotate the admin token",
        "The admin token is the bearer key with access to every session: server.token when\n"
        "configured (file or GATEWAY_SERVER__TOKEN), else the token in\n"
        "<storage.data_dir>/token.",
        "Run `agent-gateway token show --help` or `agent-gateway token rotate --help`.",
    )
    token_commands = token.add_subparsers(dest="action", required=True, metavar="action")
    command(
        token_commands,
        "show",
        "print the admin token",
        "Print the admin token on stdout, alone on its line, e.g.\n"
        '  curl -H "Authorization: Bearer $(agent-gateway token show)" ...',
        "Exit status 1 (with how to create one on stderr) when there is no token yet.",
    )
    command(
        token_commands,
        "rotate",
        "replace the token file with a new random token",
        "Write a new random token to <storage.data_dir>/token (atomically, mode 600) and\n"
        "print it once on stdout. A running gateway accepts the new token from its next\n"
        "request and refuses the old one; no restart is needed.",
        "Exit status 2 when server.token is configured: that token is changed in the\n"
        "configuration, not here. Also creates the first token before serving beyond loopback.",
    )

    sessions = command(
        commands,
        "sessions",
        "inspect the stored sessions",
        "Read the gateway's database (a running gateway may keep serving meanwhile).",
        "Run `agent-gateway sessions list --help`.",
    )
    session_commands = sessions.add_subparsers(dest="action", required=True, metavar="action")
    listing = command(
        session_commands,
        "list",
        "print the most recently updated sessions",
        "Print sessions, most recently updated first, as a table: id, provider, status,\n"
        "owner (the API key that created it), workspace, updated_at (UTC), last_seq.",
        f"Statuses: {', '.join(SESSION_STATUSES)}.\n"
        "Exit status 1 when there is no database yet, 2 for an unknown status or a database\n"
        "schema of another version.",
    )
    listing.add_argument(
        "--status",
        action="append",
        type=_statuses,
        default=[],
        metavar="STATUS[,STATUS]",
        help="only sessions in these statuses (repeatable or a comma list)",
    )
    listing.add_argument(
        "--limit", type=_positive, default=50, help="at most this many sessions (default 50)"
    )
    listing.add_argument(
        "--json", action="store_true", help="print one JSON array instead of the table"
    )

    commands.add_parser(
        "acp",
        # Its options are the relay's own (agent_gateway_acp.cli), parsed by it: --help too.
        add_help=False,
        help="an editor's ACP agent: relay its stdio to a gateway",
    )

    probe_command = command(
        commands,
        "probe",
        "health check: is the local gateway ready?",
        "GET /readyz on this machine's gateway (server.port; 127.0.0.1 for a 0.0.0.0 bind,\n"
        "::1 for ::, else server.host) with the admin token, for container health checks.",
        "Exit status 0 when it answers 200; 1 otherwise, with one line on stderr saying why\n"
        "(not listening, timed out, token refused, not ready). Prints nothing on success.",
    )
    probe_command.add_argument(
        "--timeout",
        type=float,
        default=PROBE_TIMEOUT_S,
        metavar="SECONDS",
        help=f"give up after this long (default {PROBE_TIMEOUT_S:g})",
    )
    return parser


def _statuses(value: str) -> list[str]:
    try:
        return session_statuses(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number")
    return number


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "acp":
        return _acp(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    from app.providers.catalog import resolve  # the providers' names; not for --help

    try:
        settings = resolve(load_settings(args.config))
        if args.command == "serve":
            return _serve(settings, host=args.host, port=args.port)
        if args.command == "migrate":
            migration = asyncio.run(migrate(settings.storage.database_url))
            print(_migrated(settings.storage.database_url, migration))
            return 0
        if args.command == "doctor":
            return asyncio.run(_doctor(settings, in_json=args.json, offline=args.offline))
        if args.command == "token":
            if args.action == "show":
                return show_token(settings)
            return rotate_token(settings)
        if args.command == "sessions":
            statuses = [status for group in args.status for status in group]
            return list_sessions(settings, statuses=statuses, limit=args.limit, as_json=args.json)
        if args.command == "probe":
            return probe(settings, timeout_s=args.timeout)
        return asyncio.run(_cleanup(settings))
    except (ConfigError, SchemaError) as exc:
        print(f"agent-gateway: {exc}", file=sys.stderr)
        return 2


def _acp(argv: list[str]) -> int:
    """``agent-gateway acp``: the relay an editor starts (no settings, no database: it talks
    to a gateway, perhaps this machine's, over its URL)."""
    try:
        from agent_gateway_acp.cli import main as relay
    except ImportError:
        print(
            "agent-gateway: the ACP relay (agent_gateway_acp) is not installed with this "
            "gateway; reinstall the gateway, or run agent-gateway-acp",
            file=sys.stderr,
        )
        return 2
    return relay(argv, prog="agent-gateway acp")


async def _cleanup(settings: Settings) -> int:
    engine = create_engine(settings.storage.database_url, timeout_s=settings.storage.timeout_s)
    try:
        await check_schema(engine)
        report = await cleanup(
            engine,
            retention_days=settings.storage.retention_days,
            now=datetime.now(UTC),
            max_events_per_session=settings.storage.max_events_per_session,
        )
        store = Store(engine)
        try:
            worktrees = await forget_worktrees(settings, store, report.forgotten)
        finally:
            store.close()
    finally:
        await engine.dispose()
    homes = forget_homes(settings, report.forgotten)
    records = history_for(settings).forget(list(report.forgotten))
    print(
        f"deleted {report.bindings_deleted} bindings, {report.events_deleted} events, "
        f"{homes} CLI homes, {worktrees} worktrees (their branches kept) and {records} "
        "workspace records; "
        f"closed {report.sessions_closed} sessions; "
        f"pruned {report.events_pruned} events past storage.max_events_per_session; "
        f"forgot {report.idempotency_keys_deleted} expired idempotency keys"
    )
    return 0


async def _doctor(settings: Settings, *, in_json: bool, offline: bool) -> int:
    report = await run_doctor(settings, offline=offline)
    print(as_json(report) if in_json else render(report))
    return report.exit_code


def _migrated(url: str, migration: Migration) -> str:
    url = make_url(url).render_as_string(hide_password=True)
    if not migration.changed:
        return f"database at {url} is up to date (schema revision {migration.after})"
    if not migration.before:
        return f"database at {url} created at schema revision {migration.after}"
    before = ", ".join(migration.before)
    return f"database at {url} upgraded from schema revision {before} to {migration.after}"


def _prepare_database(settings: Settings) -> None:
    """Create or upgrade the database before serving; refuse one a newer gateway migrated."""
    url = settings.storage.database_url
    private_directory(settings.storage.data_dir)
    migration = asyncio.run(migrate(url))
    if migration.changed:
        log.info(_migrated(url, migration), extra={"event": "database.migrated"})


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


def exposure_refusal(settings: Settings) -> str | None:
    """Why ``serve`` refuses ``server.host``, or None when it may bind there.

    Beyond loopback, a token must exist before the first start: configured, or in the
    token file (written by an operator or ``token rotate``). Otherwise serving would
    generate a token that nobody has seen yet on a reachable port.
    """
    host = settings.server.host
    if _is_loopback(host) or settings.server.token is not None:
        return None
    if read_token_file(token_path(settings.storage.data_dir)) is not None:
        return None
    return (
        f"server.host {host!r} is reachable from other machines and no admin token exists "
        "yet. Set server.token (or GATEWAY_SERVER__TOKEN), or create the token file with "
        "`agent-gateway token rotate` (it prints the token), then serve again"
    )


def _serve(settings: Settings, *, host: str | None, port: int | None) -> int:
    from app.api.security import ADMIN
    from app.main import budget_refusal, create_app, git_refusal
    from app.providers.catalog import cli_secrets
    from app.server import run
    from app.webhooks.endpoints import unknown_keys

    if host is not None or port is not None:
        server = settings.server.model_copy(
            update={k: v for k, v in {"host": host, "port": port}.items() if v is not None}
        )
        settings = settings.model_copy(update={"server": server})
    configure_logging(level=settings.log_level, log_format=settings.log_format)
    exposure = exposure_refusal(settings)
    if exposure is not None:
        raise ConfigError(exposure)
    refusal = root_refusal(os.geteuid(), allow_root=settings.server.allow_root)
    if refusal is not None:
        raise ConfigError(refusal)
    if (budgets := budget_refusal(settings)) is not None:
        raise ConfigError(budgets)
    # Before the server starts, so that it is refused like any other setting (the app's
    # start-up checks it again, for an app made without this command).
    git = asyncio.run(git_refusal(settings))
    if git is not None:
        raise ConfigError(git)
    hooks = unknown_keys(settings.webhooks, [ADMIN, *(k.name for k in settings.server.api_keys)])
    if hooks is not None:
        raise ConfigError(hooks)
    # Held until the process exits: no second gateway serves the same database (unless both
    # are replicas of a cluster).
    serving = hold_sole_server(  # noqa: F841
        settings.storage.database_url, clustered=settings.cluster.redis_url is not None
    )
    _prepare_database(settings)
    configured = settings.server.token.get_secret_value() if settings.server.token else None
    token, generated = load_or_create_token(configured, settings.storage.data_dir)
    mask = SecretMask(secrets_of(settings, token, cli_secrets=cli_secrets(settings, os.environ)))
    redactor = Redactor(mask)  # shared: a token the app reads later is masked in the log too
    install_log_redaction(redactor)
    configure_logging(level=settings.log_level, log_format=settings.log_format, redactor=redactor)
    app = create_app(settings, mask=mask)
    _announce(settings, token, generated=generated, configured=configured is not None)
    run(app, settings)
    return 0


def _announce(settings: Settings, token: str, *, generated: bool, configured: bool) -> None:
    """Say where the gateway listens and where its token is. A token generated just now is
    printed once, and only to a terminal: never into a log that is collected."""
    host = settings.server.host
    url = f"http://{f'[{host}]' if ':' in host else host}:{settings.server.port}"
    token_file = settings.storage.data_dir / "token"
    if configured:
        where = "the configured server.token"
    elif generated:
        where = f"new, saved in {token_file} (print it with `agent-gateway token show`)"
    else:
        where = f"in {token_file}"
    log.info("Agent Gateway on %s; token: %s", url, where, extra={"event": "server.starting"})
    if generated and sys.stderr.isatty():
        print(f"Token (new, saved in {token_file}): {token}", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
