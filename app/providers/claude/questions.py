"""Claude Code's AskUserQuestion: the questions off a ``can_use_tool`` request, and the answers
back as the allow that carries them (pure, no I/O).

Claude Code 2.1.330 asks the host before every AskUserQuestion call, in every permission mode
but ``dontAsk`` (which refuses it: a ``read_only`` session gets no questions), with
``requires_user_interaction: true``. The host answers with ``behavior: allow`` and
``updatedInput`` = the tool's input plus ``answers``: ``{question text: answer}``, several
labels of a multi-select question joined by ", " (sdk-tools.d.ts ``AskUserQuestionInput``).
The model then reads ``Your questions have been answered: "<question>"="<answer>". …`` as the
tool's result (observed against the stub model).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import JsonValue

from app.providers.asking import read_questions
from app.providers.base import Answers, QuestionRequest

__all__ = ["ASK_TOOL", "UNANSWERED_MESSAGE", "answers_response", "question_request"]

ASK_TOOL = "AskUserQuestion"
UNANSWERED_MESSAGE = "The user did not answer the questions in time; decide without them."


def question_request(
    request_id: str, tool_input: dict[str, Any], tool_id: str | None
) -> QuestionRequest | None:
    """The questions of an AskUserQuestion ``can_use_tool`` request; None when its input has
    none the gateway can show (it is then asked about as an ordinary tool call)."""
    questions = read_questions(
        tool_input.get("questions"),
        multi_select=lambda entry: entry.get("multiSelect") is True,
        free_text=lambda _entry: True,  # the CLI always offers "Other" (its tool description)
    )
    if not questions:
        return None
    return QuestionRequest(
        request_id=request_id, tool=ASK_TOOL, questions=tuple(questions), tool_id=tool_id
    )


def answers_response(
    request_id: str,
    request: QuestionRequest,
    tool_input: dict[str, JsonValue],
    answers: Answers,
) -> bytes:
    """The ``control_response`` to the AskUserQuestion request: an allow carrying the answers,
    or, when nobody answered, a deny that tells the model so (the turn goes on)."""
    result: dict[str, JsonValue]
    if answers is None:
        result = {"behavior": "deny", "message": UNANSWERED_MESSAGE}
    else:
        by_question: dict[str, JsonValue] = {
            question.prompt: ", ".join(answer.texts())
            for question, answer in zip(request.questions, answers, strict=True)
        }
        result = {"behavior": "allow", "updatedInput": {**tool_input, "answers": by_question}}
    message = {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": result},
    }
    return json.dumps(message, separators=(",", ":")).encode("ascii")
