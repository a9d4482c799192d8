"""Following one prompted turn on the event stream until it ends.

The shared ``TurnLoop`` (app/providers/turnloop.py) owns the deadlines and the approval
tasks: a turn that reports nothing for ``turn_idle_timeout_s`` while no approval waits fails
``idle_timeout`` after an abort; an interrupt not confirmed within ``interrupt_grace_s`` ends
it as interrupted. What is OpenCode's here: the turn ends when the normalizer sees the thread
go idle, or when the server dies (``ServerGone``: failed, or interrupted if an interrupt was
asked for); after a cut in the event stream (``StreamResumed``) the thread's status is asked
for, and a turn that ended unseen is finished from the thread's last message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from app.events import Warning
from app.providers.base import (
    Answers,
    ApprovalAnswer,
    ApprovalRequest,
    QuestionRequest,
    TurnOutcome,
)
from app.providers.items import (
    ApprovalAsked,
    ApprovalWithdrawn,
    QuestionAsked,
    TurnEnded,
    UsageSoFar,
)
from app.providers.opencode.api import ApiError, OpenCodeApi
from app.providers.opencode.normalizer import OpenCodeItem, TurnNormalizer
from app.providers.opencode.permissions import permission_reply
from app.providers.opencode.questions import question_reply
from app.providers.opencode.server import Delivery, ServerGone, StreamResumed
from app.providers.raw import as_dict, as_number
from app.providers.turnloop import TurnLoop

__all__ = ["TurnFollower"]

log = logging.getLogger(__name__)


class TurnFollower:
    """Follows one prompted turn's inbox to its end, on the turn's ``loop``."""

    def __init__(
        self,
        *,
        api: OpenCodeApi,
        thread_id: str,
        directory: Path,
        loop: TurnLoop[Delivery],
        sent_at_ms: float,
        abort: Callable[[], Awaitable[None]],
    ) -> None:
        self.api = api
        self.thread_id = thread_id
        self.directory = directory
        self.loop = loop
        self.sent_at_ms = sent_at_ms  # epoch ms when the prompt was sent
        self._abort = abort
        self.normalizer = TurnNormalizer()

    async def run(self, inbox: asyncio.Queue[Delivery]) -> TurnOutcome:
        return await self.loop.run(inbox, self._handle, on_idle=self._abort)

    async def _handle(self, delivery: Delivery) -> TurnOutcome | None:
        if isinstance(delivery, ServerGone):
            if self.loop.interrupted:
                return self.loop.interrupted_outcome(
                    "The turn was interrupted (the server stopped while the turn was being "
                    "interrupted)."
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
                    self.loop.ask(request, self._replier(request))
                case QuestionAsked(request=question):
                    self.loop.ask_question(question, self._answerer(question))
                case ApprovalWithdrawn(request_id=request_id):
                    self.loop.withdraw(request_id)  # answered elsewhere
                case UsageSoFar(usage=usage):
                    await self.loop.hooks.report_usage(usage)
                case _:
                    await self.loop.hooks.emit(item)
        return None

    def _replier(self, request: ApprovalRequest) -> Callable[[ApprovalAnswer], Awaitable[None]]:
        async def reply(answer: ApprovalAnswer) -> None:
            try:
                await self.api.reply_permission(
                    request.request_id, directory=self.directory, reply=permission_reply(answer)
                )
            except ApiError as exc:  # withdrawn meanwhile (404), or the server is going away
                log.info("opencode: could not answer %s: %s", request.request_id, exc)

        return reply

    def _answerer(self, request: QuestionRequest) -> Callable[[Answers], Awaitable[None]]:
        async def reply(answers: Answers) -> None:
            try:
                await self.api.reply_question(
                    request.request_id,
                    directory=self.directory,
                    reply=question_reply(request, answers),
                )
            except ApiError as exc:  # withdrawn meanwhile (404), or the server is going away
                log.info("opencode: could not answer %s: %s", request.request_id, exc)

        return reply

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
