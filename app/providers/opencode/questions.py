"""OpenCode's question tool: ``question.asked`` as the gateway's question, and the answers back
as the body of ``POST /question/{id}/reply`` (pure, no I/O).

OpenCode 1.18.33 (its ``QuestionRequest`` / ``QuestionReply`` schemas): a request is
``{id: "que_…", sessionID, questions: [{question, header, options: [{label, description}],
multiple?, custom?}], tool?: {messageID, callID}}``; ``custom`` (default true) lets the user
type an answer of their own. The reply is ``{answers: [[label or text, …], …]}``, one list
per question in order (an empty list reads as ``Unanswered``); ``POST /question/{id}/reject``
dismisses it and ends the turn. The model then reads ``User has answered your questions:
"<question>"="<answers joined by ", ">". …``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue

from app.providers.asking import read_questions
from app.providers.base import Answers, QuestionRequest
from app.providers.raw import as_dict, as_str

__all__ = ["QUESTION_TOOL", "question_reply", "question_request"]

QUESTION_TOOL = "question"


def question_request(asked: Mapping[str, Any]) -> QuestionRequest | None:
    """The question a ``question.asked`` event's properties stand for; None if malformed."""
    request_id = as_str(asked.get("id"))
    if not request_id:
        return None
    questions = read_questions(
        asked.get("questions"),
        multi_select=lambda entry: entry.get("multiple") is True,
        free_text=lambda entry: entry.get("custom") is not False,  # true unless it says so
    )
    if not questions:
        return None
    call_id = as_str(as_dict(asked.get("tool")).get("callID"))
    return QuestionRequest(
        request_id=request_id, tool=QUESTION_TOOL, questions=tuple(questions), tool_id=call_id
    )


def question_reply(request: QuestionRequest, answers: Answers) -> dict[str, JsonValue]:
    """The body of ``POST /question/{id}/reply``: each answer's labels, then its own text; when
    nobody answered, an empty list per question, which the model reads as ``"Unanswered"``
    and goes on (a reject would end the turn)."""
    if answers is None:
        return {"answers": [[] for _ in request.questions]}
    return {"answers": [list(answer.texts()) for answer in answers]}
