"""``agent-gateway doctor``: can the gateway run, and its agents take a turn; if not, what to do.

Each enabled provider is checked for its sandbox, its executable, its version against the
pinned one and a clean start (``--version``), a credential in a form its CLI reads (the
detector the providers' health uses: app/providers/credentials.py; never a value), and each
custom model endpoint it is pointed at: that its host resolves and something answers HTTP
there (not checked with ``--offline``, nor when none is configured: the CLI then uses its
vendor's). The gateway itself is checked for how it will enforce the CLIs' memory and process
limits (``limits.enforcement``), the Git its workspace snapshots need (``snapshots``), where
its traces go (``tracing``) and its storage (data directory, database and schema).

The exit code is 1 when the default provider or a fallback cannot run (not installed, broken,
no credential, an endpoint that does not answer, disabled) or a gateway check fails (the
gateway would not start); 0 otherwise. ``render`` writes the table, ``document`` the JSON of
``--json``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass

from app.doctor.agents import AgentReport, check_agent
from app.doctor.checks import Check
from app.doctor.gateway import limits_check, snapshots_check, storage_check, telemetry_check
from app.process.runner import ProcessRunner
from app.settings import Settings

__all__ = ["SAID", "AgentReport", "Check", "Report", "run_doctor"]

SAID = {
    "available": "can run",
    "needs_login": "needs a login",
    "unavailable": "cannot run",
    "disabled": "is disabled",
}
"""Each provider status in a sentence."""


@dataclass(frozen=True, kw_only=True)
class Report:
    """What ``doctor`` found: the gateway's checks, each provider's, and the verdict."""

    gateway: list[Check]
    agents: list[AgentReport]
    default: str
    fallback_chain: list[str]

    @property
    def essential(self) -> list[str]:
        """The default provider and its fallbacks: the gateway needs one of them."""
        return list(dict.fromkeys([self.default, *self.fallback_chain]))

    @property
    def problems(self) -> list[str]:
        """What makes the exit code 1, each with what to do."""
        found = [f"gateway {c.name}: {c.detail}" for c in self.gateway if c.status == "FAIL"]
        by_name = {agent.name: agent for agent in self.agents}
        for name in self.essential:
            agent = by_name[name]
            if agent.status == "available":
                continue
            role = "the default provider" if name == self.default else "a fallback provider"
            why = agent.problem or f"set providers.{name}.enabled = true"
            found.append(f"{name} ({role}) {SAID[agent.status]}: {why}")
        return found

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 0

    @property
    def checks(self) -> list[Check]:
        return [*self.gateway, *(check for agent in self.agents for check in agent.checks)]


async def run_doctor(
    settings: Settings, environ: Mapping[str, str] | None = None, *, offline: bool = False
) -> Report:
    """Every check (the model endpoints not contacted ``offline``)."""
    env = dict(os.environ if environ is None else environ)
    runner = ProcessRunner()
    try:
        agents = await asyncio.gather(
            *(
                check_agent(name, settings, runner, env, offline=offline)
                for name in settings.providers
            )
        )
    finally:
        await runner.aclose()
    gateway = [
        limits_check(settings),
        await snapshots_check(settings),
        await telemetry_check(settings, env),
        await storage_check(settings),
    ]
    return Report(
        gateway=gateway,
        agents=list(agents),
        default=settings.selection.default,
        fallback_chain=list(settings.selection.fallback_chain),
    )
