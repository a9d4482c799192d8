"""The Codex provider: every session is a thread on a ``codex app-server``.

The server speaks JSON-RPC on stdio (reference §2.3) and is started on the first need, then
again after it dies (``server.CodexServer``). With the sandbox off one server is shared by
every session; with it on each session has its own, in its sandbox (``ServerProvider``).
A session starts its thread with ``thread/start`` on its first turn, or continues a known one
with ``thread/resume`` whenever the server it last used is gone (``session.CodexSession``).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from app.process.childspec import child_environment
from app.providers.base import Capabilities, ForkedThread, ForkRequest, SessionSpec
from app.providers.codex import forks
from app.providers.codex.argv import RetryBudget, build_argv
from app.providers.codex.linux_sandbox import helper_directory, native_executable, with_helper
from app.providers.codex.server import CodexServer
from app.providers.codex.session import CodexSession
from app.providers.descriptor import BuildContext
from app.providers.hosting import ServerProvider
from app.providers.shared_server import SHARED, Placement
from app.settings import ConfigError

__all__ = ["PASSTHROUGH_ENV", "CodexProvider"]

log = logging.getLogger(__name__)

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


class CodexProvider(ServerProvider[CodexSession, CodexServer]):
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
        fork=True,
    )

    def __init__(self, context: BuildContext) -> None:
        """Raises ``ConfigError`` when ``settings.config`` holds what a ``-c`` cannot carry.

        ``context.retry`` gives Codex's own retry budgets, set on the custom model provider
        ``settings.config`` selects (``argv.config_overrides``). ``context.workspace_roots``:
        before a thread is started or prompted, its workspace must still be its directory
        inside one of them (None: not checked).
        """
        super().__init__(context)
        settings = self.settings
        budget = RetryBudget(
            request_max_retries=self.retry.cli_request_retries,
            stream_max_retries=self.retry.cli_stream_retries,
        )
        try:
            argv = build_argv(
                executable=self.executable,
                config=settings.config,
                extra_args=settings.extra_args,
                retry=budget,
            )
        except ValueError as exc:
            raise ConfigError(f"providers.codex.config: {exc}") from None
        self._argv = argv
        env = child_environment(self.parent_env, passthrough=PASSTHROUGH_ENV, overlay=settings.env)
        if sys.platform == "linux" and context.state_dir is not None:
            env = _with_sandbox_helper(self.executable, env, context.state_dir)
        self._env = env
        self.server = self.make_server(SHARED)

    def make_server(self, placement: Placement) -> CodexServer:
        return CodexServer(
            argv=self._argv,
            env=self._env,
            runner=self.runner,
            request_timeout_s=self.settings.startup_timeout_s,
            stop_grace_s=self.settings.stop_grace_s,
            placement=placement,
        )

    def new_session(self, spec: SessionSpec) -> CodexSession:
        return CodexSession(provider=self, spec=spec)

    async def fork_thread(self, request: ForkRequest) -> ForkedThread:
        """``thread/fork`` through the turn kept (app/providers/codex/forks.py)."""
        return await forks.fork_thread(self, request)

    async def discard_thread(self, spec: SessionSpec, thread_id: str) -> None:
        await forks.discard_thread(self, spec, thread_id)


def _with_sandbox_helper(executable: str, env: dict[str, str], state_dir: Path) -> dict[str, str]:
    """``env`` with Codex's ``codex-linux-sandbox`` helper on ``PATH`` (``linux_sandbox``):
    without it, Codex's own sandbox cannot run a command under Debian's bwrap 0.8 whenever
    ``CODEX_HOME`` lies in the temporary directory."""
    native = native_executable(executable, env)
    if native is None:
        log.warning("codex: no native Codex executable found behind %s", executable)
        return env
    try:
        return with_helper(env, helper_directory(native, state_dir))
    except OSError as exc:
        log.warning("codex: cannot keep its sandbox helper under %s: %s", state_dir, exc)
        return env
