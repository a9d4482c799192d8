"""``agent-gateway doctor``: is every configured provider usable, and if not, what to do.

Each enabled provider is checked for: its executable, its version against the pinned one, a
clean start (``--version``), credentials or an endpoint, and, when a model endpoint is
configured, a TCP connection to it. The gateway itself is checked for how it will enforce
the CLIs' memory and process limits (``limits.enforcement``) and for the Git its workspace
snapshots need (``snapshots``). The exit code is non-zero when the default provider or a
fallback provider is unusable, or the limits cannot be enforced as configured or snapshots
are on without a working Git (the gateway would not start).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import JsonValue

from app.process.bounds import Enforcement, EnforcementUnavailable
from app.process.childspec import child_environment
from app.process.managed import ProcessError
from app.process.runner import ProcessRunner
from app.process.snapshots import git_problem
from app.providers import catalog
from app.providers.catalog import described
from app.providers.registry import cli_version
from app.providers.sandboxing import status_of
from app.settings import ProviderSettings, Settings
from app.telemetry_settings import TelemetryRefused, export_of, shown

Status = Literal["ok", "warn", "FAIL"]
CONNECT_TIMEOUT_S = 3.0


@dataclass(frozen=True, kw_only=True)
class Check:
    provider: str
    name: str
    status: Status
    detail: str


def endpoints(name: str, settings: ProviderSettings, environ: Mapping[str, str]) -> list[str]:
    """Model endpoint URLs the provider's settings point the CLI at."""
    env = {**environ, **settings.env}
    variables = described(name).credentials.endpoint_variables
    found = [env[variable] for variable in variables if env.get(variable)]
    found.extend(_urls(settings.config))
    return found


def _urls(value: JsonValue) -> Iterable[str]:
    """Values of ``base_url`` / ``baseURL`` keys anywhere in a CLI config overlay."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key.lower() in ("base_url", "baseurl") and isinstance(item, str):
                yield item
            else:
                yield from _urls(item)
    elif isinstance(value, list):
        for item in value:
            yield from _urls(item)


async def reachable(url: str) -> str | None:
    """None when a TCP connection to the URL's host and port opens, else why not."""
    parts = urlsplit(url)
    if not parts.hostname:
        return f"{url!r} is not a URL"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            _, writer = await asyncio.open_connection(parts.hostname, port)
    except (OSError, TimeoutError) as exc:
        return f"cannot connect to {parts.hostname}:{port} ({type(exc).__name__}: {exc})"
    writer.close()
    await writer.wait_closed()
    return None


async def check_provider(
    name: str, settings: Settings, runner: ProcessRunner, environ: Mapping[str, str]
) -> list[Check]:
    provider = settings.providers[name]
    if not provider.enabled:
        return [
            Check(
                provider=name,
                name="enabled",
                status="warn",
                detail=f"disabled (providers.{name}.enabled = false)",
            )
        ]
    checks: list[Check] = [_sandbox(name, settings)]
    executable = catalog.executable(name, settings)
    resolved = shutil.which(executable)
    if resolved is None:
        return [
            Check(
                provider=name,
                name="executable",
                status="FAIL",
                detail=f"{executable!r} not found: run `make setup` to install the pinned "
                f"CLIs, or set providers.{name}.executable",
            )
        ]
    checks.append(Check(provider=name, name="executable", status="ok", detail=resolved))
    env = child_environment(environ, passthrough=(), overlay=provider.env)
    try:
        version = await cli_version(runner, resolved, env, Path.cwd(), label=name)
    except ProcessError as exc:
        checks.append(
            Check(
                provider=name,
                name="starts",
                status="FAIL",
                detail=f"{exc}; reinstall with `make setup`",
            )
        )
        return checks
    pinned = catalog.pinned_versions().get(name)
    if pinned is None or pinned == version:
        checks.append(
            Check(
                provider=name,
                name="version",
                status="ok",
                detail=f"{version} (pinned {pinned or 'nowhere'})",
            )
        )
    else:
        checks.append(
            Check(
                provider=name,
                name="version",
                status="warn",
                detail=f"{version}, pinned {pinned}: run `make setup` for the tested version",
            )
        )
    checks.append(_credentials(name, provider, environ))
    for url in endpoints(name, provider, environ):
        problem = await reachable(url)
        checks.append(
            Check(
                provider=name,
                name="endpoint",
                status="ok" if problem is None else "FAIL",
                detail=url
                if problem is None
                else f"{problem}: start the model server or fix the base URL in providers.{name}",
            )
        )
    return checks


def _sandbox(name: str, settings: Settings) -> Check:
    sandbox = status_of(name, settings)
    if sandbox.problem is not None:
        detail = (
            f"bwrap asked for ({sandbox.reason}) but {sandbox.problem}: install bubblewrap, or "
            f'set sandbox.mode = "none" to run agents unconfined'
        )
        return Check(provider=name, name="sandbox", status="FAIL", detail=detail)
    if sandbox.mode == "none":
        detail = f"none: {sandbox.reason}"
        return Check(provider=name, name="sandbox", status="warn", detail=detail)
    return Check(provider=name, name="sandbox", status="ok", detail=sandbox.reason)


