"""The gateway's side of one ACP connection: what the agent asks of its client goes to the
session that spawned it."""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol, cast

from acp import Client, RequestError, connect_to_agent
from acp.client.connection import ClientSideConnection
from acp.schema import (
    CreateElicitationResponse,
    ElicitationMode,
    RequestPermissionRequest,
    RequestPermissionResponse,
)

from app.process.managed import ManagedProcess
from app.providers.acp.transport import ProcessTransport

log = logging.getLogger(__name__)


class Session(Protocol):
    """Where an agent's messages go (``AcpSession``)."""

    def deliver(self, session_id: str, update: Any) -> None: ...

    async def ask(self, request: RequestPermissionRequest) -> RequestPermissionResponse: ...

    async def elicit(self, message: str, mode: ElicitationMode) -> CreateElicitationResponse: ...


class AgentClient:
    """The client side of one agent connection (``acp.interfaces.Client``, less the
    ``fs/*`` and ``terminal/*`` methods it declines: the SDK answers those "method not
    found"); ``last_update`` is when the agent last sent a ``session/update``.

    Elicitation (``elicitation/create``, ``elicitation/complete``) is still marked unstable
    in the SDK, which answers it "method not found" (with a warning) unless the connection
    is made with ``use_unstable_protocol``; that flag changes nothing else on the client
    side."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.last_update = time.monotonic()

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.last_update = time.monotonic()
        self._session.deliver(session_id, update)

    async def request_permission(
        self, options: Any, session_id: str, tool_call: Any, **kwargs: Any
    ) -> RequestPermissionResponse:
        request = RequestPermissionRequest(
            session_id=session_id, options=options, tool_call=tool_call, field_meta=kwargs or None
        )
        return await self._session.ask(request)

    async def create_elicitation(
        self, message: str, mode: ElicitationMode, **_: Any
    ) -> CreateElicitationResponse:
        return await self._session.elicit(message, mode)

    async def complete_elicitation(self, elicitation_id: str, **_: Any) -> None:
        # Only URL-mode elicitations complete, and those are declined (``AcpSession.elicit``).
        log.debug("acp elicitation %s completed", elicitation_id)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.debug("acp extension notification %s ignored", method)


def connect(
    session: Session, process: ManagedProcess, *, label: str
) -> tuple[AgentClient, ClientSideConnection]:
    """An SDK connection to the agent ``process``, its messages routed to ``session``."""
    client = AgentClient(session)
    transport = ProcessTransport(process, label=label)
    connection = connect_to_agent(cast("Client", client), transport, use_unstable_protocol=True)
    return client, connection
