"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from app.api.security import Authenticated

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="healthz")
async def healthz() -> dict[str, str]:
    """Liveness; the only route without a token, so it says nothing else."""
    return {"status": "ok"}


@router.get("/openapi.json", include_in_schema=False)
async def openapi_document(request: Request, _: Authenticated) -> JSONResponse:
    """The OpenAPI document; like every route but /healthz, it needs a key."""
    return JSONResponse(request.app.openapi())


@router.get("/readyz", operation_id="readyz")
async def readyz(request: Request, _: Authenticated) -> JSONResponse:
    """Ready when the database answers and every enabled provider was built."""
    checks: dict[str, str] = {}
    try:
        async with request.app.state.store.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:  # any database failure means not ready
        checks["database"] = f"error: {type(exc).__name__}"
    for name in request.app.state.providers:
        checks[f"provider:{name}"] = "ok"
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "not_ready", "checks": checks},
        status_code=200 if ready else 503,
    )
