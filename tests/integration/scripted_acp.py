"""A small ACP WebSocket server on 127.0.0.1 that behaves as docs/acp.md says ``/v1/acp`` does,
driven step by step by a test: the other end of ``agent-gateway-acp`` in its tests.

It keeps what the contract needs the relay to rely on: every event of a session numbered by
``seq`` (``session.created`` and the end of a turn too, which reach no editor), every update
carrying ``_meta.agentGateway {seq, turnId, promptId}``; ``session/load`` replaying the events
after ``_meta.agentGateway.after`` (the user's prompts as ``user_message_chunk``) then
answering with the session's ``seq``; a ``session/prompt`` under a ``promptId`` it has seen
starting no second turn; ``_agentGateway/awaitTurn``; pending approvals asked again, with the
same ``approvalId``, on a connection that loads their session. A test drops connections
(``drop``: no close frame, as a network does), refuses them for a while (``refuse``), and
waits for what the relay sends (``wait_for`` on ``received``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

TIMEOUT_S = 15.0
KEY = "relay-test-key"


@dataclass(eq=False)
class Conn:
    """One relay connection."""

    number: int
    ws: ServerConnection
    ids: itertools.count[int] = field(default_factory=itertools.count)
    asked: dict[int, str] = field(default_factory=dict)
    """Request id of a permission request on this connection → its approval id."""
    closed: bool = False

    async def send(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self.ws.send(json.dumps(message))

    @property
    def close_code(self) -> int | None:
        return self.ws.close_code


@dataclass(eq=False)
class Turn:
    id: str
    session_id: str
    prompt_id: str | None
    stop_reason: str | None = None
    waiters: list[tuple[Conn, Any]] = field(default_factory=list)
    """Who is answered when the turn ends: (connection, request id)."""


@dataclass
class Session:
    id: str
    events: list[tuple[int, dict[str, Any] | None]] = field(default_factory=list)
    """``(seq, session/update params)``; None for an event that reaches no editor."""
    attached: list[Conn] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Approvals asked and not answered: approval id → the request's params."""
    outcomes: dict[str, Any] = field(default_factory=dict)
    """Approval id → the outcome a client answered."""

    @property
    def seq(self) -> int:
        return self.events[-1][0] if self.events else 0

    @property
    def turn(self) -> Turn:
        return self.turns[-1]


def _meta(**fields: Any) -> dict[str, Any]:
    return {"_meta": {"agentGateway": {k: v for k, v in fields.items() if v is not None}}}


