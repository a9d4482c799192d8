"""The OpenCode provider: every session is a ``ses_…`` thread on one shared ``opencode serve``.

A session's first turn creates its thread (``POST /session`` with the approval mode's
permission ruleset) and binds it; every turn is ``POST /session/{id}/prompt_async`` followed
on the event stream until the thread goes idle. Permission requests become approvals and are
answered with ``POST /permission/{id}/reply``; an interrupt is ``POST /session/{id}/abort``.
A thread outlives the server process and the gateway: the next turn just prompts it again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from app.process.runner import ProcessRunner
from app.providers.base import Capabilities, Provider, SessionSpec
from app.providers.opencode.server import OpenCodeServer
from app.providers.opencode.session import NAME, OpenCodeSession
from app.settings import ProviderSettings

__all__ = ["OpenCodeProvider"]


class OpenCodeProvider(Provider):
    name = NAME
    capabilities = Capabilities(
        text_deltas=True,
        approvals=True,
        interrupt=True,
        resume=True,
        usage=True,
        cost=True,
        shared_process=True,
        approval_edits=False,  # a permission reply cannot carry edited input
        model_choice=True,
    )

    def __init__(
        self,
        *,
        settings: ProviderSettings,
        executable: str,
        runner: ProcessRunner,
        parent_env: Mapping[str, str] | None = None,
        workspace_roots: Sequence[Path] | None = None,
    ) -> None:
        """``workspace_roots``: before a thread is created or prompted, its workspace must
        still be its directory inside one of them (None: not checked)."""
        self.settings = settings
        self.workspace_roots = None if workspace_roots is None else tuple(workspace_roots)
        self.server = OpenCodeServer(
            executable=executable,
            settings=settings,
            runner=runner,
            parent_env=os.environ if parent_env is None else parent_env,
        )
        self._sessions: set[OpenCodeSession] = set()

    @property
    def server_pid(self) -> int | None:
        """The pid of the shared server while it runs."""
        info = self.server.info
        return info.pid if info is not None else None

    async def ping(self) -> str | None:
        return await self.server.ping()

    def open_session(self, spec: SessionSpec) -> OpenCodeSession:
        session = OpenCodeSession(provider=self, spec=spec)
        self._sessions.add(session)
        return session

    def forget(self, session: OpenCodeSession) -> None:
        self._sessions.discard(session)

    async def aclose(self) -> None:
        for session in list(self._sessions):
            await session.close()
        await self.server.aclose()
