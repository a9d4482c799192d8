"""What providers this gateway has, and whether each can serve right now."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from app.api.contract import problems
from app.api.security import Authenticated
from app.errors import NotFound
from app.providers.registry import ProviderInfo, ProviderRegistry
from app.runtime.figures import FigureBook, ProviderFigures

router = APIRouter(prefix="/v1/providers", tags=["providers"])


class CapabilitiesPublic(BaseModel):
    text_deltas: bool
    approvals: bool
    interrupt: bool
    resume: bool
    usage: bool
    cost: bool
    shared_process: bool
    approval_edits: bool
    """Runs an allowed tool call with the input the client edited (``updated_input``)."""
    model_choice: bool
    """Runs the ``model`` a session names (a session naming one goes only to such a
    provider)."""
    fork: bool = False
    """Forks a session's thread itself (``POST /v1/sessions/{id}/fork`` keeps the agent's
    own conversation); without it a fork's conversation is a hand-off."""


class HealthPublic(BaseModel):
    status: Literal["available", "needs_login", "unavailable"]
    """``available``: it can take a turn. ``needs_login``: its CLI runs but no credential was
    found where it looks (an API key variable, a login file, a token, a custom model
    endpoint), so its turns would fail with ``auth``; it is not selected, and ``reason`` says
    how to log in. ``unavailable``: disabled, not installed, broken, or its sandbox or server
    cannot start; ``reason`` says what to fix."""
    available: bool
    """``status == "available"`` (kept for older clients)."""
    reason: str | None
    """Why it cannot serve, phrased as what to do; null when available."""
    checked_at: datetime


class SandboxPublic(BaseModel):
    """What the provider's agent processes can see (``sandbox.mode``)."""

    mode: Literal["bwrap", "none"]
    """``bwrap``: each session's agent sees only its workspace, its own home and the system,
    never the gateway's files; ``none``: it sees what the gateway's user sees."""
    reason: str
    """Why this mode (the setting that chose it, or why bubblewrap cannot run here)."""


class FiguresPublic(BaseModel):
    """What this replica measured of the provider's last ``selection.window_turns`` turns
    (null: not measured yet); the routing strategies rank providers by these."""

    turns: int
    """Measured turns in the window (interrupted ones and the request's own faults are not
    measured)."""
    first_text_p50_s: float | None
    """Median seconds from ``turn.started`` to the first text."""
    duration_p50_s: float | None
    """Median seconds of a completed turn."""
    failure_rate: float | None
    """Failed turns over measured turns."""
    cost_per_turn_usd: float | None
    """Mean cost of the turns whose CLI reported one."""
    running: int
    """Turns of this provider running on this replica now."""


class ProviderPublic(BaseModel):
    name: str
    enabled: bool
    capabilities: CapabilitiesPublic | None
    """What the provider can do (from the catalog, so a disabled one says it too)."""
    executable: str
    installed_version: str | None
    pinned_version: str | None
    health: HealthPublic
    sandbox: SandboxPublic
    figures: FiguresPublic


class ProviderList(BaseModel):
    providers: list[ProviderPublic]


def get_registry(request: Request) -> ProviderRegistry:
    registry: ProviderRegistry = request.app.state.registry
    return registry


def get_figures(request: Request) -> FigureBook:
    figures: FigureBook = request.app.state.manager.figures
    return figures


Registry = Annotated[ProviderRegistry, Depends(get_registry)]
Figures = Annotated[FigureBook, Depends(get_figures)]
Fresh = Annotated[bool, Query(description="Probe now instead of using the cached result")]


def _public(info: ProviderInfo, figures: ProviderFigures) -> ProviderPublic:
    return ProviderPublic(
        name=info.name,
        enabled=info.enabled,
        capabilities=CapabilitiesPublic(**vars(info.capabilities)),
        executable=info.executable,
        installed_version=info.health.version,
        pinned_version=info.pinned_version,
        health=HealthPublic(
            status=info.health.status,
            available=info.health.available,
            reason=info.health.reason,
            checked_at=info.health.checked_at,
        ),
        sandbox=SandboxPublic(mode=info.sandbox.mode, reason=info.sandbox.reason),
        figures=FiguresPublic(**vars(figures)),
    )


@router.get("", operation_id="listProviders")
async def list_providers(
    registry: Registry, figures: Figures, _: Authenticated, fresh: Fresh = False
) -> ProviderList:
    """Every configured provider with its capabilities, versions, health and measured
    figures."""
    return ProviderList(
        providers=[
            _public(await registry.info(name, fresh=fresh), figures.figures(name))
            for name in registry.names
        ]
    )


@router.get(
    "/{name}",
    operation_id="getProvider",
    responses=problems(notes={404: "No provider of that name is configured"}),
)
async def get_provider(
    name: str, registry: Registry, figures: Figures, _: Authenticated, fresh: Fresh = False
) -> ProviderPublic:
    if name not in registry.names:
        raise NotFound(f"no provider named {name!r}; configured: {', '.join(registry.names)}")
    return _public(await registry.info(name, fresh=fresh), figures.figures(name))
