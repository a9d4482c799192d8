"""One gateway session on OpenCode: its ``ses_…`` thread and the turn that follows it.

    run_turn ─► server up? ─► thread? (POST /session, bind) ─► subscribe ─► prompt_async
        ─► follow the inbox until the normalizer says the thread is idle
           (or the server dies, the abort is not confirmed in time, or nothing happens for
            turn_idle_timeout_s while no approval is pending)

With the sandbox off the session holds no process of its own: ``suspend`` only stops
reporting the shared server. With it on the session has a server of its own
(``ServerProvider.server_for``): ``suspend`` stops it, ``close`` stops it for good, and the
next turn starts a new one in the same sandbox home, where the thread is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.events import FailureKind, Warning
from app.process.workspaces import WorkspaceMoved, check_confined
from app.providers.base import (
    ProcessInfo,
    SessionSpec,
    ThreadSession,
    TurnHooks,
    TurnOutcome,
)
from app.providers.exits import workspace_error
from app.providers.opencode.api import ApiError, OpenCodeApi
from app.providers.opencode.classifier import PROVIDER
from app.providers.opencode.config import model_ref
from app.providers.opencode.follow import TurnFollower
from app.providers.opencode.permissions import permission_ruleset
from app.providers.opencode.server import Delivery, ServerUnavailable
from app.providers.turnloop import TurnLoop, failure

if TYPE_CHECKING:
    from app.providers.hosting import ServerProvider
    from app.providers.opencode.server import OpenCodeServer

__all__ = ["NAME", "OpenCodeSession"]

NAME = PROVIDER

# Bounds the best-effort abort sent when a turn is abandoned (cancelled or timed out).
_ABORT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class _Unreachable:
    """A request got no HTTP answer: the server may be gone."""

    api: OpenCodeApi
    message: str


class _Turn:
    """The running turn's handles, for ``interrupt`` to reach."""

    def __init__(self, api: OpenCodeApi, thread_id: str) -> None:
        self.api = api
        self.thread_id = thread_id
        self.prompted = False
        self.ended = False


