"""An editor for the ``/v1/acp`` tests: the ACP Python SDK's own client over a WebSocket to a
running gateway, recording every update it is sent and answering what it is asked as the
test says."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, cast

from acp import PROTOCOL_VERSION, Client, connect_to_agent
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    ClientCapabilities,
    DeclineElicitationResponse,
    DeniedOutcome,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    FileSystemCapabilities,
    Implementation,
    RequestPermissionResponse,
)
from acp.ws.client import create_websocket_stream

from tests.gateway import TOKEN, GatewayProcess

Answer = Callable[[Any], str | None]
"""Picks the permission option (its id) to answer a request with; None: cancelled."""


def choose(kind: str) -> Answer:
    """Answers with the first option of ``kind`` (``allow_once``, ``reject_once``, …)."""

    def answer(request: Any) -> str | None:
        return str(next(o.option_id for o in request.options if o.kind == kind))

    return answer


allow_once = choose("allow_once")


@dataclass
class Editor:
    """The client side: what the gateway sent, and how to answer it."""

    answer: Answer = allow_once
    form_answers: dict[str, Any] | None = None
    """The content an elicitation form is accepted with (None: declined)."""
    hold: bool = False
    """Permission requests and forms are shown and never answered (the user is away until
    the connection drops)."""
    decided: asyncio.Event | None = None
    """When given, permissions and forms are answered only once it is set (a user who has
    not decided yet)."""
    updates: list[tuple[str, Any]] = field(default_factory=list)
    permissions: list[Any] = field(default_factory=list)
    forms: list[Any] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.arrived.set()

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> RequestPermissionResponse:
        request = _Asked(options=options, session_id=session_id, tool_call=tool_call, meta=kwargs)
        self.permissions.append(request)
        self.arrived.set()
        if self.hold:
            await asyncio.Event().wait()
        if self.decided is not None:
            await self.decided.wait()
        chosen = self.answer(request)
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen)
        )

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.forms.append((message, mode, kwargs))
        self.arrived.set()
        if self.hold:
            await asyncio.Event().wait()
        if self.decided is not None:
            await self.decided.wait()
        if self.form_answers is None:
            return DeclineElicitationResponse(action="decline")
        return AcceptElicitationResponse(action="accept", content=self.form_answers)

    def texts(self, kind: str = "agent_message_chunk") -> str:
        """The text of every update of ``kind``, in order."""
        return "".join(u.content.text for _, u in self.updates if u.session_update == kind)

    def seqs(self) -> list[int]:
        """The event seq of each update (from ``_meta.agentGateway``)."""
        return [
            u.field_meta["agentGateway"]["seq"]
            for _, u in self.updates
            if u.field_meta and "seq" in u.field_meta["agentGateway"]
        ]

    async def wait_for(self, condition: Callable[[], Any], limit_s: float = 30.0) -> Any:
        """Until ``condition()`` is truthy, woken by each update or request."""
        async with asyncio.timeout(limit_s):
            while not (result := condition()):
                self.arrived.clear()
                await self.arrived.wait()
            return result


@dataclass
class _Asked:
    options: list[Any]
    session_id: str
    tool_call: Any
    meta: dict[str, Any]


def capabilities(*, forms: bool = False) -> ClientCapabilities:
    return ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
        terminal=False,
        elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()) if forms else None,
    )


@contextlib.asynccontextmanager
async def connected(
    gateway: GatewayProcess,
    editor: Editor,
    *,
    token: str = TOKEN,
    forms: bool = False,
    initialize: bool = True,
    via: str | None = None,
) -> AsyncIterator[ClientSideConnection]:
    """The SDK's client connected to the gateway's ``/v1/acp`` (and initialized); ``via``:
    another ``ws://host:port`` that leads to it (a proxy)."""
    transport = await create_websocket_stream(
        f"{via or gateway.ws_url}/v1/acp", headers={"Authorization": f"Bearer {token}"}
    )
    # The SDK's Client protocol, as far as these tests answer it.
    client = cast(Client, editor)
    connection = connect_to_agent(client, transport, use_unstable_protocol=True)
    try:
        if initialize:
            await connection.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=capabilities(forms=forms),
                client_info=Implementation(name="test-editor", version="1"),
            )
        yield connection
    finally:
        await connection.close()
