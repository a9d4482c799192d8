"""The Codex provider: every session is a thread on one shared ``codex app-server``.

The server speaks JSON-RPC on stdio (reference §2.3) and is started on the first need, then
again after it dies (``server.CodexServer``). A session starts its thread with
``thread/start`` on its first turn, or continues a known one with ``thread/resume`` whenever
the server it last used is gone (``session.CodexSession``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

from app.process.childspec import child_environment
from app.process.runner import ProcessRunner
from app.providers.base import Capabilities, Provider, SessionSpec
from app.providers.codex.argv import RetryBudget, build_argv
from app.providers.codex.server import CodexServer
from app.providers.codex.session import CodexSession
from app.settings import ConfigError, ProviderSettings, RetrySettings

__all__ = ["PASSTHROUGH_ENV", "CodexProvider"]

PASSTHROUGH_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORGANIZATION",
    "OPENAI_PROJECT",
    "CODEX_API_KEY",
    "CODEX_HOME",
    "CODEX_CA_CERTIFICATE",
)
"""Credentials and endpoints Codex may need from the gateway's own environment."""


class CodexProvider(Provider):
    name = "codex"
    capabilities = Capabilities(
        text_deltas=True,
        approvals=True,
        interrupt=True,
        resume=True,
        usage=True,
        cost=False,  # app-server reports tokens, never money
        shared_process=True,
        approval_edits=False,  # it runs exactly the command or patch it asked about
        model_choice=True,
    )

    def __init__(
        self,
        *,
        settings: ProviderSettings,
        executable: str,
        runner: ProcessRunner,
        parent_env: Mapping[str, str] | None = None,
        retry: RetrySettings | None = None,
        workspace_roots: Sequence[Path] | None = None,
    ) -> None:
        """Raises ``ConfigError`` when ``settings.config`` holds what a ``-c`` cannot carry.

        ``retry`` (default ``RetrySettings()``) gives Codex's own retry budgets, set on the
        custom model provider ``settings.config`` selects (``argv.config_overrides``).
        ``workspace_roots``: before a thread is started or prompted, its workspace must still
        be its directory inside one of them (None: not checked).
        """
        self.settings = settings
        self.workspace_roots = None if workspace_roots is None else tuple(workspace_roots)
        self.executable = executable
        self.retry = RetrySettings() if retry is None else retry
        budget = RetryBudget(
            request_max_retries=self.retry.cli_request_retries,
            stream_max_retries=self.retry.cli_stream_retries,
        )
        try:
            argv = build_argv(
                executable=executable,
                config=settings.config,
                extra_args=settings.extra_args,
                retry=budget,
            )
        except ValueError as exc:
            raise ConfigError(f"providers.codex.config: {exc}") from None
        env = child_environment(
            dict(os.environ if parent_env is None else parent_env),
            passthrough=PASSTHROUGH_ENV,
            overlay=settings.env,
        )
        self.server = CodexServer(
            argv=argv,
            env=env,
            runner=runner,
            request_timeout_s=settings.startup_timeout_s,
            stop_grace_s=settings.stop_grace_s,
        )
        self._sessions: set[CodexSession] = set()
        self._background: set[asyncio.Task[None]] = set()

    @property
    def server_pid(self) -> int | None:
        """The pid of the running app-server, if one runs."""
        info = self.server.info
        return info.pid if info is not None else None

    async def ping(self) -> str | None:
        return await self.server.ping()

    def open_session(self, spec: SessionSpec) -> CodexSession:
        session = CodexSession(provider=self, spec=spec)
        self._sessions.add(session)
        return session

    def forget(self, session: CodexSession) -> None:
        self._sessions.discard(session)

    def in_background(self, work: Coroutine[Any, Any, None], *, name: str) -> None:
        """Run best-effort ``work`` (an interrupt nobody waits for) owned by the provider."""
        task = asyncio.create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        await asyncio.gather(*(s.close() for s in list(self._sessions)), return_exceptions=True)
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.server.aclose()
