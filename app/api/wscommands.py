"""A WebSocket client frame as the command its REST request builds, and the ``ack`` body
that answers it.

    turn.start        ─► StartTurn   ─► {"turn": Turn}            (POST …/turns)
    approval.respond  ─► Respond     ─► {"approval": Approval}    (POST …/approvals/{id})
    question.answer   ─► Answer      ─► {"question": Question}    (POST …/questions/{id})
    turn.interrupt    ─► Interrupt   ─► {"turn_id": "trn_…"}      (POST …/interrupt)
    session.revert    ─► Revert      ─► {"revert": Revert}        (POST …/revert)
    session.fork      ─► Fork        ─► {"session": Session}      (POST …/fork)
    session.configure ─► Configure   ─► {"session": Session}      (PATCH /v1/sessions/{id})

A refused command raises the ``GatewayError`` its REST route would answer with; the socket
sends it as an ``error`` frame (app/api/events.py).
"""

from __future__ import annotations

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
            return StartTurn(session_id=session_id, prompt=prompt, retry=policy)
        case WsApprovalRespond():
            return Respond(
                session_id=session_id,
                approval_id=frame.approval_id,
                decision=frame.decision,
                message=frame.message,
                updated_input=frame.updated_input,
            )
        case WsQuestionAnswer():
            answers = tuple(answer.answer() for answer in frame.answers)
            return Answer(session_id=session_id, question_id=frame.question_id, answers=answers)
        case WsTurnInterrupt():
            return Interrupt(session_id=session_id)
        case WsSessionRevert():
            return Revert(session_id=session_id, to_turn=frame.to_turn)
        case WsSessionFork():
            return Fork(session_id=session_id, at_turn=frame.at_turn)
        case WsSessionConfigure():
            return frame.command(session_id)
    raise NotFound("unknown command")  # pragma: no cover - the union is closed


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
            turn = await manager.execute(command, by)
            return {"turn": turn_public(turn).model_dump(mode="json")}
        case Respond() as command:
            row = await manager.execute(command, by)
            return {"approval": approval_public(row).model_dump(mode="json")}
        case Answer() as command:
            row = await manager.execute(command, by)
            return {"question": question_public(row).model_dump(mode="json")}
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
