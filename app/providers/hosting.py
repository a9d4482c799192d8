"""What every provider class shares: it is built from the one ``BuildContext`` and keeps the
sessions it opened, to close them when the gateway stops.

``HostedProvider`` is the base of the providers whose sessions each run their own CLI process
(Claude Code, every ACP agent: ``process_session.ProcessSession``); ``ServerProvider`` adds the
one server every session of Codex or OpenCode talks to (``shared_server.SharedServer``).
"""

from __future__ import annotations

import asyncio
import os
from abc import abstractmethod
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

from app.providers.base import Provider, ProviderSession, SessionSpec
from app.providers.descriptor import BuildContext
from app.providers.shared_server import SharedServer

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
    """A provider whose sessions all talk to one shared server (``self.server``)."""

    server: V

    @property
    def server_pid(self) -> int | None:
        """The pid of the shared server while it runs."""
        info = self.server.info
        return info.pid if info is not None else None

    async def ping(self) -> str | None:
        return await self.server.ping()

    async def aclose(self) -> None:
        """Close every session, then stop the server."""
        await self.close_sessions()
        await self.server.aclose()
