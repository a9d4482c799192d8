"""Questions the agent asks the user: how they are kept and which answers fit them (pure; a
client's answer reaches the waiting turn as an ``Answer`` command, app/runtime/commands.py).

A question is a pending request of kind ``question`` in the approvals table (its ``input`` is
``{"questions": [Question, …]}``), so it waits, expires, is withdrawn and is recovered after a
restart exactly like an approval (``ApprovalBroker``). What is particular to questions is here:
a client's answers are checked against what was asked before anything reaches the CLI, and a
refusal says what to send instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import JsonValue, ValidationError

from app.errors import InvalidRequest
from app.events import Question, QuestionAnswer

__all__ = ["asked_questions", "check_answers", "stored_questions"]


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
