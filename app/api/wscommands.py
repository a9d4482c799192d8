"""A WebSocket client frame as the command its REST request builds, and the ``ack`` body
that answers it.

    turn.start        ─► StartTurn   ─► {"turn": Turn}            (POST …/turns)
    approval.respond  ─► Respond     ─► {"approval": Approval}    (POST …/approvals/{id})
    question.answer   ─► Answer      ─► {"question": Question}    (POST …/questions/{id})
      (each with ``idempotency_key``, as ``Idempotency-Key`` on its REST route: the same
       command again gets the answer kept for it, marked ``"replayed": true``)
    turn.interrupt    ─► Interrupt   ─► {"turn_id": "trn_…"}      (POST …/interrupt)
    session.revert    ─► Revert      ─► {"revert": Revert}        (POST …/revert)
    session.fork      ─► Fork        ─► {"session": Session}      (POST …/fork)
    session.configure ─► Configure   ─► {"session": Session}      (PATCH /v1/sessions/{id})

A refused command raises the ``GatewayError`` its REST route would answer with; the socket
sends it as an ``error`` frame (app/api/events.py).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import HTTPConnection

from app.api.changes import revert_public
from app.api.deps import (
    admit_session,
    approval_public,
    issuer,
    question_public,
    session_public,
    turn_public,
)
from app.api.idempotency import Answered, execute_once
from app.api.security import Principal
from app.api.wsframes import (
    WsApprovalRespond,
    WsClientFrame,
    WsQuestionAnswer,
    WsSessionConfigure,
    WsSessionFork,
    WsSessionRevert,
    WsTurnInterrupt,
    WsTurnStart,
)
from app.errors import NotFound
from app.runtime.commands import (
    Answer,
    Command,
    Configure,
    Fork,
    Interrupt,
    Respond,
    Revert,
    StartTurn,
)
from app.runtime.sessions import Sessions


def command_for(session_id: str, frame: WsClientFrame) -> Command:
    """The command a client frame asks for (the same a REST request builds)."""
    match frame:
        case WsTurnStart(prompt=prompt, retry=retry):
            policy = retry.model_dump(exclude_none=True) if retry else None
            return StartTurn(
                session_id=session_id,
                prompt=prompt,
                retry=policy,
                idempotency_key=frame.idempotency_key,
            )
        case WsApprovalRespond():
            return Respond(
                session_id=session_id,
                approval_id=frame.approval_id,
                decision=frame.decision,
                message=frame.message,
                updated_input=frame.updated_input,
                idempotency_key=frame.idempotency_key,
            )
        case WsQuestionAnswer():
            answers = tuple(answer.answer() for answer in frame.answers)
            return Answer(
                session_id=session_id,
                question_id=frame.question_id,
                answers=answers,
                idempotency_key=frame.idempotency_key,
            )
        case WsTurnInterrupt():
            return Interrupt(session_id=session_id)
        case WsSessionRevert():
            return Revert(session_id=session_id, to_turn=frame.to_turn)
        case WsSessionFork():
            return Fork(session_id=session_id, at_turn=frame.at_turn)
        case WsSessionConfigure():
            return frame.command(session_id)
    raise NotFound("unknown command")  # pragma: no cover - the union is closed


def _ack(name: str, answered: Answered) -> dict[str, Any]:
    """The ``ack``'s body: what the command answered (the body its REST route answers, kept
    for its idempotency key), and ``replayed`` when it is that kept answer again."""
    body: dict[str, Any] = {name: json.loads(answered.answer.body)}
    if answered.replayed:
        body["replayed"] = True
    return body


async def dispatch(
    connection: HTTPConnection,
    manager: Sessions,
    session_id: str,
    frame: WsClientFrame,
    principal: Principal,
) -> dict[str, Any]:
    """Run the frame's command as ``principal``; the ``ack``'s body."""
    by = issuer(principal)
    match command_for(session_id, frame):
        case StartTurn() as command:
            return _ack("turn", await execute_once(manager, principal, command, render=turn_public))
        case Respond() as command:
            answered = await execute_once(manager, principal, command, render=approval_public)
            return _ack("approval", answered)
        case Answer() as command:
            answered = await execute_once(manager, principal, command, render=question_public)
            return _ack("question", answered)
        case Interrupt() as command:
            return {"turn_id": await manager.execute(command, by)}
        case Revert() as command:
            done = await manager.execute(command, by)
            return {"revert": revert_public(done).model_dump(mode="json")}
        case Fork() as command:
            # A new session: held to the key's creation rate and open-session cap, as REST.
            async with admit_session(connection, manager, principal):
                forked = await manager.execute(command, by)
            return {"session": (await session_public(manager, forked)).model_dump(mode="json")}
        case Configure() as command:
            configured = await manager.execute(command, by)
            return {"session": (await session_public(manager, configured)).model_dump(mode="json")}
    raise NotFound("unknown command")  # pragma: no cover - the union is closed