class ScriptedGateway:
    """The server; ``async with`` starts and stops it."""

    def __init__(self, *, token: str = KEY) -> None:
        self.token = token
        self.refusing: int | None = None
        """An HTTP status every upgrade gets while set (401: the key is refused)."""
        self.refused = 0
        self.connections: list[Conn] = []
        self.received: list[tuple[int, dict[str, Any]]] = []
        """Every message from a relay, in order, with its connection's number."""
        self.sessions: dict[str, Session] = {}
        self.losing: set[str] = set()
        """Methods whose next message is lost: the connection is cut as it arrives."""
        self.ignoring: set[str] = set()
        """Methods received and never answered while named here."""
        self._changed = asyncio.Event()
        self._server: Server | None = None

    async def __aenter__(self) -> ScriptedGateway:
        self._server = await serve(
            self._serve, "127.0.0.1", 0, process_request=self._gate, max_size=None
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"http://127.0.0.1:{port}"

    # --- waiting ------------------------------------------------------------------------

    def _touch(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, predicate: Callable[[], Any]) -> Any:
        """The first true value of ``predicate``, checked after every change."""
        async with asyncio.timeout(TIMEOUT_S):
            while not (value := predicate()):
                await self._changed.wait()
            return value

    def messages(self, method: str, *, conn: int | None = None) -> list[dict[str, Any]]:
        return [m for n, m in self.received if m.get("method") == method and conn in (None, n)]

    async def connection(self, number: int) -> Conn:
        conn: Conn = await self.wait_for(
            lambda: len(self.connections) >= number and self.connections[number - 1]
        )
        return conn

    # --- the script ---------------------------------------------------------------------

    def drop(self) -> None:
        """Cut every connection, no close frame (the relay sees the network fail)."""
        for conn in self.connections:
            if not conn.closed:
                conn.ws.transport.abort()

    def refuse(self, status: int | None) -> None:
        self.refusing = status

    def log(self, session_id: str, text: str) -> dict[str, Any]:
        """An agent message chunk in the session's log, sent to no one (yet)."""
        session = self.sessions[session_id]
        turn = session.turn
        seq = session.seq + 1
        params = {
            "sessionId": session_id,
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
            },
            **_meta(seq=seq, turnId=turn.id, promptId=turn.prompt_id),
        }
        session.events.append((seq, params))
        return params

    async def update(self, session_id: str, text: str) -> None:
        """An agent message chunk, logged and sent to every connection on the session."""
        params = self.log(session_id, text)
        for conn in list(self.sessions[session_id].attached):
            await conn.send({"jsonrpc": "2.0", "method": "session/update", "params": params})

    async def ask(self, session_id: str, approval_id: str) -> None:
        """A permission request, to every connection on the session and to each that loads
        the session until it is answered."""
        session = self.sessions[session_id]
        session.pending[approval_id] = {
            "sessionId": session_id,
            "toolCall": {"toolCallId": f"call-{approval_id}", "title": "Run `make test`"},
            "options": [
                {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject_once", "name": "Deny", "kind": "reject_once"},
            ],
            **_meta(approvalId=approval_id),
        }
        for conn in list(session.attached):
            await self._ask(conn, session, approval_id)

    async def _ask(self, conn: Conn, session: Session, approval_id: str) -> None:
        id = next(conn.ids)
        conn.asked[id] = approval_id
        params = session.pending[approval_id]
        await conn.send(
            {"jsonrpc": "2.0", "id": id, "method": "session/request_permission", "params": params}
        )

    async def finish(self, session_id: str, stop_reason: str = "end_turn") -> None:
        session = self.sessions[session_id]
        turn = session.turn
        turn.stop_reason = stop_reason
        session.events.append((session.seq + 1, None))
        for conn, id in turn.waiters:
            await conn.send(self._ended(id, session, turn))
        turn.waiters.clear()
        self._touch()

    @staticmethod
    def _ended(id: Any, session: Session, turn: Turn) -> dict[str, Any]:
        result = {"stopReason": turn.stop_reason, **_meta(seq=session.seq, turnId=turn.id)}
        return {"jsonrpc": "2.0", "id": id, "result": result}

    # --- the server ---------------------------------------------------------------------

    def _gate(self, connection: ServerConnection, request: Request) -> Response | None:
        if self.refusing is not None:
            self.refused += 1
            self._touch()
            return connection.respond(HTTPStatus(self.refusing), "refused by the test\n")
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return connection.respond(HTTPStatus.UNAUTHORIZED, "wrong key\n")
        return None

    async def _serve(self, ws: ServerConnection) -> None:
        conn = Conn(len(self.connections) + 1, ws)
        self.connections.append(conn)
        self._touch()
        try:
            async for frame in ws:
                try:
                    message = json.loads(frame)
                except ValueError:
                    error = {"code": -32700, "message": "Parse error"}
                    await conn.send({"jsonrpc": "2.0", "id": None, "error": error})
                    continue
                if message.get("method") in self.losing:
                    self.losing.discard(message["method"])
                    ws.transport.abort()
                    break
                self.received.append((conn.number, message))
                if message.get("method") not in self.ignoring:
                    await self._handle(conn, message)
                self._touch()
        except ConnectionClosed:
            pass
        finally:
            conn.closed = True
            for session in self.sessions.values():
                if conn in session.attached:
                    session.attached.remove(conn)
            self._touch()

    async def _handle(self, conn: Conn, message: dict[str, Any]) -> None:
        method, id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method is None:
            approval_id = conn.asked.pop(id, None) if isinstance(id, int) else None
            for session in self.sessions.values():
                if approval_id in session.pending:
                    del session.pending[approval_id]
                    session.outcomes[approval_id] = message["result"]["outcome"]
                    session.events.append((session.seq + 1, None))
            return
        reply: dict[str, Any] | None
        if method == "initialize":
            reply = {
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": True},
                "authMethods": [],
                "agentInfo": {"name": "scripted-gateway", "version": "0"},
            }
        elif method == "session/new":
            session = Session(f"ses_{len(self.sessions) + 1}", events=[(1, None)])
            self.sessions[session.id] = session
            session.attached.append(conn)
            reply = {"sessionId": session.id, **_meta(seq=session.seq)}
        elif method == "session/load":
            await self._load(conn, self.sessions[params["sessionId"]], id, params)
            return
        elif method == "session/prompt":
            reply = await self._prompt(conn, self.sessions[params["sessionId"]], id, params)
        elif method == "_agentGateway/awaitTurn":
            session = self.sessions[params["sessionId"]]
            turn = next(t for t in session.turns if t.id == params["turnId"])
            if turn.stop_reason is None:
                turn.waiters.append((conn, id))
                return
            reply = self._ended(id, session, turn)["result"]
        elif method == "session/cancel":
            session = self.sessions[params["sessionId"]]
            if session.turns and session.turn.stop_reason is None:
                await self.finish(session.id, "cancelled")
            return
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            await conn.send({"jsonrpc": "2.0", "id": id, "error": error})
            return
        if reply is not None and id is not None:
            await conn.send({"jsonrpc": "2.0", "id": id, "result": reply})

    async def _load(self, conn: Conn, session: Session, id: Any, params: dict[str, Any]) -> None:
        """Replay after ``after``, answer, go live, ask the pending approvals again."""
        after = params.get("_meta", {}).get("agentGateway", {}).get("after", 0)
        for seq, update in session.events:
            if seq > after and update is not None:
                await conn.send({"jsonrpc": "2.0", "method": "session/update", "params": update})
        await conn.send({"jsonrpc": "2.0", "id": id, "result": _meta(seq=session.seq)})
        session.attached.append(conn)
        for approval_id in list(session.pending):
            await self._ask(conn, session, approval_id)

    async def _prompt(
        self, conn: Conn, session: Session, id: Any, params: dict[str, Any]
    ) -> dict[str, Any] | None:
        prompt_id = params.get("_meta", {}).get("agentGateway", {}).get("promptId")
        same = [t for t in session.turns if prompt_id and t.prompt_id == prompt_id]
        if same:
            if same[0].stop_reason is not None:
                ended: dict[str, Any] = self._ended(id, session, same[0])["result"]
                return ended
            same[0].waiters.append((conn, id))
            return None
        if session.turns and session.turn.stop_reason is None:
            error = {"code": -32602, "message": "turn_in_progress"}
            await conn.send({"jsonrpc": "2.0", "id": id, "error": error})
            return None
        turn = Turn(f"trn_{len(session.turns) + 1}", session.id, prompt_id, waiters=[(conn, id)])
        session.turns.append(turn)
        seq = session.seq + 1
        text = "".join(block.get("text", "") for block in params.get("prompt", []))
        update = {
            "sessionId": session.id,
            "update": {
                "sessionUpdate": "user_message_chunk",
                "content": {"type": "text", "text": text},
            },
            **_meta(seq=seq, turnId=turn.id, promptId=prompt_id),
        }
        session.events.append((seq, update))
        for other in session.attached:
            if other is not conn:
                await other.send({"jsonrpc": "2.0", "method": "session/update", "params": update})
        return None
