"""Reading OpenCode's ``GET /global/event`` stream: SSE framing and event envelopes (pure).

Each SSE message's ``data`` is one JSON object (1.18.33, obs)::

    {"directory": "/abs/workspace", "project": "global",
     "payload": {"id": "evt_…", "type": "message.part.delta", "properties": {"sessionID": …}}}

Server-wide events (``server.connected``, ``server.heartbeat``) have no ``directory``.
``payload.type == "sync"`` messages repeat session events in the durable-log shape and are
skipped. Session events carry ``properties.sessionID`` (permission events too), which is how
the gateway routes them to the session that owns the ``ses_…`` thread.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from app.providers.raw import parse_json

__all__ = ["ServerEvent", "SseDecoder", "parse_event"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerEvent:
    """One event off the stream: its type, its properties, and the thread it belongs to."""

    type: str
    properties: dict[str, Any]
    session_id: str | None


class SseDecoder:
    """Assembles SSE messages from lines (without their line terminators)."""

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: str) -> str | None:
        """Return a complete message's ``data`` at the blank line that ends it, else ``None``.

        ``event:``, ``id:`` and ``retry:`` fields and ``:`` comments are ignored: OpenCode puts
        everything in ``data``.
        """
        if line == "":
            if not self._data:
                return None
            data, self._data = "\n".join(self._data), []
            return data
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value.removeprefix(" "))
        return None


def parse_event(data: str) -> ServerEvent | None:
    """Unwrap one ``/global/event`` message; ``None`` for noise and anything malformed.

    Also accepts a bare ``{"type", "properties"}`` event, the shape of the per-directory
    ``GET /event`` stream.
    """
    try:
        raw = parse_json(data)
    except (ValueError, RecursionError):
        logger.debug("opencode: skipping non-JSON event: %.200r", data)
        return None
    if not isinstance(raw, dict):
        return None
    payload = raw.get("payload", raw)
    if not isinstance(payload, dict):
        return None
    kind = payload.get("type")
    if not isinstance(kind, str) or kind == "sync":
        return None
    properties = payload.get("properties")
    if not isinstance(properties, dict):
        properties = {}
    session_id = properties.get("sessionID")
    return ServerEvent(
        type=kind,
        properties=properties,
        session_id=session_id if isinstance(session_id, str) and session_id else None,
    )
