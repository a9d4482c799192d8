"""Approvals and questions: a tool call (or the agent's question) waits here until a client
answers it, or it expires.

The provider's ``request_approval`` hook lands in ``ApprovalBroker.request``, which stores the
approval, emits ``approval.requested`` and waits. A client's answer (``respond``) or the
expiry (a deny with reason ``expired``) resolves it exactly once; whichever comes first wins.
If the CLI withdraws the request, the waiting task is cancelled and the approval is recorded
as ``cancelled``. Questions (``ask_question`` → ``ask``, answered by ``answer``) follow the
same rules with ``question.asked`` / ``question.resolved``; an expired question has no answers.

A client's answer is all-or-nothing: the row and its ``*.resolved`` event are written first
(the event encoded before either write), and only then does the CLI get the answer; a failed
write puts the row back to pending and the CLI never hears of it. Answers and expiry take
turns on one lock, so an expiry never overtakes an answer being recorded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar

from app.errors import ApprovalNotPending, InvalidRequest, NotFound, QuestionNotPending
from app.events import (
    ApprovalDecision,
    ApprovalOption,
    ApprovalRequested,
    ApprovalResolved,
    EventData,
    QuestionAnswer,
    QuestionAsked,
    QuestionResolved,
)
from app.providers.base import (
    Answers,
    ApprovalAnswer,
    ApprovalRequest,
    Provider,
    QuestionRequest,
)
from app.records import ApprovalRecord
from app.redaction import SecretMask
from app.runtime.questions import asked_questions, check_answers, stored_questions
from app.settings import Settings
from app.store.interface import Storage

log = logging.getLogger(__name__)

OPTION_LABELS: dict[ApprovalDecision, str] = {
    "allow": "Allow",
    "deny": "Deny",
    "allow_session": "Allow for this session",
}
EXPIRED_MESSAGE = "The approval request expired before anyone answered it."

A = TypeVar("A")
Emit = Callable[[EventData], Awaitable[None]]
ResolutionReason = Literal[
    "expired", "cancelled", "session_closed", "gateway_restart", "replica_lost"
]
UNDECIDED: dict[str, Any] = {
    "status": "pending",
    "decision": None,
    "message": None,
    "decided_by": None,
    "decided_at": None,
    "updated_input": None,
    "updated_by": None,
    "answers": None,
}
"""What a pending approval or question row holds in the fields an answer writes."""


async def _whole(step: Coroutine[Any, Any, A]) -> A:
    """Run ``step`` to its end even when the caller is cancelled meanwhile (an answer is
    recorded whole or not at all); the cancellation is raised once it has finished."""
    task = asyncio.ensure_future(step)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            if task.cancelled():
                raise
            cancelled = exc
    if cancelled is not None:
        raise cancelled
    return task.result()


class ApprovalBroker:
    """The pending approvals of one session."""

    def __init__(
        self,
        *,
        session_id: str,
        store: Storage,
        timeout_s: float,
        clock: Callable[[], datetime],
        on_change: Callable[[int], Awaitable[None]],
        mask: SecretMask | None = None,
    ) -> None:
        self._session_id = session_id
        self._mask = mask if mask is not None else SecretMask(())
        """What the approval row keeps of an input is masked like the events."""
        self._store = store
        self._timeout_s = timeout_s
        self._clock = clock
        self._on_change = on_change
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        """The pending approvals and questions, by id."""
        self._resolving = asyncio.Lock()
        """Held while an answer is recorded, and by an expiry deciding to happen."""
        self.cancel_reason: ResolutionReason = "cancelled"
        """Recorded for approvals withdrawn by cancellation; the session sets it when closing."""

    @property
    def pending_count(self) -> int:
        return len(self._waiting)

    async def request(
        self, request: ApprovalRequest, *, turn_id: str, emit: Emit
    ) -> ApprovalAnswer:
        """Record and announce the approval, then wait for its resolution."""
        approval_id = "apr_" + secrets.token_hex(12)
        now = self._clock()
        expires_at = now + timedelta(seconds=self._timeout_s)
        await self._store.create_approval(
            ApprovalRecord(
                id=approval_id,
                session_id=self._session_id,
                turn_id=turn_id,
                provider_request_id=request.request_id,
                tool=request.tool,
                input=self._mask.values(request.input),
                options=list(request.options),
                title=request.title,
                tool_id=request.tool_id,
                status="pending",
                expires_at=expires_at,
                created_at=now,
            )
        )
        future: asyncio.Future[ApprovalAnswer] = asyncio.get_running_loop().create_future()
        await self._register(approval_id, future)
        await emit(
            ApprovalRequested(
                approval_id=approval_id,
                tool=request.tool,
                input=request.input,
                options=offered(request.options),
                expires_at=expires_at,
                title=request.title,
                tool_id=request.tool_id,
            )
        )

        async def finish(reason: ResolutionReason) -> None:
            await self._finish(approval_id, reason, emit)

        expired = ApprovalAnswer(decision="deny", message=EXPIRED_MESSAGE)
        return await self._wait(approval_id, future, expired=expired, finish=finish)

    async def ask(self, request: QuestionRequest, *, turn_id: str, emit: Emit) -> Answers:
        """Record and announce the agent's questions, then wait for a client's answers (None
        when they expire or are withdrawn). No approval mode answers them: only a client."""
        question_id = "qst_" + secrets.token_hex(12)
        now = self._clock()
        expires_at = now + timedelta(seconds=self._timeout_s)
        await self._store.create_approval(
            ApprovalRecord(
                id=question_id,
                kind="question",
                session_id=self._session_id,
                turn_id=turn_id,
                provider_request_id=request.request_id,
                tool=request.tool,
                input=self._mask.values(stored_questions(request.questions)),
                options=[],
                tool_id=request.tool_id,
                status="pending",
                expires_at=expires_at,
                created_at=now,
            )
        )
        future: asyncio.Future[Answers] = asyncio.get_running_loop().create_future()
        await self._register(question_id, future)
        await emit(
            QuestionAsked(
                question_id=question_id,
                questions=list(request.questions),
                expires_at=expires_at,
                tool_id=request.tool_id,
            )
        )

        async def finish(reason: ResolutionReason) -> None:
            await self._store.update_approval(
                question_id,
                status="expired" if reason == "expired" else "cancelled",
                decided_by="gateway",
                decided_at=self._clock(),
            )
            await emit(
                QuestionResolved(question_id=question_id, answers=None, by="gateway", reason=reason)
            )
            log.info("question %s of session %s %s", question_id, self._session_id, reason)

        return await self._wait(question_id, future, expired=None, finish=finish)

    async def _register(self, request_id: str, future: asyncio.Future[Any]) -> None:
        self._waiting[request_id] = future
        await self._on_change(len(self._waiting))

    async def _wait(
        self,
        request_id: str,
        future: asyncio.Future[A],
        *,
        expired: A,
        finish: Callable[[ResolutionReason], Awaitable[None]],
    ) -> A:
        """The client's answer to a registered request; ``expired`` once ``timeout_s`` passes
        without one. A cancelled wait (the CLI withdrew the request) is finished as
        ``cancel_reason``."""
        try:
            try:
                return await asyncio.wait_for(asyncio.shield(future), self._timeout_s)
            except TimeoutError:
                async with self._resolving:  # an answer being recorded goes first
                    if future.done():  # answered meanwhile
                        return future.result()
                    future.set_result(expired)
                await finish("expired")
                return expired
            except asyncio.CancelledError:
                if not future.done():
                    future.cancel()
                    await finish(self.cancel_reason)
                raise
        finally:
            self._waiting.pop(request_id, None)
            await self._on_change(len(self._waiting))

    async def answer(
        self, question_id: str, answers: Sequence[QuestionAnswer], emit: Emit, *, by: str
    ) -> ApprovalRecord:
        """Apply a client's answers to a pending question: 404 if there is no such question,
        409 once it is no longer pending, 422 (it stays pending) unless the answers fit."""
        async with self._resolving:
            return await _whole(self._answer(question_id, answers, emit, by=by))

    async def _answer(
        self, question_id: str, answers: Sequence[QuestionAnswer], emit: Emit, *, by: str
    ) -> ApprovalRecord:
        row = await self._store.get_approval(self._session_id, question_id)
        if row is None or row.kind != "question":
            raise NotFound(f"question {question_id} does not exist in this session")
        future = self._waiting.get(question_id)
        if row.status != "pending" or future is None or future.done():
            raise QuestionNotPending(
                f"question {question_id} is already {row.status}", question_status=row.status
            )
        check_answers(question_id, asked_questions(row.input), answers)
        resolved = QuestionResolved(
            question_id=question_id,
            answers=list(answers),
            by="client",
            reason="answered",
            answered_by=by,
        )
        resolved.model_dump_json()  # what the event log cannot encode fails before any write
        row = await self._store.update_approval(
            question_id,
            status="answered",
            answers=self._mask.values([a.model_dump(mode="json") for a in answers]),
            decided_by="client",
            decided_at=self._clock(),
            updated_by=by,
        )
        await self._announce(question_id, resolved, emit)
        if not future.done():  # the CLI may have withdrawn the question meanwhile
            future.set_result(tuple(answers))
        return row

    async def _announce(self, request_id: str, resolved: EventData, emit: Emit) -> None:
        """Emit ``resolved`` for an answer already on its row; when that fails the row is put
        back to pending (the answer is not given) and the failure raised."""
        try:
            await emit(resolved)
        except Exception:
            log.warning("the answer to %s could not be recorded; it stays pending", request_id)
            await self._store.update_approval(request_id, **UNDECIDED)
            raise

    async def respond(
        self,
        approval_id: str,
        answer: ApprovalAnswer,
        emit: Emit,
        *,
        by: str,
        edit_refusal: str | None = None,
    ) -> ApprovalRecord:
        """Apply a client's decision to a pending approval.

        An allow whose ``updated_input`` differs from what the agent asked is an edit: it is
        recorded (the edited input and ``by``, the key that sent it) on the approval and its
        ``approval.resolved`` event, or refused with ``edit_refusal`` (422) while the approval
        stays pending. An ``updated_input`` equal to the asked input, or on a deny, is no edit.
        """
        async with self._resolving:
            return await _whole(
                self._respond(approval_id, answer, emit, by=by, edit_refusal=edit_refusal)
            )

    async def _respond(
        self,
        approval_id: str,
        answer: ApprovalAnswer,
        emit: Emit,
        *,
        by: str,
        edit_refusal: str | None,
    ) -> ApprovalRecord:
        row = await self._store.get_approval(self._session_id, approval_id)
        if row is None or row.kind != "tool":
            raise NotFound(f"approval {approval_id} does not exist in this session")
        future = self._waiting.get(approval_id)
        if row.status != "pending" or future is None or future.done():
            raise ApprovalNotPending(
                f"approval {approval_id} is already {row.status}", approval_status=row.status
            )
        edited = (
            answer.decision != "deny"
            and answer.updated_input is not None
            and self._mask.values(answer.updated_input) != row.input
        )
        if edited and edit_refusal is not None:
            raise InvalidRequest(edit_refusal, approval_id=approval_id)
        if not edited:
            answer = dataclasses.replace(answer, updated_input=None)
        resolved = ApprovalResolved(
            approval_id=approval_id,
            decision=answer.decision,
            by="client",
            reason="decided",
            message=answer.message,
            updated_input=answer.updated_input,
            updated_by=by if edited else None,
        )
        resolved.model_dump_json()  # what the event log cannot encode fails before any write
        row = await self._store.update_approval(
            approval_id,
            status="denied" if answer.decision == "deny" else "allowed",
            decision=answer.decision,
            message=answer.message,
            decided_by="client",
            decided_at=self._clock(),
            updated_input=self._mask.values(answer.updated_input),
            updated_by=by if edited else None,
        )
        await self._announce(approval_id, resolved, emit)
        if not future.done():  # the CLI may have withdrawn the request meanwhile
            future.set_result(answer)
        return row

    async def _finish(self, approval_id: str, reason: ResolutionReason, emit: Emit) -> None:
        await self._store.update_approval(
            approval_id,
            status="expired" if reason == "expired" else "cancelled",
            decision="deny",
            message=EXPIRED_MESSAGE if reason == "expired" else None,
            decided_by="gateway",
            decided_at=self._clock(),
        )
        await emit(
            ApprovalResolved(approval_id=approval_id, decision="deny", by="gateway", reason=reason)
        )
        log.info("approval %s of session %s %s", approval_id, self._session_id, reason)


def offered(decisions: Iterable[object]) -> list[ApprovalOption]:
    """The options of an approval offering ``decisions`` (as its row keeps them), in their
    order, as ``approval.requested`` carries them."""
    options = {d: ApprovalOption(decision=d, label=label) for d, label in OPTION_LABELS.items()}
    return [options[d] for d in decisions if isinstance(d, str) and d in options]


def requested(row: ApprovalRecord) -> ApprovalRequested:
    """The ``approval.requested`` that announced the pending approval ``row``, rebuilt from
    it (to ask it again)."""
    return ApprovalRequested(
        approval_id=row.id,
        tool=row.tool,
        input=row.input,
        options=offered(row.options),
        expires_at=row.expires_at,
        title=row.title,
        tool_id=row.tool_id,
    )


def asked(row: ApprovalRecord) -> QuestionAsked:
    """The ``question.asked`` that announced the pending question ``row``, rebuilt from it."""
    return QuestionAsked(
        question_id=row.id,
        questions=asked_questions(row.input),
        expires_at=row.expires_at,
        tool_id=row.tool_id,
    )


def edit_refusal(
    settings: Settings, providers: Mapping[str, Provider], provider: str
) -> str | None:
    """Why an allow with edited input cannot be taken for ``provider``, or None."""
    if not settings.sessions.allow_updated_input:
        return (
            "this gateway does not accept edited tool input "
            "(sessions.allow_updated_input = false): allow or deny the call as asked"
        )
    built = providers.get(provider)
    if built is not None and not built.capabilities.approval_edits:
        return (
            f"{provider} runs exactly the tool call it asked about and cannot take edited "
            "input: allow or deny the call as asked"
        )
    return None
