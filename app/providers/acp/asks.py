"""What an ACP agent asks during a turn: permission requests and form elicitations.

Each request waits in ``Pending`` on a future the running turn answers: it goes into the turn's
inbox as ``Asked`` or ``Elicited``, ``TurnLoop`` puts it to the client as an approval or as
questions, and the answer is sent back through ``permission_reply`` or ``form_reply``. When the
turn ends or is interrupted, every request still pending is answered ``cancelled`` at once, as
the protocol requires (``Pending.cancel_all``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    CancelElicitationResponse,
    CreateElicitationResponse,
    DeclineElicitationResponse,
    DeniedOutcome,
    RequestPermissionRequest,
    RequestPermissionResponse,
)

from app.providers.acp.elicitation import Form, accepted_content
from app.providers.acp.updates import TurnTranslator, option_for
from app.providers.base import Answers, ApprovalAnswer

R = TypeVar("R")

CANCELLED = RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


@dataclass(frozen=True)
class Asked:
    """A ``session/request_permission`` waiting for the client's decision."""

    request: RequestPermissionRequest
    reply: asyncio.Future[RequestPermissionResponse]


@dataclass(frozen=True)
class Elicited:
    """A form ``elicitation/create`` waiting for the client's answers."""

    form: Form
    reply: asyncio.Future[CreateElicitationResponse]


class Pending:
    """The agent's requests the running turn has not answered yet."""

    def __init__(self) -> None:
        self._permissions: set[asyncio.Future[RequestPermissionResponse]] = set()
        self._elicitations: set[asyncio.Future[CreateElicitationResponse]] = set()

    async def ask(
        self, inbox: asyncio.Queue[Any], request: RequestPermissionRequest
    ) -> RequestPermissionResponse:
        """Put ``request`` into the turn's ``inbox``; return the answer it gets."""
        return await _wait(self._permissions, inbox, lambda reply: Asked(request, reply))

    async def elicit(self, inbox: asyncio.Queue[Any], form: Form) -> CreateElicitationResponse:
        """Put ``form`` into the turn's ``inbox``; return the answer it gets."""
        return await _wait(self._elicitations, inbox, lambda reply: Elicited(form, reply))

    def cancel_all(self) -> None:
        """Answer every pending request ``cancelled``."""
        for reply in list(self._permissions):
            if not reply.done():
                reply.set_result(CANCELLED)
        for elicited in list(self._elicitations):
            if not elicited.done():
                elicited.set_result(CancelElicitationResponse(action="cancel"))


async def _wait(
    pending: set[asyncio.Future[R]],
    inbox: asyncio.Queue[Any],
    item: Callable[[asyncio.Future[R]], Asked | Elicited],
) -> R:
    reply: asyncio.Future[R] = asyncio.get_running_loop().create_future()
    pending.add(reply)
    try:
        inbox.put_nowait(item(reply))
        return await reply
    finally:
        pending.discard(reply)


def permission_reply(
    translator: TurnTranslator, asked: Asked
) -> Callable[[ApprovalAnswer], Awaitable[None]]:
    """Sends the client's decision as the option the agent offered for it (none: cancelled)."""
    request, reply = asked.request, asked.reply

    async def send(answer: ApprovalAnswer) -> None:
        option = option_for(answer.decision, request.options)
        if answer.decision == "deny":
            translator.denied(request.tool_call.tool_call_id)
        if reply.done():
            return
        if option is None:
            reply.set_result(CANCELLED)
        else:
            outcome = AllowedOutcome(option_id=option, outcome="selected")
            reply.set_result(RequestPermissionResponse(outcome=outcome))

    return send


def form_reply(elicited: Elicited) -> Callable[[Answers], Awaitable[None]]:
    """Sends the client's answers as the form's content (declined when they do not fit it)."""
    form, reply = elicited.form, elicited.reply

    async def answer(answers: Answers) -> None:
        if reply.done():
            return
        content = accepted_content(form, answers)
        reply.set_result(
            DeclineElicitationResponse(action="decline")
            if content is None
            else AcceptElicitationResponse(action="accept", content=content)
        )

    return answer
