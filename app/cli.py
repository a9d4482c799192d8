"""``agent-gateway``: serve, migrate, cleanup, doctor, the admin commands (token, sessions,
probe; implemented in ``app.admin``) and ``acp``, the editor's relay (``agent_gateway_acp``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

from app import __version__
from app.admin import (
    PROBE_TIMEOUT_S,
    SESSION_STATUSES,
    list_sessions,
    probe,
    rotate_token,
    session_statuses,
    show_token,
)
from app.doctor import run_doctor
from app.doctor.report import as_json, render
from app.listening import AddressUnavailable
from app.providers.sandboxing import forget_homes
from app.runtime.history import history_for
from app.runtime.worktrees import forget_worktrees
from app.settings import ConfigError, Settings, load_settings
from app.store.db import create_engine
from app.store.repository import Store
from app.store.retention import cleanup
from app.store.schema import AlreadyServed, SchemaError, check_schema, migrate, schema_head

API_VERSION = "v1"
"""The HTTP API's version: the prefix of its routes (``/v1/sessions``)."""

EXIT_OK = 0
EXIT_FAILED = 1
"""The command ran and failed (details on stderr)."""
EXIT_UNUSABLE = 2
"""Unusable configuration, database schema or arguments."""
EXIT_START_FAILED = 3
"""``serve``: the app failed to start after its configuration was accepted (the log says
why; uvicorn's own code for a failed start-up)."""
EXIT_ADDRESS_UNAVAILABLE = 4
"""``serve``: the address cannot be listened on (the port is in use, say)."""
EXIT_ALREADY_SERVED = 5
"""``serve``: another gateway already serves this database (this data directory)."""

EXIT_STATUSES = (
    "Exit status: 0 success; 1 the command ran and failed (details on stderr);\n"
    "2 unusable configuration, database schema or arguments; for serve also:\n"
    "3 the gateway failed to start (the log says why), 4 the address cannot be listened\n"
    "on (the port is in use), 5 another gateway already serves this data directory."
)


class _Version(argparse.Action):
    """``--version``: the gateway's version, its HTTP API's and its database schema's."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help="print the version (of the gateway, its HTTP API and database schema) and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        sys.stdout.write(version_text() + "\n")
        parser.exit()


def version_text() -> str:
    """``agent-gateway 0.1.0 (HTTP API v1, database schema revision 0011)``."""
    return (
        f"agent-gateway {__version__} (HTTP API {API_VERSION}, database schema revision "
        f"{schema_head()})"
    )


def _global_options(parser: argparse.ArgumentParser, *, default: object) -> None:
    """The options every command takes, before or after its name (``default``: the value
    when absent; SUPPRESS in a command's parser, so that it keeps the one given before)."""
    parser.add_argument(
        "--config",
        type=Path,
        default=default,
        metavar="FILE",
        help="TOML configuration file (or GATEWAY_CONFIG)",
    )
    parser.add_argument("--version", action=_Version)


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
            "--config and --version may come before or after the command.\n"
            f"{EXIT_STATUSES}\n"
            "Run `agent-gateway <command> --help` for one command."
        ),
        formatter_class=formatter,
    )
    _global_options(parser, default=None)
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, default=argparse.SUPPRESS)

    def command(
        group: argparse._SubParsersAction[argparse.ArgumentParser],
        name: str,
        summary: str,
        description: str,
        epilog: str,
    ) -> argparse.ArgumentParser:
        return group.add_parser(
            name,
            help=summary,
            description=description,
            epilog=epilog,
            formatter_class=formatter,
            parents=[common],
        )

    serve = command(
        commands,
        "serve",
        "run the gateway",
        "Serve the API on server.host:server.port until SIGTERM or SIGINT.",
        "Without server.token, the admin token is read from <storage.data_dir>/token, or\n"
        "generated there (mode 600) and shown once, on a terminal only (`agent-gateway\n"
        "token show` prints it any time). A host other than loopback is refused while no\n"
        "token exists yet: configure server.token or run `agent-gateway token rotate`\n"
        "first. Refuses to run as root unless server.allow_root.\n"
        "A new database is created and an older one upgraded before serving (one process at a\n"
        "time); a database migrated by a newer gateway is refused. Once listening, it says\n"
        "where the console and the token are and which agents are ready.\n"
        "Exit status: 0 after a graceful stop, 2 when the configuration or schema is unusable,\n"
        "3 when the app fails to start, 4 when the address cannot be listened on (the port is\n"
        "in use), 5 when another gateway already serves this data directory.",
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
            from app.serve import serve  # the app and its server; not for the other commands

            return serve(settings, host=args.host, port=args.port, config=args.config)
        if args.command == "migrate":
            migration = asyncio.run(migrate(settings.storage.database_url))
            print(migration.describe(settings.storage.database_url))
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
    except AlreadyServed as exc:
        return _fail(exc, EXIT_ALREADY_SERVED)
    except (ConfigError, SchemaError) as exc:
        return _fail(exc, EXIT_UNUSABLE)
    except AddressUnavailable as exc:
        return _fail(exc, EXIT_ADDRESS_UNAVAILABLE)


def _fail(exc: Exception, code: int) -> int:
    """Say why in one line (or one per setting) on stderr; return the exit status."""
    sys.stderr.write(f"agent-gateway: {exc}\n")
    sys.stderr.flush()
    return code


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


if __name__ == "__main__":
    raise SystemExit(main())
