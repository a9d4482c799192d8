"""One turn of one Codex thread: ``turn/start``, then follow the thread's inbox to its end.

The inbox is fed by the JSON-RPC reader (notifications, server requests, ``Disconnected``)
and by the turn itself (an approval answered, an interrupt asked for). Events go to the
hooks, approvals become tasks waiting on the client, ``turn/completed`` ends the turn.
The shared ``TurnLoop`` (app/providers/turnloop.py) owns the deadlines: a turn that goes quiet
(``turn_idle_timeout_s``, paused while an approval waits) and an interrupt Codex never
confirms (``interrupt_grace_s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import JsonValue

from app.events import FailureKind, TurnError
from app.providers.base import ApprovalAnswer, SessionSpec, TurnHooks, TurnOutcome
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
    usage_reset,
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
from app.providers.codex.normalizer import TurnNormalizer
from app.providers.codex.protocol import Notification, ServerRequest
from app.providers.items import ApprovalWithdrawn, TurnEnded, UsageSoFar
from app.providers.turnloop import TurnLoop
from app.providers.turnloop import turn_error as shared_turn_error

if TYPE_CHECKING:
    from app.providers.codex.server import CodexServer
    from app.providers.hosting import ServerProvider

__all__ = ["CodexTurn", "Inbox", "failed", "server_failure", "turn_error"]

log = logging.getLogger(__name__)


Inbox: TypeAlias = "asyncio.Queue[InboxItem]"


class CodexTurn:
    """Runs one turn; ``interrupt`` may be called from another task at any time."""

    def __init__(
        self,
        *,
        provider: ServerProvider[Any, CodexServer],
        server: CodexServer,
        spec: SessionSpec,
        client: JsonRpcClient,
        inbox: Inbox,
        thread_id: str,
        hooks: TurnHooks,
    ) -> None:
        self._provider = provider
        self._server = server
        self._spec = spec
        self._client = client
        self._inbox = inbox
        self._thread_id = thread_id
        self.turn_id: str | None = None
        self._loop: TurnLoop[InboxItem] = TurnLoop(
            provider=PROVIDER, cli="Codex", settings=provider.settings, hooks=hooks
        )
        self._normalizer: TurnNormalizer | None = None

    async def run(self, prompt: str) -> TurnOutcome:
        """Start the turn and follow it; pending approvals are cancelled when it ends."""
        try:
            return await self._run(prompt)
        except asyncio.CancelledError:
            # The session is going away mid-turn: stop Codex working on the thread.
            if self.turn_id is not None:
                self._provider.in_background(self.send_interrupt(), name="codex-interrupt")
            raise

    async def _run(self, prompt: str) -> TurnOutcome:
        params: dict[str, JsonValue] = {
            "threadId": self._thread_id,
            "input": [{"type": "text", "text": prompt}],
        }
        timeout_s = self._server.request_timeout_s
        try:
            result = await self._client.request("turn/start", params, timeout_s=timeout_s)
            turn_id = result["turn"]["id"]
        except RpcError as exc:
            return failed(error_for_rpc(exc.method, exc.code, exc.message))
        except RpcFailure as exc:
            return await server_failure(self._server, self._client, exc)
        except (KeyError, TypeError) as exc:
            return failed(turn_error("unknown", f"unexpected turn/start answer: {exc}"))
        self.turn_id = str(turn_id)
        if self._loop.interrupted:  # asked for while turn/start was in flight
            await self.send_interrupt()
        self._normalizer = TurnNormalizer(self.turn_id)

        async def on_idle() -> None:
            self._provider.in_background(self.send_interrupt(), name="codex-interrupt:idle")

        return await self._loop.run(self._inbox, self._handle, on_idle=on_idle)

    async def _handle(self, item: InboxItem) -> TurnOutcome | None:
        assert self._normalizer is not None
        match item:
            case Disconnected(reason=reason):
                return await self._server_lost(reason)
            case ServerRequest():
                await self._server_request(self._normalizer, item)
            case Notification():
                for produced in self._normalizer.feed(item):
                    match produced:
                        case TurnEnded(outcome=outcome):
                            return self._with_reset(outcome)
                        case ApprovalWithdrawn(request_id=request_id):
                            # Codex also reports requests it got our answer to.
                            self._loop.withdraw(request_id)
                        case UsageSoFar(usage=usage):
                            await self._loop.hooks.report_usage(usage)
                        case _:
                            await self._loop.hooks.emit(produced)
        return None

    def _with_reset(self, outcome: TurnOutcome) -> TurnOutcome:
        """A usage-limit failure, with when the limit resets (from the account's limits)."""
        error = outcome.error
        if error is None or error.kind != "usage_limit" or error.resets_at is not None:
            return outcome
        resets_at = usage_reset(self._client.rate_limits)
        return replace(outcome, error=error.model_copy(update={"resets_at": resets_at}))

    async def _server_lost(self, reason: str) -> TurnOutcome:
        if self._loop.interrupted:
            return TurnOutcome(status="interrupted", error=interrupted_error())
        process = self._client.process
        with contextlib.suppress(TimeoutError):  # let it be reaped, for its exit status
            async with asyncio.timeout(2 * self._provider.settings.stop_grace_s + 1):
                await process.wait()
        error = server_lost_error(reason, process.returncode, process.stderr_tail)
        return TurnOutcome(status="failed", error=error)

    # --- approvals and other server requests ----------------------------------------------

    async def _server_request(self, normalizer: TurnNormalizer, request: ServerRequest) -> None:
        approval = None
        if request.method in APPROVAL_METHODS and request.params.get("turnId") == self.turn_id:
            approval = approval_request(request, normalizer.file_changes)
        if approval is None:
            await self._client.refuse(request)
            return
        if auto_accepts(self._spec.approval_mode, approval, self._spec.workspace):
            await self._client.respond(request.id, {"decision": "accept"})
            return

        async def send(answer: ApprovalAnswer) -> None:
            available = request.params.get("availableDecisions")
            await self._client.respond(request.id, decision_result(answer, approval, available))

        self._loop.ask(approval, send)

    # --- interrupt ------------------------------------------------------------------------

    async def interrupt(self) -> None:
        """Ask Codex to stop the turn; it then ends as interrupted, confirmed or not."""
        if self._loop.interrupted:
            return
        self._loop.interrupt()
        if self.turn_id is not None:  # else _run sends it once turn/start has answered
            await self.send_interrupt()

    async def send_interrupt(self) -> None:
        """Send ``turn/interrupt``; a server that does not answer it is stopped."""
        params: dict[str, JsonValue] = {"threadId": self._thread_id, "turnId": self.turn_id}
        grace_s = self._provider.settings.interrupt_grace_s
        timeout_s = min(self._server.request_timeout_s, grace_s)
        try:
            await self._client.request("turn/interrupt", params, timeout_s=timeout_s)
        except RpcTimeout as exc:
            await self._server.kill_unresponsive(self._client, str(exc))
        except (RpcError, ConnectionLost) as exc:
            log.info("codex: turn/interrupt of %s: %s", self.turn_id, exc)


async def server_failure(
    server: CodexServer, client: JsonRpcClient, exc: RpcFailure
) -> TurnOutcome:
    """A request of ours timed out or lost its server: the server is of no use now."""
    if isinstance(exc, RpcTimeout):
        await server.kill_unresponsive(client, str(exc))
    reason = "it stopped answering" if isinstance(exc, RpcTimeout) else str(exc)
    process = client.process
    return failed(server_lost_error(reason, process.returncode, process.stderr_tail))


def turn_error(
    kind: FailureKind, message: str, *, retryable: bool = False, stderr_tail: str | None = None
) -> TurnError:
    return shared_turn_error(PROVIDER, kind, message, retryable=retryable, stderr_tail=stderr_tail)


def failed(error: TurnError) -> TurnOutcome:
    return TurnOutcome(status="failed", error=error)
