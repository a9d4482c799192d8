"""One gateway session on Codex: a thread on an app-server, one turn at a time.

    run_turn ─► server up? ─► thread loaded on this server? ──no──► thread/start | thread/resume
                                          │ yes                                   │
                                          ▼                                       ▼
                               CodexTurn: turn/start, follow the thread's inbox to turn/completed

A thread is loaded on one server process: after that process is gone (and at the first turn
of a session that already has a thread) the next turn resumes it with ``thread/resume``.

The server is the provider's shared one, or, with the sandbox on, the session's own
(``ServerProvider.server_for``): then suspending the session (idle, or to make room) stops
it, closing the session stops it for good, and the next turn starts a new one in the same
sandbox home, where the thread is resumed from disk.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from app.events import FailureKind
from app.process.workspaces import WorkspaceMoved, check_confined
from app.providers.base import ProcessInfo, SessionSpec, ThreadSession, TurnHooks, TurnOutcome
from app.providers.codex.argv import thread_config, thread_policy
from app.providers.codex.classifier import PROVIDER, error_for_resume, error_for_rpc
from app.providers.codex.jsonrpc import InboxItem, JsonRpcClient, RpcError, RpcFailure
from app.providers.codex.protocol import ServerRequest
from app.providers.codex.server import ServerUnavailable
from app.providers.codex.turn import (
    CodexTurn,
    Inbox,
    failed,
    server_failure,
    turn_error,
)
from app.providers.exits import workspace_error

if TYPE_CHECKING:
    from app.providers.codex.server import CodexServer
    from app.providers.hosting import ServerProvider

__all__ = ["CodexSession"]


class CodexSession(ThreadSession):
    """A gateway session's thread, on the shared server or on a server of its own."""

    def __init__(self, *, provider: ServerProvider[Any, CodexServer], spec: SessionSpec) -> None:
        super().__init__(spec)
        self._provider = provider
        self._server = provider.server_for(spec)
        self._owns_server = self._server is not provider.server
        self._client: JsonRpcClient | None = None  # the server the thread is loaded on
        self._inbox: Inbox = asyncio.Queue()
        self._turn: CodexTurn | None = None

    @property
    def process(self) -> ProcessInfo | None:
        """The server while it runs: the shared one (every session reports it), or its own."""
        return self._server.info

    async def run_turn(self, prompt: str, hooks: TurnHooks) -> TurnOutcome:
        if self._closed:
            return failed(turn_error("invalid_request", "the session is closed"))
        roots = self._provider.workspace_roots
        if roots is not None:
            # thread/start, thread/resume and turn/start hand Codex the workspace by path (and
            # a server of the session's own starts in it).
            try:
                check_confined(self._spec.workspace, roots)
            except WorkspaceMoved as exc:
                return failed(workspace_error(exc.detail, cli="Codex", provider=PROVIDER))
        try:
            client = await self._server.client()
        except ServerUnavailable as exc:
            kind: FailureKind = "cli_missing" if exc.missing else "cli_crashed"
            return failed(turn_error(kind, str(exc), stderr_tail=exc.stderr_tail or None))
        not_loaded = await self._load_thread(client, hooks)
        if not_loaded is not None:
            return not_loaded
        assert self._thread_id is not None
        turn = self._turn = CodexTurn(
            provider=self._provider,
            server=self._server,
            spec=self._spec,
            client=client,
            inbox=self._inbox,
            thread_id=self._thread_id,
            hooks=hooks,
        )
        try:
            return await turn.run(prompt)
        finally:
            self._turn = None

    async def _load_thread(self, client: JsonRpcClient, hooks: TurnHooks) -> TurnOutcome | None:
        """Make the thread live on ``client``'s server and route its messages to the inbox.

        Returns the failed outcome when that is impossible; a thread Codex no longer has is
        forgotten, so that the next turn starts a new one.
        """
        if self._client is client:
            return None
        policy, sandbox = thread_policy(self._spec.approval_mode)
        params: dict[str, JsonValue] = {
            "cwd": str(self._spec.workspace),
            "approvalPolicy": policy,
            "sandbox": sandbox,
            # The workspace's own .codex/ (config, hooks, rules) takes effect only when the
            # operator allows it (providers.codex.project_config).
            "config": thread_config(
                self._spec.workspace, project_config=self._provider.settings.project_config
            ),
        }
        if self._spec.model is not None:
            params["model"] = self._spec.model
        timeout_s = self._server.request_timeout_s
        thread_id = self._thread_id
        try:
            if thread_id is None:
                result = await client.request("thread/start", params, timeout_s=timeout_s)
                thread_id = result["thread"]["id"]
                if not isinstance(thread_id, str):
                    raise TypeError("thread/start returned no thread id")
            else:
                # The policy and sandbox are passed again: a resumed thread is not assumed to
                # remember them. excludeTurns: the gateway keeps its own history.
                resume = {"threadId": thread_id, **params, "excludeTurns": True}
                await client.request("thread/resume", resume, timeout_s=timeout_s)
        except RpcError as exc:
            if thread_id is None:
                return failed(error_for_rpc(exc.method, exc.code, exc.message))
            error = error_for_resume(thread_id, exc.code, exc.message)
            if error.kind == "context_lost":
                self._thread_id = None
            return failed(error)
        except RpcFailure as exc:
            return await server_failure(self._server, client, exc)
        except (KeyError, TypeError) as exc:
            return failed(turn_error("unknown", f"unexpected thread/start answer: {exc}"))
        self._inbox = asyncio.Queue()  # nothing queued for an older server matters now
        client.subscribe(thread_id, self._deliver)
        self._client = client
        if thread_id != self._thread_id:
            self._thread_id = thread_id
            await hooks.bind_thread(thread_id)
        return None

    def _deliver(self, item: InboxItem) -> None:
        client = self._client
        if self._turn is None and isinstance(item, ServerRequest) and client is not None:
            # No turn of ours runs (one given up after an interrupt may still run in Codex):
            # nobody would answer, so refuse now rather than leave Codex waiting.
            self._provider.in_background(client.refuse(item), name="codex-refuse")
            return
        self._inbox.put_nowait(item)

    async def interrupt(self) -> None:
        turn = self._turn
        if turn is not None:
            await turn.interrupt()

    async def suspend(self) -> None:
        """A server of the session's own is stopped; the next turn starts another and resumes
        the thread there. A shared one is left alone: an idle thread costs it little, and
        the thread stays loaded (and subscribed) on it.
        """
        if self._owns_server:
            await self._server.stop()

    async def close(self, *, at_once: bool = False) -> None:
        """Forget the thread's routing and unload it from a shared server (best effort,
        bounded), or stop the session's own server for good; ``at_once``: its running turn is
        interrupted first, and its own server killed rather than let exit."""
        if self._closed:
            return
        if at_once and not self._owns_server:
            with contextlib.suppress(RpcFailure):
                await self.interrupt()
        self._closed = True
        self._provider.forget(self)
        client, thread_id = self._client, self._thread_id
        self._client = None
        if self._owns_server:
            # Its turn (if any) ends with the process, as a per-session CLI's does.
            await self._server.aclose(at_once=at_once)
            return
        if client is None or thread_id is None or client.is_closed:
            return
        client.unsubscribe(thread_id, self._deliver)
        with contextlib.suppress(RpcFailure):
            await client.request(
                "thread/unsubscribe",
                {"threadId": thread_id},
                timeout_s=self._provider.settings.stop_grace_s,
            )