class OpenCodeSession(ThreadSession):
    def __init__(self, *, provider: ServerProvider[Any, OpenCodeServer], spec: SessionSpec) -> None:
        super().__init__(spec)
        self._provider = provider
        self._server = provider.server_for(spec)
        self._owns_server = self._server is not provider.server
        self._turn: _Turn | None = None
        self._loop: TurnLoop[Delivery] | None = None
        self._attached = False
        self._model_warned = False

    @property
    def process(self) -> ProcessInfo | None:
        return self._server.info if self._attached else None

    # --- turns ----------------------------------------------------------------------------

    async def run_turn(self, prompt: str, hooks: TurnHooks) -> TurnOutcome:
        if self._closed:
            return failure(PROVIDER, "invalid_request", "the session is closed")
        self._loop = TurnLoop(
            provider=PROVIDER, cli="OpenCode", settings=self._provider.settings, hooks=hooks
        )
        model = self._spec.model or self._provider.settings.model
        if model and model_ref(model) is None and not self._model_warned:
            self._model_warned = True
            await hooks.emit(
                Warning(
                    code="model_ignored",
                    message=f"OpenCode names models as provider/model; {model!r} is not one, "
                    "so the server's default model is used.",
                )
            )
        try:
            outcome = await self._attempt(prompt, hooks, model_ref(model))
            if isinstance(outcome, _Unreachable) and await self._server.unreachable(outcome.api):
                # The server died since the last turn (a dead server ran nothing): the next
                # attempt starts a new one and continues the thread there.
                outcome = await self._attempt(prompt, hooks, model_ref(model))
        finally:
            self._loop = None
        if isinstance(outcome, _Unreachable):
            return failure(PROVIDER, "cli_crashed", outcome.message, retryable=True)
        return outcome

    async def _attempt(
        self, prompt: str, hooks: TurnHooks, model: dict[str, str] | None
    ) -> TurnOutcome | _Unreachable:
        server = self._server
        spec = self._spec
        if self._provider.workspace_roots is not None:
            # Every request hands OpenCode the workspace by path (?directory=), and a server
            # of the session's own starts in it.
            try:
                check_confined(spec.workspace, self._provider.workspace_roots)
            except WorkspaceMoved as exc:
                error = workspace_error(exc.detail, cli="OpenCode", provider=PROVIDER)
                return TurnOutcome(status="failed", error=error)
        try:
            api = await server.ensure()
        except ServerUnavailable as exc:
            kind: FailureKind = "cli_missing" if exc.missing else "cli_crashed"
            return failure(PROVIDER, kind, str(exc), retryable=not exc.missing)
        self._attached = True
        thread_id = self._thread_id
        if thread_id is None:
            try:
                thread_id = await api.create_session(
                    directory=spec.workspace,
                    title=f"Agent Gateway {spec.session_id}",
                    permission=permission_ruleset(spec.approval_mode),
                )
            except ApiError as exc:
                message = f"could not create a thread: {exc}"
                if exc.status is None:
                    return _Unreachable(api, message)
                return failure(PROVIDER, "cli_crashed", message, retryable=True)
            self._thread_id = thread_id
            await hooks.bind_thread(thread_id)
        turn = self._turn = _Turn(api, thread_id)
        with server.subscribe(thread_id) as inbox:
            try:
                return await self._run(turn, prompt, model, inbox, hooks)
            finally:
                self._turn = None
                if turn.prompted and not turn.ended:  # cancelled: stop the agent too
                    await self.abort(turn)

    async def _run(
        self,
        turn: _Turn,
        prompt: str,
        model: dict[str, str] | None,
        inbox: asyncio.Queue[Delivery],
        hooks: TurnHooks,
    ) -> TurnOutcome | _Unreachable:
        sent_at_ms = time.time() * 1000
        try:
            await turn.api.prompt(
                turn.thread_id, directory=self._spec.workspace, text=prompt, model=model
            )
        except ApiError as exc:
            turn.ended = True
            if exc.status == 404:
                # The thread is gone from OpenCode's data directory: the next turn starts anew.
                self._thread_id = None
                return failure(
                    PROVIDER,
                    "context_lost",
                    f"OpenCode no longer knows thread {turn.thread_id}; the next turn starts "
                    f"a new conversation. {exc}",
                )
            message = f"could not send the prompt: {exc}"
            if exc.status is None:
                return _Unreachable(turn.api, message)
            if exc.status in (400, 422):  # the body was refused: sending it again cannot help
                return failure(PROVIDER, "invalid_request", message)
            return failure(PROVIDER, "cli_crashed", message, retryable=True)
        turn.prompted = True
        assert self._loop is not None
        if self._loop.interrupted:  # interrupted while the prompt was on its way
            await self.abort(turn)
        follower = TurnFollower(
            api=turn.api,
            thread_id=turn.thread_id,
            directory=self._spec.workspace,
            loop=self._loop,
            sent_at_ms=sent_at_ms,
            abort=lambda: self.abort(turn),
        )
        outcome = await follower.run(inbox)
        turn.ended = True
        return outcome

    async def abort(self, turn: _Turn) -> None:
        """Ask OpenCode to stop ``turn`` (best effort, bounded)."""
        with contextlib.suppress(ApiError, TimeoutError):
            async with asyncio.timeout(_ABORT_TIMEOUT_S):
                await turn.api.abort(turn.thread_id, directory=self._spec.workspace)

    async def interrupt(self) -> None:
        if self._loop is not None:
            self._loop.interrupt()  # its interrupt_grace_s deadline starts now
        turn = self._turn
        if turn is not None and turn.prompted and not turn.ended:
            await self.abort(turn)

    async def suspend(self) -> None:
        # A shared server stays up; this session just stops holding it. Its own is stopped.
        self._attached = False
        if self._owns_server:
            await self._server.stop()

    async def close(self, *, at_once: bool = False) -> None:
        if at_once and not self._closed and not self._owns_server:
            await self.interrupt()  # the shared server stays up: its turn must stop
        self._closed = True
        self._attached = False
        self._provider.forget(self)
        if self._owns_server:
            await self._server.aclose(at_once=at_once)  # its turn ends with it