def _credentials(name: str, provider: ProviderSettings, environ: Mapping[str, str]) -> Check:
    credentials = described(name).credentials
    env = {**environ, **provider.env}
    present = [v for v in credentials.variables if env.get(v)]
    if present:
        return Check(provider=name, name="credentials", status="ok", detail=", ".join(present))
    home = Path(env.get("HOME") or Path.home())
    logins = [f for f in credentials.login_files if (home / f).is_file()]
    if logins:
        return Check(
            provider=name, name="credentials", status="ok", detail=f"login in {home / logins[0]}"
        )
    if endpoints(name, provider, environ) or provider.config:
        return Check(
            provider=name, name="credentials", status="ok", detail="custom endpoint configured"
        )
    return Check(
        provider=name,
        name="credentials",
        status="warn",
        detail=f"none found: {credentials.hint}",
    )


async def run_doctor(
    settings: Settings, environ: Mapping[str, str] | None = None
) -> tuple[list[Check], int]:
    """Every check, and the exit code: 1 when the default or a fallback is unusable."""
    env = dict(os.environ if environ is None else environ)
    runner = ProcessRunner()
    try:
        results = await asyncio.gather(
            *(check_provider(name, settings, runner, env) for name in settings.providers)
        )
    finally:
        await runner.aclose()
    gateway = [
        limits_check(settings),
        await snapshots_check(settings),
        await telemetry_check(settings, env),
    ]
    checks = [*gateway, *(check for group in results for check in group)]
    if any(check.status == "FAIL" for check in gateway):
        return checks, 1
    essential = {settings.selection.default, *settings.selection.fallback_chain}
    unusable = {c.provider for c in checks if c.status == "FAIL"} | {
        n for n in essential if not settings.providers[n].enabled
    }
    return checks, 1 if unusable & essential else 0


def limits_check(settings: Settings) -> Check:
    """How ``limits.max_process_rss_bytes`` and ``limits.max_process_count`` will be enforced."""
    try:
        by = Enforcement.choose(settings.limits.enforcement)
    except EnforcementUnavailable as exc:
        return Check(provider="gateway", name="limits", status="FAIL", detail=str(exc))
    return Check(
        provider="gateway",
        name="limits",
        status="ok" if by.memory == by.processes == "cgroup" else "warn",
        detail=f"memory by {by.memory}, processes by {by.processes} ({by.detail})",
    )


async def snapshots_check(settings: Settings) -> Check:
    """Whether the workspace snapshots can be taken: Git 2.32 or later, where they are on."""
    section = settings.snapshots
    if not section.enabled:
        return Check(
            provider="gateway",
            name="snapshots",
            status="warn",
            detail="off (snapshots.enabled = false): no changes per turn, no revert",
        )
    problem = await git_problem(section.git)
    if problem is not None:
        detail = f"{problem}: install Git 2.32 or later (Debian: apt-get install git), or set "
        return Check(
            provider="gateway",
            name="snapshots",
            status="FAIL",
            detail=detail + "snapshots.enabled = false",
        )
    found = shutil.which(section.git) or section.git
    return Check(
        provider="gateway",
        name="snapshots",
        status="ok",
        detail=f"{found}; records in {settings.snapshots_dir} (at most "
        f"{section.max_files} files, {section.max_bytes} bytes a workspace)",
    )


async def telemetry_check(settings: Settings, environ: Mapping[str, str]) -> Check:
    """Where traces go (``[telemetry]`` and the ``OTEL_*`` variables), and whether the
    collector takes connections; an export the gateway cannot make fails the start."""
    try:
        export = export_of(settings.telemetry, environ)
    except TelemetryRefused as exc:
        return Check(provider="gateway", name="tracing", status="FAIL", detail=str(exc))
    if export is None:
        return Check(
            provider="gateway", name="tracing", status="ok", detail="off (no collector named)"
        )
    detail = f"spans to {shown(export.endpoint)} as {export.service_name}"
    unreachable = await reachable(export.endpoint)
    if unreachable is not None:
        return Check(
            provider="gateway",
            name="tracing",
            status="warn",
            detail=f"{detail}; {unreachable} (spans are dropped until it answers)",
        )
    return Check(provider="gateway", name="tracing", status="ok", detail=detail)


def render(checks: list[Check], settings: Settings) -> str:
    """A plain-text table, one line a check."""
    essential = {settings.selection.default, *settings.selection.fallback_chain}
    rows = [("provider", "check", "status", "detail")]
    for check in checks:
        label = check.provider + (" *" if check.provider in essential else "")
        rows.append((label, check.name, check.status, check.detail))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]
        for row in rows
    ]
    lines.append("* the default provider or a fallback: the gateway needs it")
    return "\n".join(lines)
