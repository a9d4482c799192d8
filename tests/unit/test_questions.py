"""Questions the agent asks: which answers fit them, and how each CLI's question tool is read
and answered (pure: no process, no database)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.errors import InvalidRequest
from app.events import Question, QuestionAnswer, QuestionOption
from app.providers.claude.control import control_request
from app.providers.claude.questions import UNANSWERED_MESSAGE, answers_response
from app.providers.items import ApprovalAsked, ApprovalWithdrawn, QuestionAsked
from app.providers.opencode.normalizer import TurnNormalizer
from app.providers.opencode.questions import question_reply, question_request
from app.providers.opencode.sse import ServerEvent
from app.runtime.questions import asked_questions, check_answers, stored_questions

COLOR = Question(
    prompt="Which color?",
    options=[QuestionOption(label="Red"), QuestionOption(label="Blue")],
)
TOPPINGS = Question(
    prompt="Which toppings?",
    options=[QuestionOption(label="Cheese"), QuestionOption(label="Olives")],
    multi_select=True,
    free_text=False,
)


def answer(*selected: str, text: str | None = None) -> QuestionAnswer:
    return QuestionAnswer(selected=list(selected), text=text)


# --- which answers fit ------------------------------------------------------------------------


def test_one_fitting_answer_per_question_is_accepted() -> None:
    check_answers("qst_1", [COLOR, TOPPINGS], [answer("Blue"), answer("Cheese", "Olives")])
    check_answers("qst_1", [COLOR, TOPPINGS], [answer(text="teal"), answer("Olives")])
    check_answers("qst_1", [COLOR], [answer("Red", text="but darker")])


@pytest.mark.parametrize(
    ("answers", "words", "fields"),
    [
        ([answer("Blue")], "send one answer per question", {"expected_answers": 2}),
        (
            [answer("Blue"), answer("Cheese"), answer("Olives")],
            "got 3 answer(s)",
            {"expected_answers": 2},
        ),
        (
            [answer("Green"), answer("Cheese")],
            "'Green', which is not offered: choose from 'Red', 'Blue' or put your own answer",
            {"answer": 0, "offered": ["Red", "Blue"]},
        ),
        (
            [answer("Red", "Blue"), answer("Cheese")],
            "chooses 2 labels but the question takes one",
            {"answer": 0},
        ),
        ([answer("Red"), answer("Cheese", "Cheese")], "chooses a label twice", {"answer": 1}),
        (
            [answer("Red"), answer(text="ham")],
            "takes only offered labels, not text",
            {"answer": 1},
        ),
        ([answer(text="  "), answer("Cheese")], "answers[0] ('Which color?') is empty", {}),
        ([answer("Red"), answer()], "is empty: choose an offered label", {"answer": 1}),
    ],
)
def test_answers_that_do_not_fit_are_refused_saying_what_to_fix(
    answers: list[QuestionAnswer], words: str, fields: dict[str, Any]
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        check_answers("qst_1", [COLOR, TOPPINGS], answers)
    assert refused.value.status == 422
    assert words in refused.value.detail
    assert refused.value.fields["question_id"] == "qst_1"
    assert fields.items() <= refused.value.fields.items()


def test_questions_are_kept_and_read_back_unchanged() -> None:
    assert asked_questions(stored_questions([COLOR, TOPPINGS])) == [COLOR, TOPPINGS]
    assert asked_questions({"questions": "nonsense"}) == []


def test_an_answer_reaches_a_cli_as_its_labels_then_the_users_text() -> None:
    assert answer("Cheese", "Olives", text=" ham ").texts() == ["Cheese", "Olives", "ham"]
    assert answer(text="").texts() == []


# --- Claude Code: AskUserQuestion ---------------------------------------------------------------

ASK_INPUT: dict[str, Any] = {
    "questions": [
        {
            "question": "Which color?",
            "header": "Color",
            "options": [
                {"label": "Red", "description": "warm"},
                {"label": "Blue", "description": "cool"},
            ],
            "multiSelect": False,
        },
        {
            "question": "Which toppings?",
            "header": "Toppings",
            "options": [{"label": "Cheese", "description": ""}, {"label": "Olives"}],
            "multiSelect": True,
        },
    ]
}


def can_use_tool(tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    # As Claude Code 2.1.330 sends it (observed against the stub model).
    return {
        "type": "control_request",
        "request_id": "88ba0527",
        "request": {
            "subtype": "can_use_tool",
            "tool_name": tool,
            "display_name": tool,
            "input": tool_input,
            "tool_use_id": "toolu_stub_1",
            "requires_user_interaction": True,
        },
    }


def test_claude_ask_user_question_becomes_a_question_not_an_approval() -> None:
    [item] = control_request(can_use_tool("AskUserQuestion", ASK_INPUT))
    assert isinstance(item, QuestionAsked)
    assert item.input == ASK_INPUT
    request = item.request
    assert (request.request_id, request.tool, request.tool_id) == (
        "88ba0527",
        "AskUserQuestion",
        "toolu_stub_1",
    )
    color, toppings = request.questions
    assert color == Question(
        prompt="Which color?",
        header="Color",
        options=[
            QuestionOption(label="Red", description="warm"),
            QuestionOption(label="Blue", description="cool"),
        ],
    )
    assert toppings.multi_select
    assert toppings.free_text
    assert [o.label for o in toppings.options] == ["Cheese", "Olives"]


@pytest.mark.parametrize("tool_input", [{}, {"questions": []}, {"questions": [{"header": "x"}]}])
def test_claude_ask_user_question_without_readable_questions_is_an_ordinary_approval(
    tool_input: dict[str, Any],
) -> None:
    [item] = control_request(can_use_tool("AskUserQuestion", tool_input))
    assert isinstance(item, ApprovalAsked)


def test_claude_answers_travel_in_the_tool_input_keyed_by_question() -> None:
    [item] = control_request(can_use_tool("AskUserQuestion", ASK_INPUT))
    assert isinstance(item, QuestionAsked)
    line = answers_response(
        "88ba0527",
        item.request,
        item.input,
        (answer("Blue"), answer("Cheese", "Olives", text="ham")),
    )
    assert json.loads(line) == {
        "type": "control_response",
        "response": {
            "subtype": "success",
            "request_id": "88ba0527",
            "response": {
                "behavior": "allow",
                "updatedInput": {
                    **ASK_INPUT,
                    "answers": {"Which color?": "Blue", "Which toppings?": "Cheese, Olives, ham"},
                },
            },
        },
    }


def test_claude_unanswered_questions_are_denied_with_a_message_for_the_model() -> None:
    [item] = control_request(can_use_tool("AskUserQuestion", ASK_INPUT))
    assert isinstance(item, QuestionAsked)
    response = json.loads(answers_response("88ba0527", item.request, item.input, None))
    assert response["response"]["response"] == {
        "behavior": "deny",
        "message": UNANSWERED_MESSAGE,
    }


# --- OpenCode: the question tool ----------------------------------------------------------------

ASKED = {
    # OpenCode 1.18.33's QuestionRequest.
    "id": "que_01",
    "sessionID": "ses_1",
    "questions": [
        {
            "question": "Which color?",
            "header": "Color",
            "options": [{"label": "Red", "description": "warm"}, {"label": "Blue"}],
        },
        {
            "question": "Which toppings?",
            "header": "Toppings",
            "options": [{"label": "Cheese", "description": ""}],
            "multiple": True,
            "custom": False,
        },
    ],
    "tool": {"messageID": "msg_1", "callID": "call_1"},
}


def test_opencode_question_asked_becomes_a_question() -> None:
    request = question_request(ASKED)
    assert request is not None
    assert (request.request_id, request.tool, request.tool_id) == ("que_01", "question", "call_1")
    color, toppings = request.questions
    assert color.options == [
        QuestionOption(label="Red", description="warm"),
        QuestionOption(label="Blue"),
    ]
    assert (color.multi_select, color.free_text) == (False, True)
    assert (toppings.multi_select, toppings.free_text) == (True, False)
    assert question_request({**ASKED, "questions": []}) is None
    assert question_request({**ASKED, "id": None}) is None


def test_opencode_reply_lists_each_answers_labels_then_its_text() -> None:
    request = question_request(ASKED)
    assert request is not None
    body = question_reply(request, (answer("Blue", text="navy"), answer("Cheese")))
    assert body == {"answers": [["Blue", "navy"], ["Cheese"]]}
    # Nobody answered: OpenCode tells the model "Unanswered" for an empty list.
    assert question_reply(request, None) == {"answers": [[], []]}


def test_opencode_question_events_ask_and_withdraw_in_the_turn() -> None:
    normalizer = TurnNormalizer(clock=lambda: 0.0)

    def feed(kind: str, properties: dict[str, Any]) -> list[Any]:
        return normalizer.feed(ServerEvent(type=kind, properties=properties, session_id="ses_1"))

    assert feed("session.status", {"sessionID": "ses_1", "status": {"type": "busy"}}) == []
    [asked] = feed("question.asked", ASKED)
    assert isinstance(asked, QuestionAsked)
    assert asked.request.request_id == "que_01"
    replied = {"sessionID": "ses_1", "requestID": "que_01", "answers": [["Red"]]}
    assert feed("question.replied", replied) == [ApprovalWithdrawn(request_id="que_01")]
    rejected = {"sessionID": "ses_1", "requestID": "que_02"}
    assert feed("question.rejected", rejected) == [ApprovalWithdrawn(request_id="que_02")]
