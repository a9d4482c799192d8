"""What every provider class shares: it is built from the one ``BuildContext`` and keeps the
sessions it opened, to close them when the gateway stops.

``HostedProvider`` is the base of the providers whose sessions each run their own CLI process
(Claude Code, every ACP agent: ``process_session.ProcessSession``); ``ServerProvider`` adds the
server the sessions of Codex or OpenCode talk to (``shared_server.SharedServer``): one shared
by every session while the provider's sandbox is off, one of each session's own, in its
sandbox, while it is on (``server_for``; why in ``shared_server``).
"""

from __future__ import annotations

import asyncio
import os
import secrets
from abc import abstractmethod
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any, Generic, TypeVar

from app.providers.base import Provider, ProviderSession, SessionSpec
from app.providers.descriptor import BuildContext
from app.providers.shared_server import Placement, SharedServer

S = TypeVar("S", bound=ProviderSession)
V = TypeVar("V", bound=SharedServer[Any, Any])


class HostedProvider(Provider, Generic[S]):
    """A provider built from ``context``; its sessions are closed with it."""

    def __init__(self, context: BuildContext) -> None:
        self.context = context
        self.settings = context.settings
        self.executable = context.executable
        self.runner = context.runner
        self.parent_env = dict(os.environ if context.parent_env is None else context.parent_env)
        self.retry = context.retry
        self.limits = context.limits
        self.workspace_roots = context.workspace_roots
        self.sandbox = context.sandbox
        self._sessions: set[S] = set()
        self._background: set[asyncio.Task[None]] = set()

    @abstractmethod
    def new_session(self, spec: SessionSpec) -> S:
        """A new session object; nothing is spawned until its first turn."""

    def open_session(self, spec: SessionSpec) -> S:
        session = self.new_session(spec)
        self._sessions.add(session)
        return session

    def forget(self, session: S) -> None:
        """``session`` closed itself: it is no longer closed with the provider."""
        self._sessions.discard(session)

    def in_background(self, work: Coroutine[Any, Any, None], *, name: str) -> None:
        """Run best-effort ``work`` (an interrupt nobody waits for) owned by the provider:
        cancelled, if still running, when the provider closes."""
        task = asyncio.create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def close_sessions(self) -> None:
        """Close every open session at once, then cancel the work left in the background; one
        session that fails does not keep the others open."""
        await asyncio.gather(*(s.close() for s in list(self._sessions)), return_exceptions=True)
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    async def aclose(self) -> None:
        await self.close_sessions()


class ServerProvider(HostedProvider[S], Generic[S, V]):
    """A provider whose sessions talk to a server: ``self.server``, shared by all, while the
    sandbox is off; each session's own (``server_for``) while it is on."""

    server: V
    """The shared server (never started while the sandbox is on)."""

    def __init__(self, context: BuildContext) -> None:
        super().__init__(context)
        if self.sandbox.on:
            # Each session runs a server of its own: it counts as the session's process.
            self.capabilities = replace(type(self).capabilities, shared_process=False)

    @abstractmethod
    def make_server(self, placement: Placement) -> V:
        """A server (not started) placed as ``placement`` says."""

    def server_for(self, spec: SessionSpec) -> V:
        """The server a new session talks to: the shared one, or (sandbox on) its own, run
        in its sandbox from its workspace."""
        if not self.sandbox.on:
            return self.server
        return self.make_server(
            Placement(
                sandbox=self.sandbox,
                session_id=spec.session_id,
                workspace=spec.workspace,
                roots=self.workspace_roots,
                git_dir=spec.git_dir,
            )
        )

    @property
    def server_pid(self) -> int | None:
        """The pid of the shared server while it runs (None while the sandbox is on: every
        session reports its own server as its ``process``)."""
        info = self.server.info
        return info.pid if info is not None else None

    async def ping(self) -> str | None:
        """The shared server answers; with the sandbox on, a throwaway server started in a
        sandbox of its own (an empty home, no workspace) answers and is stopped at once.

        The probe sandbox shows what ``--version`` outside it cannot: that the CLI starts and
        serves with only what a session's sandbox gives it. It runs once per
        ``selection.probe_ttl_s`` and leaves neither process nor home behind.
        """
        if not self.sandbox.on:
            return await self.server.ping()
        probe_id = f"probe-{secrets.token_hex(8)}"
        server = self.make_server(Placement(sandbox=self.sandbox, session_id=probe_id))
        try:
            return await server.ping()
        finally:
            await server.aclose(at_once=True)
            self.sandbox.forget(probe_id)

    async def aclose(self) -> None:
        """Close every session (and with it its own server), then stop the shared server."""
        await self.close_sessions()
        await self.server.aclose()
