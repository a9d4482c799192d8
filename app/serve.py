"""``agent-gateway serve``: refuse what cannot be served, hold the database, bind the address,
migrate, then serve, and once listening say where everything is (app/banner.py).

    settings refused ─────────────► ConfigError       (exit 2)
    another gateway on the data ──► AlreadyServed     (exit 5)
    address in use ───────────────► AddressUnavailable (exit 4)
    database of a newer gateway ──► SchemaError       (exit 2)
    serving … SIGTERM/SIGINT ─────► 0
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import shutil
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from app.admin import probe_address
from app.api.security import ADMIN, load_or_create_token, read_token_file, token_path
from app.banner import AgentState, Banner, TokenSource, late_line
from app.listening import bind
from app.main import budget_refusal, create_app, git_refusal
from app.observability.logs import chosen_format, configure_logging
from app.providers.catalog import cli_secrets
from app.providers.registry import ProviderRegistry
from app.redaction import Redactor, SecretMask, install_log_redaction, secrets_of
from app.server import run
from app.settings import ConfigError, Settings
from app.store.files import private_directory
from app.store.schema import hold_sole_server, migrate
from app.webhooks.endpoints import unknown_keys

log = logging.getLogger(__name__)

AGENTS_WAIT_S = 5.0
"""How long the start-up block waits for the agents' health checks; one that takes longer is
shown as still being checked, and said on a line of its own when it ends."""


def serve(settings: Settings, *, host: str | None, port: int | None, config: Path | None) -> int:
    """Serve until a signal stops it; 0 after a graceful stop. ``config`` is the file given
    with ``--config`` (named again in the command the banner shows)."""
    if host is not None or port is not None:
        server = settings.server.model_copy(
            update={k: v for k, v in {"host": host, "port": port}.items() if v is not None}
        )
        settings = settings.model_copy(update={"server": server})
    configure_logging(level=settings.log_level, log_format=settings.log_format)
    _refuse(settings)
    # Held until the process exits: no second gateway serves the same database (unless both
    # are replicas of a cluster).
    serving = hold_sole_server(  # noqa: F841
        settings.storage.database_url, clustered=settings.cluster.redis_url is not None
    )
    # Bound before the database is touched, so that a port in use is said at once.
    sockets = bind(settings.server.host, settings.server.port)
    try:
        _prepare_database(settings)
        configured = settings.server.token.get_secret_value() if settings.server.token else None
        token, generated = load_or_create_token(configured, settings.storage.data_dir)
        secrets = secrets_of(settings, token, cli_secrets=cli_secrets(settings, os.environ))
        mask = SecretMask(secrets)
        redactor = Redactor(mask)  # shared: a token the app reads later is masked in the log too
        install_log_redaction(redactor)
        configure_logging(
            level=settings.log_level, log_format=settings.log_format, redactor=redactor
        )
        app = create_app(settings, mask=mask)
        source: TokenSource = "configured" if configured else "generated" if generated else "file"
        announce = _announcer(
            app, settings, sockets, token=token, source=source, config=config, redactor=redactor
        )
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    run(app, settings, sockets=sockets, on_started=announce)
    return 0


def _refuse(settings: Settings) -> None:
    """Raise ``ConfigError`` for settings that must not be served."""
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


def _prepare_database(settings: Settings) -> None:
    """Create or upgrade the database before serving; refuse one a newer gateway migrated."""
    url = settings.storage.database_url
    private_directory(settings.storage.data_dir)
    migration = asyncio.run(migrate(url))
    if migration.changed:
        log.info(migration.describe(url), extra={"event": "database.migrated"})


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


def program(argv0: str) -> str:
    """How to run this command again from where it was run: ``agent-gateway`` when that name
    on PATH is this program, else the path it was run by (``.venv/bin/agent-gateway``)."""
    if Path(argv0).name != "agent-gateway":
        return "agent-gateway"  # python -m app, a test harness
    found = shutil.which("agent-gateway")
    if found is not None and Path(found).resolve() == Path(argv0).resolve():
        return "agent-gateway"
    return argv0


def _announcer(
    app: FastAPI,
    settings: Settings,
    sockets: list[socket.socket],
    *,
    token: str,
    source: TokenSource,
    config: Path | None,
    redactor: Redactor,
) -> Callable[[], Awaitable[None]]:
    """What to do once listening: ask every provider's health, then say it all (app/banner.py),
    as a block on a terminal (text logs) or as the ``server.ready`` log line (JSON logs)."""
    port = sockets[0].getsockname()[1]
    url = f"http://{probe_address(settings.server.host)}:{port}"
    command = f"{program(sys.argv[0])}{f' --config {config}' if config else ''} token show"
    on_terminal = sys.stderr.isatty()
    text = chosen_format(settings.log_format, sys.stderr) == "text"

    async def announce() -> None:
        registry: ProviderRegistry = app.state.registry
        checks = {
            name: asyncio.create_task(_agent(registry, name, redactor), name=f"check-{name}")
            for name in registry.names
        }
        try:
            await asyncio.wait(checks.values(), timeout=AGENTS_WAIT_S)
            agents = tuple(
                task.result() if task.done() else AgentState(name=name, ready=None, reason=None)
                for name, task in checks.items()
            )
            banner = Banner(
                url=url,
                source=source,
                token_file=str(token_path(settings.storage.data_dir)),
                token_command=command,
                agents=agents,
                # A token made just now is shown once, and only to a person: never to a log.
                token=token if source == "generated" and on_terminal else None,
            )
            _say(banner.text(), banner.summary(), banner.fields(), text=text)
            if banner.token is not None and not text:
                _write(f"Token (new, saved in {banner.token_file}): {banner.token}")
            for late in asyncio.as_completed([t for t in checks.values() if not t.done()]):
                agent = await late
                fields = {"event": "agent.checked", "agent": agent.name, "ready": agent.ready}
                fields["reason"] = agent.reason
                _say(late_line(agent), late_line(agent), fields, text=text)
        finally:
            for task in checks.values():
                task.cancel()
            await asyncio.gather(*checks.values(), return_exceptions=True)

    return announce


async def _agent(registry: ProviderRegistry, name: str, redactor: Redactor) -> AgentState:
    """One provider's state by its health check (its reason as it is, secrets removed)."""
    health = await registry.health(name)
    return AgentState(
        name=name,
        # A reason beside "available" is a warning still worth fixing first.
        ready=health.available and health.reason is None,
        reason=None if health.reason is None else redactor(health.reason),
        version=health.version,
        needs_login=health.status == "needs_login",
    )


def _say(block: str, line: str, fields: dict[str, Any], *, text: bool) -> None:
    """``block`` on stderr with text logs, else ``line`` as a log line with ``fields``."""
    if text:
        _write(block)
    else:
        log.info(line, extra=fields)


def _write(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
