"""A ``codex app-server`` process: shared by every Codex session, or one sandboxed session's.

    (none) ──first need──► spawn ─► initialize ─► initialized ─► up ──exit / unresponsive──► down
                                                                   ▲                          │
                                                                   └──────── next need ───────┘

The lifecycle is the shared one (``app.providers.shared_server``): started on the first need
(a turn, a health ping), and once it has died or been stopped (for not answering, or because
its session went idle), started again on the next one with a new client: threads loaded on an
older one must be resumed. A watcher task stops (and reaps) the process as soon as its output
ends or it exits.

With the sandbox off, one server serves every session from ``/``. With it on, each session
has its own (``Placement``), in its sandbox: its workspace and its own home, whose
``CODEX_HOME`` (``$HOME/.codex``) keeps the session's threads on disk between servers, so a
thread started on one process is resumed on the next.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from app import __version__
from app.process.managed import ManagedProcess
from app.process.runner import ProcessRunner
from app.providers.codex.approvals import refusal
from app.providers.codex.classifier import PROVIDER
from app.providers.codex.jsonrpc import JsonRpcClient, RpcError, RpcFailure, RpcTimeout
from app.providers.shared_server import SHARED, Placement, ServerUnavailable, SharedServer, Up

__all__ = ["CLIENT_NAME", "CodexServer", "ServerUnavailable"]

log = logging.getLogger(__name__)

CLIENT_NAME = "agent-gateway"
"""``clientInfo.name``: Codex names the client by it in its user agent and logs."""


@dataclass(eq=False, kw_only=True)
class _Up(Up):
    client: JsonRpcClient


class CodexServer(SharedServer[_Up, JsonRpcClient]):
    """Starts, watches and stops an app-server; hands out its live client."""

    title = "codex app-server"
    owner = "Codex"
    label = PROVIDER

    def __init__(
        self,
        *,
        argv: list[str],
        env: Mapping[str, str],
        runner: ProcessRunner,
        request_timeout_s: float,
        stop_grace_s: float,
        placement: Placement = SHARED,
    ) -> None:
        super().__init__(runner=runner, stop_grace_s=stop_grace_s, placement=placement)
        self._argv = tuple(argv)
        self._env = dict(env)
        self.request_timeout_s = request_timeout_s

    async def client(self) -> JsonRpcClient:
        """Return the live, initialized client, starting the server if needed.

        Raises ``ServerUnavailable`` when it cannot start or does not answer ``initialize``
        within the request bound.
        """
        return await self.ensure()

    def _alive(self, up: _Up) -> bool:
        return not up.client.is_closed and up.process.returncode is None

    def _handle(self, up: _Up) -> JsonRpcClient:
        return up.client

    async def _start(self) -> _Up:
        process = await self._spawn(self._argv, self._env)
        client = JsonRpcClient(process, refuse=refusal)
        up = _Up(process=process, client=client, generation=self._generation)
        up.watcher = asyncio.create_task(self._watch(process, client), name="codex-watch")
        try:
            await client.request(
                "initialize",
                {
                    "clientInfo": {
                        "name": CLIENT_NAME,
                        "title": "Agent Gateway",
                        "version": __version__,
                    },
                    "capabilities": {"experimentalApi": False},
                },
                timeout_s=self.request_timeout_s,
            )
            await client.notify("initialized")
        except RpcFailure as exc:
            await self._retire(up)
            tail = process.stderr_tail.strip()[-4000:]
            raise ServerUnavailable(
                f"the Codex app-server did not start: {exc}; stderr: {tail or '(empty)'}",
                stderr_tail=tail,
            ) from exc
        log.info(
            "codex app-server pid=%d up (generation %d%s)",
            process.pid,
            up.generation,
            f", session {self.placement.session_id}" if self.placement.confined else "",
        )
        return up

    async def _watch(self, process: ManagedProcess, client: JsonRpcClient) -> None:
        waits = {
            asyncio.ensure_future(client.closed.wait()),
            asyncio.ensure_future(process.wait()),
        }
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        # Either its output ended or our child exited: stop the whole group (``_reap``).
        returncode = await self._reap(process)
        self._ended(process, f"{client.closed_reason or 'the process exited'}, status {returncode}")

    async def ping(self) -> str | None:
        try:
            client = await self.client()
        except ServerUnavailable as exc:
            return str(exc)
        try:
            await client.request(
                "thread/loaded/list", {"limit": 1}, timeout_s=self.request_timeout_s
            )
        except RpcError:
            return None  # an error is an answer
        except RpcTimeout as exc:
            await self.kill_unresponsive(client, str(exc))
            return f"the Codex app-server did not answer: {exc}"
        except RpcFailure as exc:
            return f"the Codex app-server is gone: {exc}"
        return None

    async def kill_unresponsive(self, client: JsonRpcClient, reason: str) -> None:
        """Stop the server behind ``client`` because it stopped answering (not for one turn)."""
        up = self._up
        if up is None or up.client is not client or client.is_closed:
            return
        log.error(
            "codex app-server pid=%d is unresponsive (%s); stopping it", up.process.pid, reason
        )
        # Ending the process ends its output: every session's turn learns it from its inbox.
        await up.process.stop(grace_s=0, term_s=self._stop_grace_s)

    async def _retire(self, up: _Up, *, at_once: bool = False) -> None:
        if up.watcher is not None:
            up.watcher.cancel()  # a stop on purpose is not worth its warning
            await asyncio.gather(up.watcher, return_exceptions=True)
        if at_once:
            await up.process.stop(grace_s=0, term_s=0)
        else:
            await up.process.stop(grace_s=self._stop_grace_s, term_s=self._stop_grace_s)
        await up.client.aclose()
        if self._up is up:
            self._up = None

    async def _shut(self, up: _Up, *, at_once: bool) -> None:
        """Stdin EOF, grace, then signals (``ManagedProcess.stop``); ``at_once``: SIGKILL."""
        await self._retire(up, at_once=at_once)
