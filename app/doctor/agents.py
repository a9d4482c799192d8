"""``doctor``'s checks of one provider: sandbox, CLI, version, credential, model endpoint."""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import httpx

from app.doctor.checks import CONNECT_TIMEOUT_S, Check
from app.process.childspec import child_environment
from app.process.managed import ProcessError
from app.process.runner import ProcessRunner
from app.providers import catalog
from app.providers.credentials import Credential, Endpoint, endpoints, find_credential
from app.providers.registry import cli_version
from app.providers.sandboxing import status_of
from app.settings import Settings
from app.telemetry_settings import shown

AgentStatus = Literal["available", "needs_login", "unavailable", "disabled"]
"""As the providers' health says it (``GET /v1/providers``), or ``disabled``; ``doctor``
also counts a model endpoint that does not answer as ``unavailable``."""

FORMS = {
    "variable": "API key variable",
    "settings": "settings file",
    "login_file": "login file",
    "config": "key in the provider's config",
    "endpoint": "custom model endpoint",
}
"""How each credential form reads in ``doctor``'s table."""


@dataclass(frozen=True, kw_only=True)
class AgentReport:
    """Everything ``doctor`` found out about one provider."""

    name: str
    enabled: bool
    status: AgentStatus
    executable: str | None
    """Where the CLI was found; None when it was not."""
    installed_version: str | None
    pinned_version: str | None
    credential: Credential | None
    """None for a disabled provider (not looked for)."""
    checks: list[Check]

    @property
    def problem(self) -> str | None:
        """What stops it, phrased as what to do: the first failed check's detail, or how to
        log in; None when nothing does."""
        failed = [c for c in self.checks if c.status == "FAIL" and c.name != "credentials"]
        if failed:
            return f"{failed[0].name}: {failed[0].detail}"
        if self.credential is not None and not self.credential.found:
            return self.credential.fix
        return None


async def check_agent(
    name: str,
    settings: Settings,
    runner: ProcessRunner,
    environ: Mapping[str, str],
    *,
    offline: bool = False,
) -> AgentReport:
    """Every check of provider ``name``; the model endpoints are not contacted ``offline``."""
    provider = settings.providers[name]
    pinned = catalog.pinned_versions().get(name)
    if not provider.enabled:
        detail = f"disabled (providers.{name}.enabled = false)"
        return AgentReport(
            name=name,
            enabled=False,
            status="disabled",
            executable=None,
            installed_version=None,
            pinned_version=pinned,
            credential=None,
            checks=[Check(provider=name, name="enabled", status="warn", detail=detail)],
        )
    checks = [_sandbox(name, settings)]
    executable = catalog.executable(name, settings)
    resolved = shutil.which(executable)
    version: str | None = None
    if resolved is None:
        detail = (
            f"{executable!r} not found: run `make setup` to install the pinned CLIs, or set "
            f"providers.{name}.executable"
        )
        checks.append(Check(provider=name, name="executable", status="FAIL", detail=detail))
    else:
        checks.append(Check(provider=name, name="executable", status="ok", detail=resolved))
        env = child_environment(environ, passthrough=(), overlay=provider.env)
        try:
            version = await cli_version(runner, resolved, env, Path.cwd(), label=name)
        except ProcessError as exc:
            detail = f"{exc}; reinstall with `make setup`"
            checks.append(Check(provider=name, name="starts", status="FAIL", detail=detail))
        else:
            checks.append(_version(name, version, pinned))
    credential = find_credential(name, provider, environ)
    checks.append(_credential(name, credential))
    found = endpoints(name, provider, environ)
    if not found:
        detail = "not checked: no custom model endpoint configured (the CLI uses its vendor's)"
        checks.append(Check(provider=name, name="endpoint", status="skip", detail=detail))
    for endpoint in found:
        checks.append(await endpoint_check(name, endpoint, offline=offline))
    return AgentReport(
        name=name,
        enabled=True,
        status=_status(checks),
        executable=resolved,
        installed_version=version,
        pinned_version=pinned,
        credential=credential,
        checks=checks,
    )


async def endpoint_check(name: str, endpoint: Endpoint, *, offline: bool) -> Check:
    """Whether a model endpoint's host resolves and something answers HTTP there (any status:
    a model server answers its base URL with a 404 as well)."""
    url = f"{shown(endpoint.url)} ({endpoint.source})"
    if offline:
        return Check(
            provider=name, name="endpoint", status="skip", detail=f"not checked (--offline): {url}"
        )
    fix = f"start the model server or fix {endpoint.source}"
    parts = urlsplit(endpoint.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return _endpoint(name, "FAIL", f"{url} is not an http(s) URL: fix {endpoint.source}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            addresses = await asyncio.get_running_loop().getaddrinfo(
                parts.hostname, port, type=socket.SOCK_STREAM
            )
    except (OSError, ValueError, TimeoutError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        return _endpoint(name, "FAIL", f"{url}: {parts.hostname} does not resolve ({why}): {fix}")
    address = str(addresses[0][4][0])
    try:
        async with httpx.AsyncClient(timeout=CONNECT_TIMEOUT_S) as client:
            response = await client.get(endpoint.url)
    except httpx.HTTPError as exc:
        return _endpoint(
            name,
            "FAIL",
            f"{url}: resolves to {address} but does not answer ({type(exc).__name__}): {fix}",
        )
    return _endpoint(
        name, "ok", f"{url}: resolves to {address}, answers HTTP {response.status_code}"
    )


def _endpoint(name: str, status: Literal["ok", "FAIL"], detail: str) -> Check:
    return Check(provider=name, name="endpoint", status=status, detail=detail)


def _status(checks: list[Check]) -> AgentStatus:
    failed = {c.name for c in checks if c.status == "FAIL"}
    if failed - {"credentials"}:
        return "unavailable"
    return "needs_login" if failed else "available"


def _credential(name: str, credential: Credential) -> Check:
    if not credential.checked:
        return Check(provider=name, name="credentials", status="skip", detail=credential.where)
    if credential.problem is not None:
        return Check(provider=name, name="credentials", status="FAIL", detail=credential.problem)
    form = FORMS[credential.form] if credential.form else "found"
    detail = f"{form}: {credential.where}"
    return Check(provider=name, name="credentials", status="ok", detail=detail)


def _version(name: str, version: str, pinned: str | None) -> Check:
    if pinned is None or pinned == version:
        detail = f"{version} (pinned {pinned or 'nowhere'})"
        return Check(provider=name, name="version", status="ok", detail=detail)
    detail = f"{version}, pinned {pinned}: run `make setup` for the tested version"
    return Check(provider=name, name="version", status="warn", detail=detail)


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
