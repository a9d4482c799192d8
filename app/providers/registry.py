"""What each configured provider is and whether it can serve: version, pin, health.

Health is probed, never assumed: the executable must resolve and answer ``--version`` within a
few seconds, the CLI must have a credential (app/providers/credentials.py), and a provider
with a shared server must answer a ping. Probe results are cached for
``selection.probe_ttl_s``; the credential is looked for again at every ask (a few file checks),
so a login or a removed key counts at once. A provider is ``available``, ``needs_login`` (its
turns would fail with ``auth``: the reason says how to log in) or ``unavailable`` (the reason
says what to fix); neither of the last two is selected, and neither stops the gateway or the
others.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from app.process.childspec import ProcessSpec, child_environment
from app.process.managed import ProcessError
from app.process.runner import ProcessRunner
from app.providers import catalog
from app.providers.base import Capabilities, Provider
from app.providers.credentials import Credential, find_credential
from app.providers.sandboxing import SandboxStatus, status_of
from app.settings import Settings

log = logging.getLogger(__name__)

VERSION_TIMEOUT_S = 15.0
_VERSION = re.compile(r"\d+\.\d+\.\d+")


HealthStatus = Literal["available", "needs_login", "unavailable"]
"""``needs_login``: the CLI runs but has no credential (its turns would fail with ``auth``);
``unavailable``: disabled, missing, broken, or its sandbox or server cannot start."""


@dataclass(frozen=True, kw_only=True)
class Health:
    status: HealthStatus
    reason: str | None
    """Why the provider cannot serve, phrased as what to do (for ``needs_login``: how to log
    in); None when available."""
    version: str | None
    checked_at: datetime

    @property
    def available(self) -> bool:
        return self.status == "available"


@dataclass(frozen=True, kw_only=True)
class ProviderInfo:
    name: str
    enabled: bool
    capabilities: Capabilities
    executable: str
    pinned_version: str | None
    health: Health
    sandbox: SandboxStatus


async def cli_version(
    runner: ProcessRunner, executable: str, env: Mapping[str, str], cwd: Path, *, label: str
) -> str:
    """The version ``executable --version`` prints; raises ``ProcessError`` when it cannot."""
    process = await runner.spawn(
        ProcessSpec(
            argv=(executable, "--version"),
            cwd=cwd,
            env=env,
            max_line_bytes=64 * 1024,
            label=label,
        )
    )
    try:
        await process.close_stdin()
        lines: list[bytes] = []
        async with asyncio.timeout(VERSION_TIMEOUT_S):
            while (line := await process.read_line()) is not None:
                lines.append(line)
            code = await process.wait()
    except TimeoutError:
        raise ProcessError(
            f"`{executable} --version` did not answer in {VERSION_TIMEOUT_S:.0f} s"
        ) from None
    finally:
        await process.stop(grace_s=1.0)
    text = b"\n".join(lines).decode(errors="replace")
    match = _VERSION.search(text)
    if code != 0 or match is None:
        detail = (text.strip() or process.stderr_tail.strip())[:300]
        raise ProcessError(f"`{executable} --version` failed (exit {code}): {detail}")
    return match.group(0)


class ProviderRegistry:
    """The configured providers with their cached health."""

    def __init__(
        self,
        *,
        settings: Settings,
        providers: Mapping[str, Provider],
        runner: ProcessRunner,
        ttl_s: float = 300.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        parent_env: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.providers = providers
        self.runner = runner
        self.ttl_s = ttl_s
        self.clock = clock
        self.parent_env = dict(os.environ if parent_env is None else parent_env)
        self._cache: dict[str, tuple[float, Health]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._statuses: dict[str, HealthStatus] = {}
        self.sandboxes: dict[str, SandboxStatus] = {
            name: status_of(name, settings) for name in settings.providers
        }
        """Each provider's sandbox mode and why: fixed by the settings, decided once."""

    @property
    def names(self) -> list[str]:
        return list(self.settings.providers)

    async def health(self, name: str, *, fresh: bool = False) -> Health:
        """The cached probe, with the credential looked for now; ``fresh`` forces a new
        probe. A login since the probe makes a new one (the ping it skipped)."""
        health = await self._probed(name, fresh=fresh)
        if health.status == "unavailable":
            return health
        credential = self.credential(name)
        if credential.found == health.available:
            return health
        if credential.found:
            health = await self._probed(name, fresh=True)
        else:
            health = _needs_login(health, credential)
        self._said(name, health)
        return health

    def credential(self, name: str) -> Credential:
        """What provider ``name``'s CLI would find to reach a model (never a value)."""
        return find_credential(name, self.settings.providers[name], self.parent_env)

    async def _probed(self, name: str, *, fresh: bool) -> Health:
        cached = self._cache.get(name)
        if not fresh and cached is not None and time.monotonic() - cached[0] < self.ttl_s:
            return cached[1]
        async with self._locks.setdefault(name, asyncio.Lock()):
            cached = self._cache.get(name)
            if not fresh and cached is not None and time.monotonic() - cached[0] < self.ttl_s:
                return cached[1]
            health = await self._probe(name)
            self._cache[name] = (time.monotonic(), health)
            self._said(name, health)
            return health

    def _said(self, name: str, health: Health) -> None:
        """Log a provider's status when it changes (not at every ask)."""
        before = self._statuses.get(name)
        self._statuses[name] = health.status
        if health.status == before or health.available:
            return
        if health.status == "needs_login":
            log.warning("provider %s needs a login: %s", name, health.reason)
        else:
            log.warning("provider %s unavailable: %s", name, health.reason)

    def forget(self, name: str) -> None:
        """Drop the cached probe (a turn just showed the CLI is missing or broken)."""
        self._cache.pop(name, None)

    async def info(self, name: str, *, fresh: bool = False) -> ProviderInfo:
        """What ``/v1/providers`` shows; the capabilities are the built provider's (a sandboxed
        Codex or OpenCode runs a server per session: no ``shared_process``), else the
        catalog's."""
        built = self.providers.get(name)
        return ProviderInfo(
            name=name,
            enabled=self.settings.providers[name].enabled,
            capabilities=built.capabilities if built else catalog.described(name).capabilities,
            executable=catalog.executable(name, self.settings),
            pinned_version=catalog.pinned_versions().get(name),
            health=await self.health(name, fresh=fresh),
            sandbox=self.sandboxes[name],
        )

    async def _probe(self, name: str) -> Health:
        now = self.clock()
        settings = self.settings.providers[name]
        if not settings.enabled:
            return Health(
                status="unavailable",
                reason=f"disabled: set providers.{name}.enabled = true to use it",
                version=None,
                checked_at=now,
            )
        executable = catalog.executable(name, self.settings)
        if shutil.which(executable) is None:
            return Health(
                status="unavailable",
                reason=f"{executable!r} was not found: run `make setup` to install the pinned "
                f"CLIs, or set providers.{name}.executable",
                version=None,
                checked_at=now,
            )
        sandbox = self.sandboxes[name]
        if sandbox.problem is not None:
            return Health(
                status="unavailable",
                reason=f"its sandbox cannot start: {sandbox.problem}; install bubblewrap, or "
                f'set sandbox.mode (or providers.{name}.sandbox) = "none" to run it unconfined',
                version=None,
                checked_at=now,
            )
        env = child_environment(self.parent_env, passthrough=(), overlay=settings.env)
        try:
            version = await cli_version(self.runner, executable, env, Path.cwd(), label=name)
        except ProcessError as exc:
            return Health(status="unavailable", reason=str(exc), version=None, checked_at=now)
        credential = self.credential(name)
        if not credential.found:
            # No ping: a shared server started for a CLI that cannot reach a model is waste.
            return Health(
                status="needs_login", reason=credential.problem, version=version, checked_at=now
            )
        provider = self.providers.get(name)
        problem = await provider.ping() if provider else None
        return Health(
            status="available" if problem is None else "unavailable",
            reason=problem,
            version=version,
            checked_at=now,
        )


def _needs_login(probed: Health, credential: Credential) -> Health:
    """An available probe's health once its CLI's credential is gone."""
    return Health(
        status="needs_login",
        reason=credential.problem,
        version=probed.version,
        checked_at=probed.checked_at,
    )
