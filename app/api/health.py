"""Liveness and readiness."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from app.api.security import Authenticated
from app.cluster.redis import unreachable_reason
from app.errors import ClusterUnavailable
from app.process.bounds import Mechanism
from app.process.runner import ProcessRunner
from app.providers.registry import Health, ProviderRegistry
from app.providers.sandboxing import SandboxStatus
from app.runtime import reads
from app.runtime.sessions import Sessions
from app.settings import SelectionSettings

router = APIRouter(tags=["health"])

DATABASE_CHECK_TIMEOUT_S = 5.0
REDIS_CHECK_TIMEOUT_S = 2.0


class Liveness(BaseModel):
    status: Literal["ok"]


class LimitEnforcement(BaseModel):
    """How every CLI's ``limits.max_process_rss_bytes`` and ``limits.max_process_count`` are
    enforced (``limits.enforcement``): ``cgroup`` (by the kernel, for the CLI's whole tree),
    ``rlimit`` (memory only: each process's private writable memory, by the kernel) or
    ``watchdog`` (sampled from ``/proc`` every ``limits.watch_interval_s``)."""

    memory: Mechanism
    processes: Mechanism
    detail: str
    """Why these mechanisms: for one that is not ``cgroup``, why no cgroup could be used."""


class Readiness(BaseModel):
    status: Literal["ready", "not_ready"]
    checks: dict[str, str]
    """``database``: ``ok`` or the error; ``redis`` (only with ``cluster.redis_url``): ``ok``
    or the error of a PING through this replica's Redis client; ``provider:<name>`` for every
    configured provider: ``ok``, ``needs_login: <how to log in>`` (its CLI has no
    credential) or ``unavailable: <why>`` (its cached health probe, phrased as what to fix);
    ``sandbox:<name>`` for every enabled provider: the mode its agents run in (``bwrap`` or
    ``none``) and why."""
    reasons: list[str] = []
    """Why the gateway is not ready; empty when it is."""
    limits: LimitEnforcement | None = None
    """How the memory and process-count limits of every CLI are enforced."""


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
            "description": "Not ready: the database does not answer, Redis does not answer "
            "(with `cluster.redis_url`), or neither the default provider nor any of its "
            "fallbacks is available (one that needs a login is not); `reasons` says why",
        }
    },
)
async def readyz(request: Request, _: Authenticated) -> JSONResponse:
    """Ready while the database answers, Redis answers (with ``cluster.redis_url``: a PING
    within 2 s), and the default provider (``selection.default``) or one of its fallbacks
    (``selection.fallback_chain``) is available (one that needs a login is not); each
    provider's entry is its cached health probe (``selection.probe_ttl_s``) with its
    credential looked for now."""
    registry: ProviderRegistry = request.app.state.registry
    selection: SelectionSettings = request.app.state.settings.selection
    manager: Sessions = request.app.state.manager
    names = registry.names
    database, redis, found = await asyncio.gather(
        _database_check(manager),
        _redis_check(manager),
        asyncio.gather(*(registry.health(n) for n in names)),
    )
    healths = dict(zip(names, found, strict=True))
    settings = request.app.state.settings
    sandboxes = {n: registry.sandboxes[n] for n in names if settings.providers[n].enabled}
    body = readiness(
        database,
        healths,
        serving=[selection.default, *selection.fallback_chain],
        redis=redis,
        sandboxes=sandboxes,
    )
    runner: ProcessRunner = request.app.state.runner
    by = runner.enforcement
    body.limits = LimitEnforcement(memory=by.memory, processes=by.processes, detail=by.detail)
    shown = request.app.state.mask.values(body.model_dump())  # an error may quote a secret
    return JSONResponse(shown, status_code=200 if body.status == "ready" else 503)


def readiness(
    database: str,
    healths: Mapping[str, Health],
    *,
    serving: Sequence[str],
    redis: str | None = None,
    sandboxes: Mapping[str, SandboxStatus] | None = None,
) -> Readiness:
    """The readiness answer from the database check (``ok`` or the error), the Redis check
    (likewise; None without a cluster) and each provider's health; ``serving`` is the default
    provider and its fallbacks, in order."""
    checks = {"database": database}
    if redis is not None:
        checks["redis"] = redis
    for name, health in healths.items():
        checks[f"provider:{name}"] = (
            "ok" if health.available else f"{health.status}: {health.reason}"
        )
    for name, sandbox in (sandboxes or {}).items():
        checks[f"sandbox:{name}"] = f"{sandbox.mode} ({sandbox.reason})"
    reasons: list[str] = []
    if database != "ok":
        reasons.append(f"the database does not answer ({database})")
    if redis is not None and redis != "ok":
        reasons.append(
            f"Redis (cluster.redis_url) does not answer ({redis}): this replica cannot reach "
            "the others, forward commands or hear their sessions' live events"
        )
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


async def _redis_check(manager: Sessions) -> str | None:
    """None on a single gateway; ``ok`` or why a PING through this replica's client failed."""
    try:
        if not await reads.cluster_answers(manager, timeout_s=REDIS_CHECK_TIMEOUT_S):
            return None
    except ClusterUnavailable as exc:
        return f"error: {unreachable_reason(exc.__cause__ or exc)}"
    return "ok"
