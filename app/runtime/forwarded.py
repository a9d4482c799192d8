"""Running a command another replica forwarded, as if it had come here, as the key that
asked for it.

The command's signed ``issuer`` decides which sessions it may reach, exactly as that key's
own request would here: a named key only its own sessions (another's is 404), an admin key
any. Nothing in the command's arguments can widen that.
"""

from __future__ import annotations

import typing
from typing import Any

from app.cluster.commands import Issuer
from app.errors import NotFound
from app.events import QuestionAnswer
from app.runtime.questions import answer_question

if typing.TYPE_CHECKING:
    from app.runtime.sessions import SessionManager


async def run_forwarded(
    manager: SessionManager, op: str, args: dict[str, Any], issuer: Issuer
) -> Any:
    """Run ``op`` here with ``args``, as ``issuer``; returns what the API would get."""
    owner = issuer.owner
    if op == "start_turn":
        return await manager.start_turn(
            args["session_id"], args["prompt"], retry=args.get("retry"), owner=owner, forwarded=True
        )
    if op == "interrupt":
        return await manager.interrupt(args["session_id"], owner=owner, forwarded=True)
    if op == "respond":
        return await manager.respond(
            args["session_id"],
            args["approval_id"],
            decision=args["decision"],
            message=args.get("message"),
            updated_input=args.get("updated_input"),
            by=issuer.name,
            owner=owner,
            forwarded=True,
        )
    if op == "answer_question":
        return await answer_question(
            manager,
            args["session_id"],
            args["question_id"],
            answers=[QuestionAnswer.model_validate(a) for a in args["answers"]],
            by=issuer.name,
            owner=owner,
            forwarded=True,
        )
    if op == "delete":
        return await manager.delete(args["session_id"], owner=owner, forwarded=True)
    raise NotFound(f"no command {op!r}")
