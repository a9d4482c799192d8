"""One turn of one Codex thread: ``turn/start``, then follow the thread's inbox to its end.

The inbox is fed by the JSON-RPC reader (notifications, server requests, ``Disconnected``)
and by the turn itself (an approval answered, an interrupt asked for). Events go to the
hooks, approvals become tasks waiting on the client, ``turn/completed`` ends the turn.
Deadlines, not polling, end a turn that goes quiet (``turn_idle_timeout_s``, paused while an
approval waits) and an interrupt Codex never confirms (``interrupt_grace_s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from pydantic import JsonValue

from app.events import FailureKind, TurnError
from app.process.queues import next_item
from app.providers.base import SessionSpec, TurnHooks, TurnOutcome
from app.providers.codex.approvals import (
    APPROVAL_METHODS,
    approval_request,
    auto_accepts,
    decision_result,
)
from app.providers.codex.classifier import (
    PROVIDER,
    error_for_rpc,
    interrupted_error,
    server_lost_error,
)
from app.providers.codex.jsonrpc import (
    ConnectionLost,
    Disconnected,
    InboxItem,
    JsonRpcClient,
    RpcError,
    RpcFailure,
    RpcTimeout,
)
from app.providers.codex.normalizer import RequestResolved, TurnEnded, TurnNormalizer
from app.providers.codex.protocol import Notification, ServerRequest

if TYPE_CHECKING:
    from app.providers.codex.provider import CodexProvider

__all__ = ["CodexTurn", "Inbox", "failed", "server_failure", "turn_error"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _ApprovalDone:
    request_id: str


@dataclass(frozen=True, slots=True)
class _Wake:
    """Something outside the inbox changed (an interrupt): recompute the deadlines."""


Inbox: TypeAlias = "asyncio.Queue[InboxItem | _ApprovalDone | _Wake]"


class CodexTurn:
    """Runs one turn; ``interrupt`` may be called from another task at any time."""

    def __init__(
        self,
        *,
        provider: CodexProvider,
        spec: SessionSpec,
        client: JsonRpcClient,
        inbox: Inbox,
        thread_id: str,
    ) -> None:
        self._provider = provider
        self._settings = provider.settings
        self._spec = spec
        self._client = client
        self._inbox = inbox
        self._thread_id = thread_id
        self.turn_id: str | None = None
        self._interrupt_at: float | None = None
        self._approvals: dict[str, asyncio.Task[None]] = {}
        self._answered: set[str] = set()

    async def run(self, prompt: str, hooks: TurnHooks) -> TurnOutcome:
        """Start the turn and follow it; pending approvals are cancelled when it ends."""
        try:
            return await self._run(prompt, hooks)
        except asyncio.CancelledError:
            # The session is going away mid-turn: stop Codex working on the thread.
            if self.turn_id is not None:
                self._provider.in_background(self.send_interrupt(), name="codex-interrupt")
            raise
        finally:
            for task in self._approvals.values():
                task.cancel()
            await asyncio.gather(*self._approvals.values(), return_exceptions=True)

    async def _run(self, prompt: str, hooks: TurnHooks) -> TurnOutcome:
        params: dict[str, JsonValue] = {
            "threadId": self._thread_id,
            "input": [{"type": "text", "text": prompt}],
        }
        timeout_s = self._provider.server.request_timeout_s
        try:
            result = await self._client.request("turn/start", params, timeout_s=timeout_s)
            turn_id = result["turn"]["id"]
        except RpcError as exc:
            return failed(error_for_rpc(exc.method, exc.code, exc.message))
        except RpcFailure as exc:
            return await server_failure(self._provider, self._client, exc)
        except (KeyError, TypeError) as exc:
            return failed(turn_error("unknown", f"unexpected turn/start answer: {exc}"))
        self.turn_id = str(turn_id)
        if self._interrupt_at is not None:  # asked for while turn/start was in flight
            await self.send_interrupt()
        return await self._follow(hooks, TurnNormalizer(self.turn_id))

    async def _follow(self, hooks: TurnHooks, normalizer: TurnNormalizer) -> TurnOutcome:
        last_activity = time.monotonic()
        while True:
            deadlines = []
            if not self._approvals:  # waiting on a human is not idleness
                deadlines.append(last_activity + self._settings.turn_idle_timeout_s)
            if self._interrupt_at is not None:
                deadlines.append(self._interrupt_at + self._settings.interrupt_grace_s)
            timeout = max(min(deadlines) - time.monotonic(), 0) if deadlines else None
            try:
                item = await next_item(self._inbox, timeout)
            except TimeoutError:
                return self._deadline_passed(last_activity)
            last_activity = time.monotonic()
            match item:
                case Disconnected(reason=reason):
                    return await self._server_lost(reason)
                case ServerRequest():
                    await self._server_request(hooks, normalizer, item)
                case Notification():
                    for produced in normalizer.feed(item):
                        match produced:
                            case TurnEnded(outcome=outcome):
                                return outcome
                            case RequestResolved(request_id=request_id):
                                self._withdraw(request_id)
                            case _:
                                await hooks.emit(produced)
                case _ApprovalDone(request_id=request_id):
                    self._approvals.pop(request_id, None)
                case _Wake():
                    pass

    def _deadline_passed(self, last_activity: float) -> TurnOutcome:
        if self._interrupt_at is not None:
            # Codex accepted turn/interrupt but never ended the turn. The shared server keeps
            # serving everyone else; only this turn is given up.
            return TurnOutcome(
                status="interrupted",
                error=interrupted_error("interrupted by the client (Codex did not confirm)"),
            )
        idle = time.monotonic() - last_activity
        self._provider.in_background(self.send_interrupt(), name="codex-interrupt:idle")
        message = f"Codex sent nothing for {idle:.0f} s (turn_idle_timeout_s)"
        return failed(turn_error("idle_timeout", message, retryable=True))

    async def _server_lost(self, reason: str) -> TurnOutcome:
        if self._interrupt_at is not None:
            return TurnOutcome(status="interrupted", error=interrupted_error())
        process = self._client.process
        with contextlib.suppress(TimeoutError):  # let it be reaped, for its exit status
            async with asyncio.timeout(2 * self._settings.stop_grace_s + 1):
                await process.wait()
        error = server_lost_error(reason, process.returncode, process.stderr_tail)
        return TurnOutcome(status="failed", error=error)

    # --- approvals and other server requests ----------------------------------------------

    async def _server_request(
        self, hooks: TurnHooks, normalizer: TurnNormalizer, request: ServerRequest
    ) -> None:
        approval = None
        if request.method in APPROVAL_METHODS and request.params.get("turnId") == self.turn_id:
            approval = approval_request(request, normalizer.file_changes)
        if approval is None:
            await self._client.refuse(request)
            return
        if auto_accepts(self._spec.approval_mode, approval, self._spec.workspace):
            await self._client.respond(request.id, {"decision": "accept"})
            return

        async def ask() -> None:
            try:
                answer = await hooks.request_approval(approval)
                self._answered.add(approval.request_id)
                available = request.params.get("availableDecisions")
                result = decision_result(answer, approval, available)
                await self._client.respond(request.id, result)
            finally:
                self._inbox.put_nowait(_ApprovalDone(approval.request_id))

        self._approvals[approval.request_id] = asyncio.create_task(
            ask(), name=f"codex-approval:{approval.request_id}"
        )

    def _withdraw(self, request_id: str) -> None:
        # Codex also reports requests it got our answer to; only unanswered ones are withdrawn.
        task = self._approvals.get(request_id)
        if task is not None and request_id not in self._answered:
            task.cancel()

    # --- interrupt ------------------------------------------------------------------------

    async def interrupt(self) -> None:
        """Ask Codex to stop the turn; it then ends as interrupted, confirmed or not."""
        if self._interrupt_at is not None:
            return
        self._interrupt_at = time.monotonic()
        self._inbox.put_nowait(_Wake())
        if self.turn_id is not None:  # else _run sends it once turn/start has answered
            await self.send_interrupt()

    async def send_interrupt(self) -> None:
        """Send ``turn/interrupt``; a server that does not answer it is stopped."""
        params: dict[str, JsonValue] = {"threadId": self._thread_id, "turnId": self.turn_id}
        timeout_s = min(self._provider.server.request_timeout_s, self._settings.interrupt_grace_s)
        try:
            await self._client.request("turn/interrupt", params, timeout_s=timeout_s)
        except RpcTimeout as exc:
            await self._provider.server.kill_unresponsive(self._client, str(exc))
        except (RpcError, ConnectionLost) as exc:
            log.info("codex: turn/interrupt of %s: %s", self.turn_id, exc)


async def server_failure(
    provider: CodexProvider, client: JsonRpcClient, exc: RpcFailure
) -> TurnOutcome:
    """A request of ours timed out or lost its server: the server is of no use now."""
    if isinstance(exc, RpcTimeout):
        await provider.server.kill_unresponsive(client, str(exc))
    reason = "it stopped answering" if isinstance(exc, RpcTimeout) else str(exc)
    process = client.process
    return failed(server_lost_error(reason, process.returncode, process.stderr_tail))


def turn_error(
    kind: FailureKind, message: str, *, retryable: bool = False, stderr_tail: str | None = None
) -> TurnError:
    return TurnError(
        kind=kind, message=message, retryable=retryable, provider=PROVIDER, stderr_tail=stderr_tail
    )


def failed(error: TurnError) -> TurnOutcome:
    return TurnOutcome(status="failed", error=error)
