"""The ACP SDK's message transport over a gateway-managed child process.

The SDK (``acp.connection.Connection``) moves JSON-RPC messages; the process runner moves lines
within its limits (line length, output, memory). This joins the two, so an ACP agent is
spawned, confined, watched and stopped like every other CLI, and the SDK does the protocol.

Two things are settled here, before the SDK sees a message: a line that is not a JSON object
is logged and skipped (no agent prints one, reference/acp-agents.md, but a stray one must not
end the session), and a ``session/update`` of a kind the SDK's schema does not know is logged
and skipped instead of failing validation with a traceback.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, get_args

from acp.meta import CLIENT_METHODS
from acp.schema import SessionNotification

from app.process.managed import LineTooLong, ManagedProcess, ProcessError

log = logging.getLogger(__name__)

KNOWN_UPDATES: frozenset[str] = frozenset(
    get_args(kind.model_fields["session_update"].annotation)[0]
    for kind in get_args(SessionNotification.model_fields["update"].annotation)
)
"""The ``sessionUpdate`` kinds of the pinned SDK's schema, read from it."""

_SESSION_UPDATE = CLIENT_METHODS["session_update"]


TRACE_DIR = os.environ.get("AGENT_GATEWAY_ACP_TRACE")
"""A directory to record every agent's traffic in (``<provider>-<pid>.jsonl``, one
``{"dir", "msg"}`` per line, the fixtures' format); unset records nothing. For comparing an
agent release's protocol with the recorded one (``make agents-latest``), never in production:
prompts and outputs are written as they are."""


class ProcessTransport:
    """``acp._transport.Transport`` over one ``ManagedProcess``'s stdin and stdout."""

    def __init__(self, process: ManagedProcess, *, label: str = "acp") -> None:
        self.process = process
        self._trace = (
            Path(TRACE_DIR) / f"{label.replace(':', '-')}-{process.pid}.jsonl"
            if TRACE_DIR
            else None
        )

    def _record(self, direction: str, message: dict[str, Any]) -> None:
        if self._trace is not None:
            with self._trace.open("a") as trace:
                trace.write(json.dumps({"dir": direction, "msg": message}) + "\n")

    async def send(self, message: dict[str, Any]) -> None:
        self._record("send", message)
        try:
            await self.process.write_line(json.dumps(message, separators=(",", ":")).encode())
        except ProcessError as exc:
            raise ConnectionError(str(exc)) from exc

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                line = await self.process.read_line()
            except (LineTooLong, ProcessError):
                return None  # the process carries why (ManagedProcess.exceeded)
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                log.warning(
                    "acp agent pid %s printed a line that is not JSON; skipped", self.process.pid
                )
                continue
            if not isinstance(message, dict):
                log.warning(
                    "acp agent pid %s printed JSON that is not an object; skipped", self.process.pid
                )
                continue
            self._record("recv", message)
            if message.get("method") == _SESSION_UPDATE:
                kind = _update_kind(message)
                if kind not in KNOWN_UPDATES:
                    log.info(
                        "acp agent pid %s sent an unknown session update %r; skipped",
                        self.process.pid,
                        kind,
                    )
                    continue
            return message

    async def close(self) -> None:
        """The process is stopped by its session, not by the SDK."""


def _update_kind(message: dict[str, Any]) -> object:
    params = message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    return update.get("sessionUpdate") if isinstance(update, dict) else None
