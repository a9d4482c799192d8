"""JSON-RPC messages of ``codex app-server`` on stdio: one JSON object per line (reference §2.3).

The server omits ``"jsonrpc": "2.0"`` and accepts lines without it, so neither side sends
it. Both sides number their own requests: the server's requests (approvals) use an id
counter of their own starting at 0, so an incoming ``id`` is only ever matched against our
pending requests when the message has no ``method``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pydantic import JsonValue

from app.providers.raw import parse_json

__all__ = [
    "CLIENT_METHODS",
    "CLIENT_NOTIFICATIONS",
    "ERROR_METHOD_NOT_FOUND",
    "ERROR_SERVER_OVERLOADED",
    "Incoming",
    "MethodNotAllowed",
    "Notification",
    "RequestId",
    "Response",
    "ServerRequest",
    "encode_error",
    "encode_notification",
    "encode_request",
    "encode_result",
    "parse_line",
]

logger = logging.getLogger(__name__)

RequestId: TypeAlias = int | str

CLIENT_METHODS = frozenset(
    {
        "initialize",
        "thread/start",
        "thread/resume",
        "thread/unsubscribe",
        "thread/loaded/list",
        # A session's fork (app/providers/codex/forks.py): they read and copy threads only.
        "thread/turns/list",
        "thread/fork",
        "thread/delete",
        "turn/start",
        "turn/interrupt",
    }
)
"""The only requests the gateway ever sends (threat model T15).

codex-cli 0.171.0's app-server accepts 110 client methods (``app-server
generate-json-schema``; 0.169.0 had 109, without ``modelProvider/default/set``), among them
``command/exec``, ``thread/shellCommand``, ``fs/*``, ``config/value/write`` and
``config/batchWrite`` (which could mark a project trusted), ``modelProvider/default/set``,
``plugin/install`` and ``mcpServer/tool/call``: each runs code or changes state outside a
thread's sandbox and approvals. Every outgoing request is encoded here, so a method outside
this set cannot reach the server.
"""

CLIENT_NOTIFICATIONS = frozenset({"initialized"})
"""The only notifications the gateway sends."""

RATE_LIMITS_UPDATED = "account/rateLimits/updated"
"""The account's usage windows (``rateLimits{primary, secondary: {usedPercent, resetsAt}}``),
sent without a thread after every model response, a refused one included (0.169.0, obs)."""

ERROR_METHOD_NOT_FOUND = -32601
ERROR_SERVER_OVERLOADED = -32001
"""Codex's "Server overloaded; retry later." when its ingress queue is full."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Notification:
    """A server notification; ``params`` is the raw object (empty when absent)."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def thread_id(self) -> str | None:
        return _thread_of(self.params)


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerRequest:
    """A request from the server (an approval…) that must be answered with the same ``id``."""

    id: RequestId
    method: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def thread_id(self) -> str | None:
        return _thread_of(self.params)


@dataclass(frozen=True, kw_only=True, slots=True)
class Response:
    """The answer to one of our requests: ``result`` or ``error_code``/``error_message``."""

    id: RequestId
    result: dict[str, Any] | None = None
    error_code: int | None = None
    error_message: str | None = None


Incoming: TypeAlias = Notification | ServerRequest | Response


def parse_line(line: bytes) -> Incoming | None:
    """Classify one stdout line; ``None`` (with a debug log) for anything that is not one."""
    try:
        raw = parse_json(line)
    except (ValueError, RecursionError):
        logger.debug("codex: skipping non-JSON stdout line: %.200r", line)
        return None
    if not isinstance(raw, dict):
        logger.debug("codex: skipping non-object JSON line: %.200r", line)
        return None
    method = raw.get("method")
    params = raw.get("params")
    params = params if isinstance(params, dict) else {}
    raw_id = raw.get("id")
    request_id: RequestId | None = (
        raw_id if isinstance(raw_id, int | str) and not isinstance(raw_id, bool) else None
    )
    if isinstance(method, str):
        if request_id is not None:
            return ServerRequest(id=request_id, method=method, params=params)
        return Notification(method=method, params=params)
    if request_id is None:
        logger.debug("codex: skipping a line that is neither request nor response")
        return None
    error = raw.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        message = error.get("message")
        return Response(
            id=request_id,
            error_code=code if isinstance(code, int) and not isinstance(code, bool) else 0,
            error_message=message if isinstance(message, str) else "unknown error",
        )
    result = raw.get("result")
    return Response(id=request_id, result=result if isinstance(result, dict) else {})


class MethodNotAllowed(ValueError):
    """A request or notification outside the gateway's vocabulary; nothing was sent."""

    def __init__(self, method: str) -> None:
        super().__init__(f"{method!r} is not a Codex method the gateway sends")
        self.method = method


def encode_request(request_id: int, method: str, params: dict[str, JsonValue]) -> bytes:
    """One request line; ``MethodNotAllowed`` unless ``method`` is in ``CLIENT_METHODS``."""
    if method not in CLIENT_METHODS:
        raise MethodNotAllowed(method)
    return _encode({"method": method, "id": request_id, "params": params})


def encode_notification(method: str, params: dict[str, JsonValue] | None = None) -> bytes:
    """One notification line; ``MethodNotAllowed`` unless in ``CLIENT_NOTIFICATIONS``."""
    if method not in CLIENT_NOTIFICATIONS:
        raise MethodNotAllowed(method)
    message: dict[str, JsonValue] = {"method": method}
    if params is not None:
        message["params"] = params
    return _encode(message)


def encode_result(request_id: RequestId, result: dict[str, JsonValue]) -> bytes:
    return _encode({"id": request_id, "result": result})


def encode_error(request_id: RequestId, code: int, message: str) -> bytes:
    return _encode({"id": request_id, "error": {"code": code, "message": message}})


def _encode(message: dict[str, JsonValue]) -> bytes:
    # ASCII escaping keeps the line encodable whatever the prompt holds (lone surrogates).
    return json.dumps(message, separators=(",", ":")).encode("ascii")


def _thread_of(params: dict[str, Any]) -> str | None:
    thread_id = params.get("threadId")
    return thread_id if isinstance(thread_id, str) and thread_id else None
