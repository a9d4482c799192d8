"""Who is calling: the keys, the token dependencies, and the auth-failure backoff.

Authentication is a route dependency on every route but ``/healthz`` (never path-based
middleware). A key is sent as ``Authorization: Bearer <key>``; browsers' EventSource and
WebSocket, which cannot set headers, may send it as ``?access_token=`` on the SSE events
route (``GET`` with ``Accept: text/event-stream``) and the WebSocket route only. There is
no cookie authentication, so cross-site requests cannot ride on a browser's credentials.

The dependency answers the request's ``Principal``: ``server.token`` is the admin key (name
``admin``) — when it is not configured, the token in ``<data_dir>/token``, re-read whenever
that file changes (``agent-gateway token rotate``) — and ``server.api_keys`` are named
keys. A non-admin key sees only its own sessions.
A client address that keeps presenting wrong keys gets 429 for its failures (correct keys
still pass) once it is over ``limits.auth_failures_per_minute``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Request, WebSocket
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from redis.asyncio import Redis
from starlette.requests import HTTPConnection

from app.api.queries import refuse_unknown_query
from app.api.ratelimits import Buckets, KeyedBuckets, SessionQuota, redis_lock
from app.cluster.buckets import SharedBuckets
from app.errors import GatewayError, TooManyRequests, Unauthorized
from app.settings import Settings
from app.store.files import private_directory

TOKEN_QUERY = "access_token"  # noqa: S105 - a parameter name, not a secret
ADMIN = "admin"


TOKEN_FILE = "token"  # noqa: S105 - a file name, not a secret
MIN_TOKEN_CHARS = 32
"""A token file holding less is treated as holding none."""

log = logging.getLogger(__name__)


def token_path(data_dir: Path) -> Path:
    """Where the admin token lives when ``server.token`` is not configured."""
    return data_dir / TOKEN_FILE


def read_token_file(path: Path) -> str | None:
    """The token in ``path``, or None when it is missing, unreadable or too short."""
    try:
        token = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return token if len(token) >= MIN_TOKEN_CHARS else None


def write_token_file(path: Path) -> str:
    """Replace ``path`` with a new random token, atomically, mode 600; return the token.

    The token is written to a temporary file in the same directory, synced and renamed
    over ``path``: a reader (a running gateway) sees the old token or the new one, never
    a partial file.
    """
    private_directory(path.parent)
    token = secrets.token_urlsafe(32)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")  # mode 600
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(token + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a crash
    finally:
        os.close(directory)
    return token


def load_or_create_token(configured: str | None, data_dir: Path) -> tuple[str, bool]:
    """The configured token, else the one in ``<data_dir>/token`` (created with mode 600).

    Returns the token and whether it was generated just now. The data directory is made
    private (0700) either way: it holds the database too.
    """
    private_directory(data_dir)
    if configured:
        return configured, False
    path = token_path(data_dir)
    token = read_token_file(path)
    if token is not None:
        return token, False
    return write_token_file(path), True


@dataclass(frozen=True, kw_only=True)
class Principal:
    """The key a request authenticated with."""

    name: str
    admin: bool

    @property
    def owner_filter(self) -> str | None:
        """The owner a session must have for this key to see it; None (any) for admins."""
        return None if self.admin else self.name


_ADMIN_PRINCIPAL = Principal(name=ADMIN, admin=True)


def _digest(value: str) -> bytes:
    # Hashing first makes the comparison independent of the presented value's length.
    return hashlib.sha256(value.encode()).digest()


class TokenFile:
    """The admin token as the token file says it now: re-read when the file changes.

    ``digest()`` (and ``check()``) stats the file on every call and re-reads it when its
    (inode, mtime, size) differ from the last look, so ``agent-gateway token rotate`` takes
    effect on the next request. A file that is gone, unreadable or too short keeps the last
    good token (never none, never any) and logs a warning once per change.

    A new token is handed to ``issued`` before anything else sees it (the secret mask: it is
    masked from the moment the gateway knows it), then the connections opened with the old
    one are told (``watch``), on the event loop they were opened on.
    """

    def __init__(
        self, path: Path, token: str, *, issued: Callable[[str], object] | None = None
    ) -> None:
        self.path = path
        self._digest = _digest(token)
        self._seen = self._signature()
        self._issued = issued
        self._watchers: dict[bytes, list[tuple[asyncio.AbstractEventLoop, Callable[[], None]]]] = {}

    def _signature(self) -> tuple[int, int, int] | None:
        try:
            status = self.path.stat()
        except OSError:
            return None
        return status.st_ino, status.st_mtime_ns, status.st_size

    def check(self) -> None:
        """Look at the file now (a periodic task and the mask call this between requests)."""
        self.digest()

    def digest(self) -> bytes:
        """The SHA-256 of the current admin token."""
        signature = self._signature()
        if signature != self._seen:
            self._seen = signature
            token = read_token_file(self.path)
            if token is None:
                log.warning(
                    "the admin token file %s is missing, unreadable or shorter than %d "
                    "characters; the admin key stays the last good token until it is fixed "
                    "(agent-gateway token rotate writes a new one)",
                    self.path,
                    MIN_TOKEN_CHARS,
                )
            else:
                self._replace(token)
        return self._digest

    def watch(self, digest: bytes, retired: Callable[[], None]) -> Callable[[], None]:
        """Call ``retired`` (on the running loop) once the token of ``digest`` is replaced;
        returns what stops watching. A digest that is not the current token's is retired
        already: ``retired`` is called soon."""
        loop = asyncio.get_running_loop()
        if not hmac.compare_digest(digest, self.digest()):
            loop.call_soon(retired)
            return lambda: None
        entry = (loop, retired)
        self._watchers.setdefault(digest, []).append(entry)

        def unwatch() -> None:
            with contextlib.suppress(KeyError, ValueError):
                self._watchers[digest].remove(entry)

        return unwatch

    def _replace(self, token: str) -> None:
        if self._issued is not None:
            self._issued(token)
        fresh, old = _digest(token), self._digest
        self._digest = fresh
        if hmac.compare_digest(fresh, old):
            return
        log.info("admin token changed in %s; the old one is refused", self.path)
        for loop, retired in self._watchers.pop(old, []):
            with contextlib.suppress(RuntimeError):  # that loop is closed: nothing to end
                loop.call_soon_threadsafe(retired)


class KeyRing:
    """The keys this gateway accepts, compared in constant time against every one of them.

    With ``admin_file``, the admin key is whatever that file holds now (see ``TokenFile``).
    """

    def __init__(
        self, keys: Mapping[str, tuple[str, bool]], *, admin_file: TokenFile | None = None
    ) -> None:
        self._keys = [
            (_digest(token), Principal(name=name, admin=admin))
            for name, (token, admin) in keys.items()
        ]
        self._admin_file = admin_file

    @classmethod
    def from_settings(
        cls, settings: Settings, admin_token: str, *, token_file: TokenFile | None = None
    ) -> KeyRing:
        """``server.api_keys`` and the admin key; ``token_file``: the admin key follows it."""
        keys: dict[str, tuple[str, bool]] = {}
        if token_file is None:
            keys[ADMIN] = (admin_token, True)
        for key in settings.server.api_keys:
            keys[key.name] = (key.token.get_secret_value(), key.admin)
        return cls(keys, admin_file=token_file)

    def watch(self, presented: str, retired: Callable[[], None]) -> Callable[[], None]:
        """Call ``retired`` once ``presented`` is no longer a valid key (the admin token file
        replaced it); returns what stops watching. Configured keys change with the
        configuration only, so for them nothing is ever called."""
        if self._admin_file is None:
            return lambda: None
        digest = _digest(presented)
        if any(hmac.compare_digest(digest, expected) for expected, _ in self._keys):
            return lambda: None
        return self._admin_file.watch(digest, retired)

    def authenticate(self, presented: str) -> Principal | None:
        if not presented:
            return None
        digest = _digest(presented)
        keys = self._keys
        if self._admin_file is not None:
            keys = [(self._admin_file.digest(), _ADMIN_PRINCIPAL), *keys]
        found: Principal | None = None
        for expected, principal in keys:  # no early exit: every key is compared
            if hmac.compare_digest(digest, expected):
                found = principal
        return found


@dataclass(frozen=True, kw_only=True)
class AccessControl:
    """What the auth dependencies and the session-creation routes consult (on ``app.state``)."""

    keys: KeyRing
    auth_failures: Buckets
    sessions: SessionQuota


def install_access_control(
    app_state: object,
    settings: Settings,
    admin_token: str,
    *,
    token_file: TokenFile | None = None,
    redis: Redis | None = None,
) -> None:
    """Put the key ring and the limiters on ``app.state.access``.

    ``token_file``: the file ``admin_token`` was read from, when it came from a file (not
    ``server.token``); the admin key then follows that file without a restart. With
    ``redis`` (several replicas), the limits are counted there, once for all replicas.
    """
    limits = settings.limits
    auth_failures: Buckets
    if redis is None:
        auth_failures = KeyedBuckets(capacity=limits.auth_failures_per_minute, period_s=60.0)
        sessions = SessionQuota(limits)
    else:
        auth_failures = SharedBuckets(
            redis, name="auth", capacity=limits.auth_failures_per_minute, period_s=60.0
        )
        creates = SharedBuckets(
            redis, name="creates", capacity=limits.session_creates_per_minute, period_s=60.0
        )
        sessions = SessionQuota(limits, creates=creates, lock=redis_lock(redis))
    app_state.access = AccessControl(  # type: ignore[attr-defined]
        keys=KeyRing.from_settings(settings, admin_token, token_file=token_file),
        auth_failures=auth_failures,
        sessions=sessions,
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


async def _authenticate(connection: HTTPConnection, presented: str) -> Principal:
    """The principal of ``presented``, else 401 (429 when this address fails too often)."""
    access = access_of(connection)
    principal = access.keys.authenticate(presented)
    if principal is not None:
        return principal
    client = connection.client.host if connection.client else "unknown"
    wait = await access.auth_failures.acquire(client)
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
    """Route dependency: the request carries a gateway key in its Authorization header (and,
    once it is authenticated, no query parameter the route does not take)."""
    principal = await _authenticate(request, _bearer(request.headers.get("authorization")))
    refuse_unknown_query(request)
    return principal


async def require_stream_token(request: Request) -> Principal:
    """The events route: the header, or ``?access_token=`` for an EventSource (SSE) request."""
    presented = _bearer(request.headers.get("authorization"))
    if (
        not presented
        and request.method == "GET"
        and "text/event-stream" in request.headers.get("accept", "")
    ):
        presented = request.query_params.get(TOKEN_QUERY, "")
    principal = await _authenticate(request, presented)
    refuse_unknown_query(request, also=frozenset({TOKEN_QUERY}))
    return principal


async def require_ws_token(websocket: WebSocket) -> Principal:
    """WebSocket dependency: the header or ``?access_token=``; raises like ``require_token``."""
    return await _authenticate(websocket, presented_key(websocket))


KEY_RETIRED = "key_retired"
"""Why a stream ended when the key it was opened with stopped being valid (rotated away)."""


def presented_key(connection: HTTPConnection) -> str:
    """The key a stream's request presented: its bearer header, else ``?access_token=``."""
    presented = _bearer(connection.headers.get("authorization"))
    return presented or connection.query_params.get(TOKEN_QUERY, "")


def key_still_valid(connection: HTTPConnection) -> bool:
    """Whether the key ``connection`` was opened with is still accepted (a WebSocket checks
    it before each command)."""
    return access_of(connection).keys.authenticate(presented_key(connection)) is not None


def watch_key(connection: HTTPConnection, retired: Callable[[], None]) -> Callable[[], None]:
    """Call ``retired`` once the key ``connection`` was opened with is rotated away; returns
    what stops watching."""
    return access_of(connection).keys.watch(presented_key(connection), retired)


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
    except RequestValidationError:
        return None  # authenticated; the query it carries is the next thing wrong with it
    return None
