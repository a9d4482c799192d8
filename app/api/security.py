"""Who is calling: the keys, the token dependencies, and the auth-failure backoff.

Authentication is a route dependency on every route but ``/healthz`` (never path-based
middleware). A key is sent as ``Authorization: Bearer <key>``; browsers' EventSource and
WebSocket, which cannot set headers, may send it as ``?access_token=`` on the SSE events
route (``GET`` with ``Accept: text/event-stream``) and the WebSocket route only. There is
no cookie authentication, so cross-site requests cannot ride on a browser's credentials.

The dependency answers the request's ``Principal``: ``server.token`` is the admin key (name
``admin``), ``server.api_keys`` are named keys. A non-admin key sees only its own sessions.
A client address that keeps presenting wrong keys gets 429 for its failures (correct keys
still pass) once it is over ``limits.auth_failures_per_minute``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Request, WebSocket
from fastapi.routing import APIRoute
from starlette.requests import HTTPConnection

from app.api.ratelimits import KeyedBuckets, SessionQuota
from app.errors import GatewayError, TooManyRequests, Unauthorized
from app.settings import Settings

TOKEN_QUERY = "access_token"  # noqa: S105 - a parameter name, not a secret
ADMIN = "admin"


def load_or_create_token(configured: str | None, data_dir: Path) -> tuple[str, bool]:
    """The configured token, else the one in ``<data_dir>/token`` (created with mode 600).

    Returns the token and whether it was generated just now.
    """
    if configured:
        return configured, False
    path = data_dir / "token"
    if path.exists():
        token = path.read_text().strip()
        if len(token) >= 32:
            return token, False
    data_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    os.chmod(path, 0o600)
    return token, True


@dataclass(frozen=True, kw_only=True)
class Principal:
    """The key a request authenticated with."""

    name: str
    admin: bool

    @property
    def owner_filter(self) -> str | None:
        """The owner a session must have for this key to see it; None (any) for admins."""
        return None if self.admin else self.name


def _digest(value: str) -> bytes:
    # Hashing first makes the comparison independent of the presented value's length.
    return hashlib.sha256(value.encode()).digest()


class KeyRing:
    """The keys this gateway accepts, compared in constant time against every one of them."""

    def __init__(self, keys: Mapping[str, tuple[str, bool]]) -> None:
        self._keys = [
            (_digest(token), Principal(name=name, admin=admin))
            for name, (token, admin) in keys.items()
        ]

    @classmethod
    def from_settings(cls, settings: Settings, admin_token: str) -> KeyRing:
        keys = {ADMIN: (admin_token, True)}
        for key in settings.server.api_keys:
            keys[key.name] = (key.token.get_secret_value(), key.admin)
        return cls(keys)

    def authenticate(self, presented: str) -> Principal | None:
        if not presented:
            return None
        digest = _digest(presented)
        found: Principal | None = None
        for expected, principal in self._keys:  # no early exit: every key is compared
            if hmac.compare_digest(digest, expected):
                found = principal
        return found


@dataclass(frozen=True, kw_only=True)
class AccessControl:
    """What the auth dependencies and the session-creation routes consult (on ``app.state``)."""

    keys: KeyRing
    auth_failures: KeyedBuckets
    sessions: SessionQuota


def install_access_control(app_state: object, settings: Settings, admin_token: str) -> None:
    """Put the key ring and the limiters on ``app.state.access``."""
    limits = settings.limits
    app_state.access = AccessControl(  # type: ignore[attr-defined]
        keys=KeyRing.from_settings(settings, admin_token),
        auth_failures=KeyedBuckets(capacity=limits.auth_failures_per_minute, period_s=60.0),
        sessions=SessionQuota(limits),
    )


def access_of(connection: HTTPConnection) -> AccessControl:
    access: AccessControl = connection.app.state.access
    return access


def _bearer(authorization: str | None) -> str:
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    return ""


def _authenticate(connection: HTTPConnection, presented: str) -> Principal:
    """The principal of ``presented``, else 401 (429 when this address fails too often)."""
    access = access_of(connection)
    principal = access.keys.authenticate(presented)
    if principal is not None:
        return principal
    client = connection.client.host if connection.client else "unknown"
    wait = access.auth_failures.take(client)
    if wait is not None:
        raise TooManyRequests(
            "too many failed authentications from this address "
            "(limits.auth_failures_per_minute); retry after the time in Retry-After",
            retry_after_s=wait,
            limit="auth_failures_per_minute",
        )
    raise Unauthorized(
        "send a gateway key as 'Authorization: Bearer <key>' "
        f"(browsers: ?{TOKEN_QUERY}=<key> on the SSE events URL and the WebSocket URL only)"
    )


async def require_token(request: Request) -> Principal:
    """Route dependency: the request carries a gateway key in its Authorization header."""
    return _authenticate(request, _bearer(request.headers.get("authorization")))


async def require_stream_token(request: Request) -> Principal:
    """The events route: the header, or ``?access_token=`` for an EventSource (SSE) request."""
    presented = _bearer(request.headers.get("authorization"))
    if (
        not presented
        and request.method == "GET"
        and "text/event-stream" in request.headers.get("accept", "")
    ):
        presented = request.query_params.get(TOKEN_QUERY, "")
    return _authenticate(request, presented)


async def require_ws_token(websocket: WebSocket) -> Principal:
    """WebSocket dependency: the header or ``?access_token=``; raises like ``require_token``."""
    presented = _bearer(websocket.headers.get("authorization"))
    return _authenticate(websocket, presented or websocket.query_params.get(TOKEN_QUERY, ""))


AUTH_DEPENDENCIES = frozenset({require_token, require_stream_token, require_ws_token})
"""Every dependency that authenticates; each route but ``/healthz`` has one."""

Authenticated = Annotated[Principal, Depends(require_token)]
StreamAuthenticated = Annotated[Principal, Depends(require_stream_token)]


def _auth_dependency(request: Request) -> Callable[[Request], Awaitable[Principal]] | None:
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return None
    pending = [route.dependant]
    while pending:
        dependant = pending.pop()
        if dependant.call is require_token or dependant.call is require_stream_token:
            return dependant.call
        pending.extend(dependant.dependencies)
    return None


async def authentication_failure(request: Request) -> GatewayError | None:
    """For a request refused before its dependencies ran (a body that is not JSON): the
    401/429 it gets instead when its route needs a key and it has no valid one.

    An unauthenticated caller learns nothing about the request schema this way.
    """
    check = _auth_dependency(request)
    if check is None:
        return None
    try:
        await check(request)
    except GatewayError as exc:
        return exc
    return None
