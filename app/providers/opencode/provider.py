"""The OpenCode provider: every session is a ``ses_…`` thread on an ``opencode serve``: one
shared by every session with the sandbox off, each session's own in its sandbox with it on.

A session's first turn creates its thread (``POST /session`` with the approval mode's
permission ruleset) and binds it; every turn is ``POST /session/{id}/prompt_async`` followed
on the event stream until the thread goes idle. Permission requests become approvals and are
answered with ``POST /permission/{id}/reply``; an interrupt is ``POST /session/{id}/abort``.
A thread outlives the server process and the gateway: the next turn just prompts it again.
"""

from __future__ import annotations

from dataclasses import replace

from app.providers.base import Capabilities, ForkedThread, ForkRequest, SessionSpec
from app.providers.descriptor import BuildContext
from app.providers.hosting import ServerProvider
from app.providers.opencode import forks
from app.providers.opencode.server import OpenCodeServer
from app.providers.opencode.session import NAME, OpenCodeSession
from app.providers.shared_server import SHARED, Placement

__all__ = ["OpenCodeProvider"]


class OpenCodeProvider(ServerProvider[OpenCodeSession, OpenCodeServer]):
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

    def __init__(self, context: BuildContext) -> None:
        """``context.workspace_roots``: before a thread is created or prompted, its workspace
        must still be its directory inside one of them (None: not checked). OpenCode 1.18.33
        has no retry knob (5 retries, honouring retry-after): ``context.retry`` is not used."""
        super().__init__(context)
        self.server = self.make_server(SHARED)
        if self.sandbox.on:
            # A fork can be moved to its own workspace only in a data directory of its own
            # (app/providers/opencode/forks.py).
            self.capabilities = replace(self.capabilities, fork=True)

    def make_server(self, placement: Placement) -> OpenCodeServer:
        return OpenCodeServer(
            executable=self.executable,
            settings=self.settings,
            runner=self.runner,
            parent_env=self.parent_env,
            placement=placement,
        )

    def new_session(self, spec: SessionSpec) -> OpenCodeSession:
        return OpenCodeSession(provider=self, spec=spec)

    async def fork_thread(self, request: ForkRequest) -> ForkedThread | None:
        """``POST /session/{id}/fork`` before the turn after the kept ones, with the sandbox
        on only (app/providers/opencode/forks.py)."""
        return await forks.fork_thread(self, request)
