"""Questions the agent asks the user: how they are kept, which answers fit them (pure), and
a client's answer on its way to the turn that waits for it.

A question is a pending request of kind ``question`` in the approvals table (its ``input`` is
``{"questions": [Question, …]}``), so it waits, expires, is withdrawn and is recovered after a
restart exactly like an approval (``ApprovalBroker``). What is particular to questions is here:
a client's answers are checked against what was asked before anything reaches the CLI, and a
refusal says what to send instead.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence

from pydantic import JsonValue, ValidationError

from app.errors import InvalidRequest, NotFound, QuestionNotPending
from app.events import EventData, Question, QuestionAnswer
from app.records import ApprovalRecord
from app.runtime.cluster import issuer_of, record_from

if typing.TYPE_CHECKING:
    from app.runtime.sessions import SessionManager

__all__ = ["answer_question", "asked_questions", "check_answers", "stored_questions"]


def stored_questions(questions: Sequence[Question]) -> dict[str, JsonValue]:
    """What the approvals row keeps as a question's ``input``."""
    return {"questions": [q.model_dump(mode="json") for q in questions]}


def asked_questions(stored: dict[str, JsonValue]) -> list[Question]:
    """The questions a row's ``input`` holds (``stored_questions`` read back)."""
    raw = stored.get("questions")
    try:
        return [Question.model_validate(q) for q in raw] if isinstance(raw, list) else []
    except ValidationError:
        return []


def check_answers(
    question_id: str, questions: Sequence[Question], answers: Sequence[QuestionAnswer]
) -> None:
    """Raise ``InvalidRequest`` (422) unless ``answers`` answer ``questions``: one answer per
    question, in order, each choosing only offered labels (one unless the question takes
    several) and/or text where the question takes text of the user's own."""
    if len(answers) != len(questions):
        raise InvalidRequest(
            f"question {question_id} asks {len(questions)} question(s) and got "
            f"{len(answers)} answer(s): send one answer per question, in the order asked",
            question_id=question_id,
            expected_answers=len(questions),
        )
    for index, (question, answer) in enumerate(zip(questions, answers, strict=True)):
        where = f"answers[{index}] ({question.prompt!r})"
        offered = [option.label for option in question.options]
        unknown = [label for label in answer.selected if label not in offered]
        if unknown:
            raise InvalidRequest(
                f"{where} chooses {', '.join(map(repr, unknown))}, which is not offered: choose "
                f"from {', '.join(map(repr, offered)) or 'no labels'}"
                + (" or put your own answer in `text`" if question.free_text else ""),
                question_id=question_id,
                answer=index,
                offered=list(offered),
            )
        if len(set(answer.selected)) != len(answer.selected):
            raise InvalidRequest(
                f"{where} chooses a label twice: choose each at most once",
                question_id=question_id,
                answer=index,
            )
        if len(answer.selected) > 1 and not question.multi_select:
            raise InvalidRequest(
                f"{where} chooses {len(answer.selected)} labels but the question takes one: "
                "choose one",
                question_id=question_id,
                answer=index,
            )
        text = answer.text.strip() if answer.text is not None else ""
        if answer.text is not None and not question.free_text:
            raise InvalidRequest(
                f"{where} takes only offered labels, not text: choose from "
                f"{', '.join(map(repr, offered))}",
                question_id=question_id,
                answer=index,
                offered=list(offered),
            )
        if not answer.selected and not text:
            raise InvalidRequest(
                f"{where} is empty: choose an offered label"
                + (" or write an answer in `text`" if question.free_text else ""),
                question_id=question_id,
                answer=index,
            )


async def answer_question(
    manager: SessionManager,
    session_id: str,
    question_id: str,
    *,
    answers: list[QuestionAnswer],
    by: str,
    owner: str | None = None,
    forwarded: bool = False,
) -> ApprovalRecord:
    """Answer the agent's pending question; ``by`` names the key that answered. With several
    replicas, on the replica whose turn waits for it (the command is forwarded there)."""
    row = await manager.get(session_id, owner=owner)
    elsewhere, live = await manager.command_target(session_id, forwarded=forwarded)
    if elsewhere is not None and manager.cluster is not None:
        args = {
            "session_id": session_id,
            "question_id": question_id,
            "answers": [a.model_dump(mode="json") for a in answers],
        }
        issuer = issuer_of(owner, by)
        answer = await manager.cluster.forward(elsewhere, "answer_question", args, issuer=issuer)
        return typing.cast(ApprovalRecord, record_from(ApprovalRecord, answer))
    if live is None:  # no turn of the session runs here: nothing waits for an answer
        pending = await manager.store.get_approval(session_id, question_id)
        if pending is None or pending.kind != "question":
            raise NotFound(f"question {question_id} does not exist in this session")
        raise QuestionNotPending(
            f"question {question_id} is already {pending.status}", question_status=pending.status
        )
    turn_id = live.turn_id

    async def emit(data: EventData) -> None:
        await manager.events.append(session_id, data, turn_id=turn_id, provider=row.provider)

    return await live.approvals.answer(question_id, answers, emit, by=by)
