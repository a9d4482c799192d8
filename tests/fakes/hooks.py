"""``RecordingHooks``: the ``TurnHooks`` a provider or turn-loop test hands a turn.

It records what the turn reports (events, bound threads, usage so far, approvals and
questions asked, those withdrawn) and answers approvals with ``answer`` and questions with
``answers``; without one, each waits on a future in ``pending`` (``pending_questions``) for
the test to resolve (or for the turn to cancel it: withdrawn).
"""

from __future__ import annotations

import asyncio
from typing import Any

from app.events import EventData, MessageDelta, QuestionAnswer, Usage
from app.providers.base import Answers, ApprovalAnswer, ApprovalRequest, QuestionRequest


class RecordingHooks:
    joins_deltas = False
    """Every delta reaches ``events`` as the provider made it."""

    def __init__(
        self,
        answer: ApprovalAnswer | None = None,
        answers: tuple[QuestionAnswer, ...] | None = None,
    ) -> None:
        self.answer = answer
        self.answers = answers
        self.questions: list[QuestionRequest] = []
        self.pending_questions: dict[str, asyncio.Future[Answers]] = {}
        self.events: list[EventData] = []
        self.threads: list[str] = []
        self.usage: list[Usage] = []
        """What the turn reported it used so far, each time it did (``report_usage``)."""
        self.approvals: list[ApprovalRequest] = []
        self.pending: dict[str, asyncio.Future[ApprovalAnswer]] = {}
        self.withdrawn: list[str] = []
        self.asked = asyncio.Event()
        self.streaming = asyncio.Event()
        self.bound = asyncio.Event()

    async def emit(self, data: EventData) -> None:
        self.events.append(data)
        if isinstance(data, MessageDelta):
            self.streaming.set()

    async def bind_thread(self, thread_id: str) -> None:
        self.threads.append(thread_id)
        self.bound.set()

    async def report_usage(self, usage: Usage) -> None:
        self.usage.append(usage)

    async def request_approval(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.approvals.append(request)
        self.asked.set()
        if self.answer is not None:
            return self.answer
        future: asyncio.Future[ApprovalAnswer] = asyncio.get_running_loop().create_future()
        self.pending[request.request_id] = future
        try:
            return await future
        except asyncio.CancelledError:
            self.withdrawn.append(request.request_id)
            raise

    async def ask_question(self, request: QuestionRequest) -> Answers:
        self.questions.append(request)
        self.asked.set()
        if self.answers is not None:
            return self.answers
        future: asyncio.Future[Answers] = asyncio.get_running_loop().create_future()
        self.pending_questions[request.request_id] = future
        try:
            return await future
        except asyncio.CancelledError:
            self.withdrawn.append(request.request_id)
            raise

    def of(self, kind: type[EventData]) -> list[Any]:
        return [event for event in self.events if isinstance(event, kind)]
