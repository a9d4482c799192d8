"""Following one prompted turn on the event stream until it ends.

The turn ends when the normalizer sees the thread go idle; or when the server dies
(``ServerGone``: failed, or interrupted if an interrupt was asked for); or when an interrupt
is not confirmed within ``interrupt_grace_s``; or when nothing arrives for
``turn_idle_timeout_s`` while no approval is pending (failed ``idle_timeout``, after an
abort). After a cut in the event stream (``StreamResumed``) the thread's status is asked for,
and a turn that ended unseen is finished from the thread's last message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from app.events import FailureKind, TurnError, Warning
from app.providers.base import ApprovalRequest, TurnHooks, TurnOutcome
from app.providers.opencode.api import ApiError, OpenCodeApi
from app.providers.opencode.classifier import PROVIDER
from app.providers.opencode.items import ApprovalAsked, ApprovalWithdrawn, OpenCodeItem, TurnEnded
from app.providers.opencode.normalizer import TurnNormalizer
from app.providers.opencode.permissions import permission_reply
from app.providers.opencode.server import Delivery, ServerGone, StreamResumed
from app.providers.raw import as_dict, as_number
from app.settings import ProviderSettings

__all__ = ["TurnFollower", "failed_outcome", "interrupted_outcome"]

log = logging.getLogger(__name__)


class TurnFollower:
    """Follows one prompted turn's inbox to its end; owns the turn's approval tasks."""

    def __init__(
        self,
        *,
        api: OpenCodeApi,
        thread_id: str,
        directory: Path,
        hooks: TurnHooks,
        settings: ProviderSettings,
        sent_at_ms: float,
        abort: Callable[[], Awaitable[None]],
        interrupted_at: Callable[[], float | None],
    ) -> None:
        self.api = api
        self.thread_id = thread_id
        self.directory = directory
        self.hooks = hooks
        self.settings = settings
        self.sent_at_ms = sent_at_ms  # epoch ms when the prompt was sent
        self._abort = abort
        self._interrupted_at = interrupted_at
        self.normalizer = TurnNormalizer()
        self.approvals: dict[str, asyncio.Task[None]] = {}
        self.answered: set[str] = set()
        self.last_activity = time.monotonic()
        self._poked = asyncio.Event()

    def poke(self) -> None:
        """Re-read the deadlines now (an interrupt was just asked for)."""
        self._poked.set()

    async def run(self, inbox: asyncio.Queue[Delivery]) -> TurnOutcome:
        getter: asyncio.Task[Delivery] | None = None
        poked = asyncio.create_task(self._poked.wait())
        try:
            while True:
                if getter is None:
                    getter = asyncio.create_task(inbox.get())
                if poked.done():
                    self._poked.clear()
                    poked = asyncio.create_task(self._poked.wait())
                pending = {task for task in self.approvals.values() if not task.done()}
                done, _ = await asyncio.wait(
                    {getter, poked, *pending},
                    timeout=self._timeout(pending=bool(pending)),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if not done:
                    outcome = await self._expired(pending=bool(pending))
                    if outcome is not None:
                        return outcome
                    continue
                if getter not in done:
                    if pending & done:  # an approval was answered: the agent goes on
                        self.last_activity = time.monotonic()
                    continue
                self.last_activity = time.monotonic()
                delivery, getter = getter.result(), None
                outcome = await self._handle(delivery)
                if outcome is not None:
                    return outcome
        finally:
            poked.cancel()
            if getter is not None:
                getter.cancel()
            for task in self.approvals.values():
                task.cancel()
            await asyncio.gather(*self.approvals.values(), return_exceptions=True)

    async def _handle(self, delivery: Delivery) -> TurnOutcome | None:
        if isinstance(delivery, ServerGone):
            if self._interrupted_at() is not None:
                return interrupted_outcome(
                    "the server stopped while the turn was being interrupted"
                )
            return TurnOutcome(status="failed", error=delivery.error)
        if isinstance(delivery, StreamResumed):
            items = await self._resync()
        else:
            items = self.normalizer.feed(delivery)
        return await self._act(items)

    async def _act(self, items: list[OpenCodeItem]) -> TurnOutcome | None:
        for item in items:
            match item:
                case TurnEnded(outcome=outcome):
                    return outcome
                case ApprovalAsked(request=request):
                    self.approvals[request.request_id] = asyncio.create_task(
                        self._answer(request), name=f"opencode-approval:{request.request_id}"
                    )
                case ApprovalWithdrawn(request_id=request_id):
                    task = self.approvals.get(request_id)
                    if task is not None and request_id not in self.answered:
                        task.cancel()  # answered elsewhere: withdraw the gateway's approval
                case _:
                    await self.hooks.emit(item)
        return None

    async def _answer(self, request: ApprovalRequest) -> None:
        answer = await self.hooks.request_approval(request)
        self.answered.add(request.request_id)
        try:
            await self.api.reply_permission(
                request.request_id, directory=self.directory, reply=permission_reply(answer)
            )
        except ApiError as exc:  # withdrawn meanwhile (404), or the server is going away
            log.info("opencode: could not answer %s: %s", request.request_id, exc)

    async def _resync(self) -> list[OpenCodeItem]:
        """After a cut in the event stream: end the turn if the thread went idle meanwhile."""
        items: list[OpenCodeItem] = [
            Warning(
                code="event_stream_gap",
                message="The event stream of opencode serve was cut and restored; "
                "some output of this turn may be missing.",
            )
        ]
        api, thread_id = self.api, self.thread_id
        try:
            if thread_id in await api.busy_threads(directory=self.directory):
                self.normalizer.armed = True
                return items
            last = await api.last_message(thread_id, directory=self.directory)
        except ApiError:
            return items  # the server is failing: its ServerGone or the watchdog ends the turn
        info = as_dict(last.get("info")) if last is not None else {}
        created = as_number(as_dict(info.get("time")).get("created"))
        if self.normalizer.armed or (created is not None and created >= self.sent_at_ms):
            items += self.normalizer.finish(last)
        return items  # else the prompt has not started yet: keep waiting

    def _timeout(self, *, pending: bool) -> float | None:
        deadlines = []
        if not pending:  # waiting on a human is not idleness
            deadlines.append(self.last_activity + self.settings.turn_idle_timeout_s)
        interrupt_at = self._interrupted_at()
        if interrupt_at is not None:
            deadlines.append(interrupt_at + self.settings.interrupt_grace_s)
        if not deadlines:
            return None
        return max(min(deadlines) - time.monotonic(), 0.0)

    async def _expired(self, *, pending: bool) -> TurnOutcome | None:
        now = time.monotonic()
        interrupt_at = self._interrupted_at()
        if interrupt_at is not None and now - interrupt_at >= self.settings.interrupt_grace_s:
            return interrupted_outcome("OpenCode did not confirm the abort in time")
        idle = now - self.last_activity
        if pending or idle < self.settings.turn_idle_timeout_s:
            return None
        await self._abort()
        return failed_outcome(
            "idle_timeout",
            f"OpenCode reported nothing for {idle:.0f} s (turn_idle_timeout_s)",
            retryable=True,
        )


def interrupted_outcome(detail: str) -> TurnOutcome:
    message = f"The turn was interrupted ({detail})."
    return TurnOutcome(
        status="interrupted",
        error=TurnError(kind="interrupted", message=message, provider=PROVIDER),
    )


def failed_outcome(kind: FailureKind, message: str, *, retryable: bool = False) -> TurnOutcome:
    error = TurnError(kind=kind, message=message, retryable=retryable, provider=PROVIDER)
    return TurnOutcome(status="failed", error=error)
