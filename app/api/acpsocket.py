"""``/v1/acp``, the gateway as an Agent Client Protocol agent (app/api/acp/, docs/acp.md).

The ACP SDK's schema takes a good part of a second to import: only a gateway that serves an
ACP connection pays it, when the first one opens, not every start.
"""

from __future__ import annotations

import asyncio
import importlib

from fastapi import APIRouter, WebSocket

router = APIRouter(tags=["acp"])


@router.websocket("/v1/acp", name="acp")
async def acp_socket(websocket: WebSocket) -> None:
    route = await asyncio.to_thread(importlib.import_module, "app.api.acp.route")
    await route.serve(websocket)
