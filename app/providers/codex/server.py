"""The one ``codex app-server`` process every Codex session of the gateway talks to.

    (none) ──first need──► spawn ─► initialize ─► initialized ─► up ──exit / unresponsive──► down
                                                                   ▲                          │
                                                                   └──────── next need ───────┘

The server starts on the first need (a turn, a health ping) and, once it has died or been
stopped for not answering, starts again on the next one with a new client: threads loaded on
an older one must be resumed. A watcher task stops (and reaps) the process as soon as its
output ends or it exits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from app import __version__
from app.process.childspec import ProcessSpec
from app.process.managed import ManagedProcess, ProcessError, SpawnError
from app.process.runner import ProcessRunner
from app.providers.base import ProcessInfo
from app.providers.codex.approvals import refusal
from app.providers.codex.classifier import PROVIDER
from app.providers.codex.jsonrpc import JsonRpcClient, RpcError, RpcFailure, RpcTimeout

__all__ = ["CLIENT_NAME", "CodexServer", "ServerUnavailable"]

log = logging.getLogger(__name__)

CLIENT_NAME = "agent-gateway"
"""``clientInfo.name``: Codex names the client by it in its user agent and logs."""


class ServerUnavailable(Exception):
    """The app-server could not be started (``missing``: the executable does not exist)."""

    def __init__(self, message: str, *, missing: bool = False, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.missing = missing
        self.stderr_tail = stderr_tail


@dataclass(frozen=True)
class _Up:
    process: ManagedProcess
    client: JsonRpcClient
    generation: int  # how many servers have started, this one included
    watcher: asyncio.Task[None]


class CodexServer:
    """Starts, watches and stops the shared app-server; hands out its live client."""

    def __init__(
        self,
        *,
        argv: list[str],
        env: Mapping[str, str],
        runner: ProcessRunner,
        request_timeout_s: float,
        stop_grace_s: float,
    ) -> None:
        self._argv = tuple(argv)
        self._env = dict(env)
        self._runner = runner
        self.request_timeout_s = request_timeout_s
        self._stop_grace_s = stop_grace_s
        self._up: _Up | None = None
        self._lock = asyncio.Lock()
        self._generation = 0
        self._closed = False

    @property
    def info(self) -> ProcessInfo | None:
        """The running server process, if any."""
        up = self._up
        if up is None or up.client.is_closed or up.process.returncode is not None:
            return None
        return ProcessInfo(
            pid=up.process.pid, started_at=up.process.started_at, spawns=up.generation
        )

    async def client(self) -> JsonRpcClient:
        """Return the live, initialized client, starting the server if needed.

        Raises ``ServerUnavailable`` when it cannot start or does not answer ``initialize``
        within the request bound.
        """
        async with self._lock:
            up = self._up
            if up is not None and not up.client.is_closed and up.process.returncode is None:
                return up.client
            if self._closed:
                raise ServerUnavailable("the Codex provider is shut down")
            if up is not None:
                await self._stop(up)
            up = await self._start()
            return up.client

    async def _start(self) -> _Up:
        # The server is shared: its working directory means nothing (every thread names its
        # own cwd), so it runs from "/" rather than from whichever workspace came first.
        spec = ProcessSpec(argv=self._argv, cwd=Path("/"), env=self._env, label=PROVIDER)
        try:
            process = await self._runner.spawn(spec)
        except SpawnError as exc:
            raise ServerUnavailable(
                f"cannot start {self._argv[0]}: {exc.detail}", missing=exc.kind == "cli_missing"
            ) from exc
        except ProcessError as exc:  # the runner is closed: the gateway is shutting down
            raise ServerUnavailable(f"cannot start {self._argv[0]}: {exc}") from exc
        client = JsonRpcClient(process, refuse=refusal)
        self._generation += 1
        up = _Up(
            process=process,
            client=client,
            generation=self._generation,
            watcher=asyncio.create_task(self._watch(process, client), name="codex-watch"),
        )
        self._up = up
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
            await self._stop(up)
            tail = process.stderr_tail.strip()[-4000:]
            raise ServerUnavailable(
                f"the Codex app-server did not start: {exc}; stderr: {tail or '(empty)'}",
                stderr_tail=tail,
            ) from exc
        log.info("codex app-server pid=%d up (generation %d)", process.pid, self._generation)
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
        # Either its output ended or our child exited. The child may be npm's `codex` wrapper,
        # which on Node < 22.15 (no execve) runs the native server as its own child with our
        # pipes: killed alone, it leaves that server running and answering. Stopping the
        # process group ends both, and the output with them. The grace lets a process that is
        # exiting anyway report its own exit status rather than our SIGTERM.
        returncode = await process.stop(grace_s=self._stop_grace_s, term_s=self._stop_grace_s)
        log.warning(
            "codex app-server pid=%d ended (%s, status %s); the next need restarts it",
            process.pid,
            client.closed_reason or "the process exited",
            returncode,
        )

    async def ping(self) -> str | None:
        """``None`` when the server answers a cheap request, else why not.

        Starts the server if it is not running: a health check is a need.
        """
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

    async def _stop(self, up: _Up) -> None:
        up.watcher.cancel()  # a stop on purpose is not worth its warning
        await asyncio.gather(up.watcher, return_exceptions=True)
        await up.process.stop(grace_s=self._stop_grace_s, term_s=self._stop_grace_s)
        await up.client.aclose()
        if self._up is up:
            self._up = None

    async def aclose(self) -> None:
        """Stop the server for good: stdin EOF, grace, then signals (``ManagedProcess.stop``)."""
        async with self._lock:
            self._closed = True
            if self._up is not None:
                await self._stop(self._up)
