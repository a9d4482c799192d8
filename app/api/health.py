"""Liveness and readiness."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from app.api.security import Authenticated
from app.providers.registry import Health, ProviderRegistry
from app.runtime import reads
from app.runtime.sessions import Sessions
from app.settings import SelectionSettings

router = APIRouter(tags=["health"])

DATABASE_CHECK_TIMEOUT_S = 5.0


class Liveness(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "not_ready"]
    checks: dict[str, str]
    """``database``: ``ok`` or the error; ``provider:<name>`` for every configured provider:
    ``ok`` or ``unavailable: <why>`` (its cached health probe, phrased as what to fix)."""
    reasons: list[str] = []
    """Why the gateway is not ready; empty when it is."""


@router.get("/healthz", operation_id="healthz")
async def healthz() -> Liveness:
    """Liveness; the only route without a token, so it says nothing else."""
    return Liveness(status="ok")


@router.get("/openapi.json", include_in_schema=False)
async def openapi_document(request: Request, _: Authenticated) -> JSONResponse:
    """The OpenAPI document; like every route but /healthz, it needs a key."""
    return JSONResponse(request.app.openapi())


@router.get(
    "/readyz",
    operation_id="readyz",
    response_model=Readiness,
    responses={
        503: {
            "model": Readiness,
            "description": "Not ready: the database does not answer, or neither the default "
            "provider nor any of its fallbacks is available; `reasons` says why",
        }
    },
)
async def readyz(request: Request, _: Authenticated) -> JSONResponse:
    """Ready while the database answers and the default provider (``selection.default``) or one
    of its fallbacks (``selection.fallback_chain``) is available; each provider's entry is its
    cached health probe (``selection.probe_ttl_s``)."""
    registry: ProviderRegistry = request.app.state.registry
    selection: SelectionSettings = request.app.state.settings.selection
    database = await _database_check(request.app.state.manager)
    names = registry.names
    healths = dict(
        zip(names, await asyncio.gather(*(registry.health(n) for n in names)), strict=True)
    )
    body = readiness(database, healths, serving=[selection.default, *selection.fallback_chain])
    return JSONResponse(body.model_dump(), status_code=200 if body.status == "ready" else 503)


def readiness(database: str, healths: Mapping[str, Health], *, serving: Sequence[str]) -> Readiness:
    """The readiness answer from the database check (``ok`` or the error) and each provider's
    health; ``serving`` is the default provider and its fallbacks, in order."""
    checks = {"database": database}
    for name, health in healths.items():
        checks[f"provider:{name}"] = "ok" if health.available else f"unavailable: {health.reason}"
    reasons: list[str] = []
    if database != "ok":
        reasons.append(f"the database does not answer ({database})")
    if not any(healths[name].available for name in serving if name in healths):
        unavailable = "; ".join(
            f"{name}: {healths[name].reason if name in healths else 'not configured'}"
            for name in serving
        )
        reasons.append(
            "no provider can serve new sessions: neither the default provider nor any of its "
            f"fallbacks (selection.fallback_chain) is available ({unavailable})"
        )
    return Readiness(status="not_ready" if reasons else "ready", checks=checks, reasons=reasons)


async def _database_check(manager: Sessions) -> str:
    try:
        async with asyncio.timeout(DATABASE_CHECK_TIMEOUT_S):
            await reads.storage_answers(manager)
    except TimeoutError:
        return f"error: no answer within {DATABASE_CHECK_TIMEOUT_S:g} s"
    except Exception as exc:  # any database failure means not ready
        return f"error: {type(exc).__name__}"
    return "ok"
