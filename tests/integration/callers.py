"""Callers of a running gateway: keys, clients, sessions, and the answers they get.

Requests httpx cannot express (two Host headers, absolute-form targets, huge heads, upgrades
with exactly the headers given) go over raw sockets.
"""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute, APIWebSocketRoute
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.fakes.gateway import FakeGateway

PROBLEM = "application/problem+json"
ALICE = "alice-key-0123456789abcdefghijklmnopqrstuvwxyz"
BOB = "bob-key-0123456789abcdefghijklmnopqrstuvwxyz0123"
KEYS = {"api_keys": [{"name": "alice", "token": ALICE}, {"name": "bob", "token": BOB}]}
"""``server`` settings with two named keys besides the admin token."""
OPEN_ROUTES = {"/healthz", "/", "/docs", "/redoc", "/console", "/console/", "/console/{name}"}
"""Routes that answer without a token: /healthz says nothing but "ok"; the console's routes
serve its static files only (app/api/console.py; the page asks for a key itself); / redirects
to the console; /docs and /redoc say where the documentation is."""


def assert_problem(
    response: httpx.Response, status: int, slug: str | None = None
) -> dict[str, Any]:
    """A problem+json answer with this status (and type), a detail and no stack trace."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["detail"]
    if slug is not None:
        assert body["type"] == f"urn:agent-gateway:problem:{slug}", body
    assert "Traceback" not in response.text
    return body


def as_key(gateway: FakeGateway, token: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.Client(base_url=gateway.base_url, headers=headers, timeout=30.0)


def new_session(client: httpx.Client, workspace: Path) -> str:
    """A new session in ``workspace``; its id."""
    response = client.post("/v1/sessions", json={"workspace": str(workspace)})
    assert response.status_code == 201, response.text
    session_id: str = response.json()["id"]
    return session_id


def create(client: httpx.Client, gateway: FakeGateway) -> str:
    """A new session in the gateway's workspace; its id."""
    return new_session(client, gateway.workspace)


def session_count(gateway: FakeGateway) -> int:
    with gateway.client() as client:
        return len(client.get("/v1/sessions", params={"limit": 500}).json()["sessions"])


def untouched(gateway: FakeGateway, session_id: str) -> None:
    """The session ran no turn and has no CLI process."""
    with gateway.client() as client:
        assert client.get(f"/v1/sessions/{session_id}/turns").json()["turns"] == []
        session = client.get(f"/v1/sessions/{session_id}").json()
        assert session["process"] is None
        assert session["status"] == "idle"


def raw(port: int, head: bytes, body: bytes = b"") -> tuple[int, str]:
    """Send bytes as they are; the status and the raw answer (status 0: closed unanswered)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        # The server may answer and close before it has read everything.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(head + body)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    text = answer.decode("latin-1")
    match = re.match(r"HTTP/1\.1 (\d{3})", text)
    return (int(match.group(1)) if match else 0), text


def raw_upgrade(port: int, path: str, *headers: str) -> tuple[int, str]:
    """A WebSocket upgrade with exactly the headers given (Host included); its HTTP answer."""
    head = [
        f"GET {path} HTTP/1.1",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        *headers,
    ]
    return raw(port, ("\r\n".join(head) + "\r\n\r\n").encode())


def drain_until_closed(ws: ClientConnection) -> ConnectionClosed:
    """Read frames until the server closes the connection; the close."""
    for _ in range(1000):
        try:
            ws.recv(timeout=10)
        except ConnectionClosed as closed:
            return closed
    raise AssertionError("the server kept the connection open")


def ws_refusal(url: str, headers: dict[str, str]) -> InvalidStatus:
    """The HTTP answer to a WebSocket upgrade the server must refuse."""
    with pytest.raises(InvalidStatus) as refused:
        connect(url, additional_headers=headers, open_timeout=10)
    return refused.value


def routes(app: FastAPI) -> Iterator[Any]:
    """The app's routes, with those of included routers (FastAPI keeps them nested) too."""

    def flat(found: list[Any]) -> Iterator[Any]:
        for route in found:
            included = getattr(route, "original_router", None)
            yield from flat(list(included.routes)) if included is not None else [route]

    return flat(list(app.routes))


def route_table(app: FastAPI) -> tuple[list[tuple[str, str]], list[str]]:
    """(method, path) of every HTTP route and the paths of the WebSocket routes."""
    http: list[tuple[str, str]] = []
    ws: list[str] = []
    for route in routes(app):
        if isinstance(route, APIRoute):
            http.extend((method, route.path) for method in sorted(route.methods or ()))
        elif isinstance(route, APIWebSocketRoute):
            ws.append(route.path)
    return http, ws
