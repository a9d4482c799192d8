"""``/v1/acp``: the gateway as an Agent Client Protocol agent, over a WebSocket (docs/acp.md).

Once the upgrade is authenticated (app/api/acpsocket.py), the socket carries JSON-RPC
(app/api/acp/transport.py) between the client and the connection's ``GatewayAgent``
(app/api/acp/agent.py), through the ACP SDK's agent-side connection. A key rotated away
closes the socket (1008); closing the socket never touches a session: its turn goes on and
its approvals wait for a client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from acp.agent.connection import AgentSideConnection
from fastapi import WebSocket

from app.api.acp.agent import GatewayAgent
from app.api.acp.prompts import PromptBook
from app.api.acp.transport import WebSocketTransport
from app.api.events import RETIRED_REASON, WS_POLICY
from app.api.security import Principal, watch_key

log = logging.getLogger(__name__)


async def serve(websocket: WebSocket, principal: Principal) -> None:
    """Serve one ACP connection of ``principal`` (app/api/acpsocket.py authenticated it)."""
    app = websocket.app
    await websocket.accept()
    settings = app.state.settings
    transport = WebSocketTransport(websocket, max_bytes=settings.server.ws_max_message_bytes)
    agent = GatewayAgent(
        manager=app.state.manager,
        settings=settings,
        principal=principal,
        connection=websocket,
        mask=app.state.mask,
        prompts=_prompt_book(app),
    )
    connection = AgentSideConnection(agent, transport, listening=False, use_unstable_protocol=True)
    listening = asyncio.current_task()

    def retired() -> None:
        log.info("closing an ACP connection of %s: its key was rotated away", principal.name)
        asyncio.get_running_loop().create_task(_close(websocket, listening))

    unwatch = watch_key(websocket, retired)
    try:
        await connection.listen()
    except asyncio.CancelledError:
        pass
    finally:
        unwatch()
        await agent.close()
        with contextlib.suppress(Exception):
            await connection.close()


def _prompt_book(app: Any) -> PromptBook:
    """The gateway's one book of prompt ids, made by the first ACP connection."""
    book: PromptBook | None = getattr(app.state, "acp_prompts", None)
    if book is None:
        book = app.state.acp_prompts = PromptBook()
    return book


async def _close(websocket: WebSocket, listening: asyncio.Task[None] | None) -> None:
    with contextlib.suppress(RuntimeError):
        await websocket.close(code=WS_POLICY, reason=RETIRED_REASON)
    if listening is not None:
        listening.cancel()
