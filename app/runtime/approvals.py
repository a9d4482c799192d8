"""Approvals: a tool call waits here until a client allows or denies it, or it expires.

The provider's ``request_approval`` hook lands in ``ApprovalBroker.request``, which stores the
approval, emits ``approval.requested`` and waits. A client's answer (``respond``) or the
expiry (a deny with reason ``expired``) resolves it exactly once; whichever comes first wins.
If the CLI withdraws the request, the waiting task is cancelled and the approval is recorded
as ``cancelled``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Literal

from app.errors import ApprovalNotPending, InvalidRequest, NotFound
from app.events import ApprovalOption, ApprovalRequested, ApprovalResolved, EventData
from app.providers.base import ApprovalAnswer, ApprovalRequest
from app.records import ApprovalRecord
from app.redaction import SecretMask
from app.store.interface import Storage

log = logging.getLogger(__name__)

OPTION_LABELS = {"allow": "Allow", "deny": "Deny", "allow_session": "Allow for this session"}
EXPIRED_MESSAGE = "The approval request expired before anyone answered it."

Emit = Callable[[EventData], Awaitable[None]]
ResolutionReason = Literal[
    "expired", "cancelled", "session_closed", "gateway_restart", "replica_lost"
]


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
        self._waiting: dict[str, asyncio.Future[ApprovalAnswer]] = {}
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
        self._waiting[approval_id] = future
        await self._on_change(len(self._waiting))
        await emit(
            ApprovalRequested(
                approval_id=approval_id,
                tool=request.tool,
                input=request.input,
                options=[
                    ApprovalOption(decision=d, label=OPTION_LABELS[d]) for d in request.options
                ],
                expires_at=expires_at,
                title=request.title,
                tool_id=request.tool_id,
            )
        )
        try:
            try:
                return await asyncio.wait_for(asyncio.shield(future), self._timeout_s)
            except TimeoutError:
                if future.done():  # answered in the same tick as the deadline
                    return future.result()
                answer = ApprovalAnswer(decision="deny", message=EXPIRED_MESSAGE)
                future.set_result(answer)
                await self._finish(approval_id, "expired", emit)
                return answer
            except asyncio.CancelledError:
                if not future.done():
                    future.cancel()
                    await self._finish(approval_id, self.cancel_reason, emit)
                raise
        finally:
            self._waiting.pop(approval_id, None)
            await self._on_change(len(self._waiting))

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
        row = await self._store.get_approval(self._session_id, approval_id)
        if row is None:
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
        future.set_result(answer)
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
        await emit(
            ApprovalResolved(
                approval_id=approval_id,
                decision=answer.decision,
                by="client",
                reason="decided",
                message=answer.message,
                updated_input=answer.updated_input,
                updated_by=by if edited else None,
            )
        )
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
