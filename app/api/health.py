"""Liveness and readiness."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import text

from app.api.security import Authenticated

router = APIRouter(tags=["health"])


class Liveness(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "not_ready"]
    checks: dict[str, str]
    """``database`` and ``provider:<name>``: ``ok`` or what failed."""


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
    responses={503: {"model": Readiness, "description": "Not ready; `checks` says what failed"}},
)
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
    body = Readiness(status="ready" if ready else "not_ready", checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)
