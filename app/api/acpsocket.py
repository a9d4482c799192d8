"""``/v1/acp``, the gateway as an Agent Client Protocol agent (app/api/acp/, docs/acp.md).

The upgrade passes the same gate (Host, Origin, limits) and the same bearer keys as every
route (the header, or ``?access_token=``); a refused upgrade gets the problem its REST
request would. The ACP SDK's schema takes a good part of a second to import: only a gateway
that serves an ACP connection pays it, when the first one opens, not every start.
"""

from __future__ import annotations

import asyncio
import importlib
import logging

from fastapi import APIRouter, WebSocket
from fastapi.responses import JSONResponse

from app.api.problems import error_headers
from app.api.security import require_ws_token
from app.errors import GatewayError, problem_for

log = logging.getLogger(__name__)

router = APIRouter(tags=["acp"])


@router.websocket("/v1/acp", name="acp")
async def acp_socket(websocket: WebSocket) -> None:
    try:
        principal = await require_ws_token(websocket)
    except GatewayError as exc:
        log.info("refused an ACP connection: %s (%d)", exc.type, exc.status)
        await websocket.send_denial_response(
            JSONResponse(
                problem_for(exc),
                status_code=exc.status,
                media_type="application/problem+json",
                headers=error_headers(exc),
            )
        )
        return
    route = await asyncio.to_thread(importlib.import_module, "app.api.acp.route")
    await route.serve(websocket, principal)
