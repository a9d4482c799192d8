"""An ACP form elicitation read as the gateway's questions, and the answers written back as
the ``accept``'s content (pure). The forms are the SDK's own models, parsed from the JSON the
Claude Agent ACP adapter 0.101.0 sends for AskUserQuestion (``askUserQuestionsToCreateRequest``)
and from other shapes the protocol allows."""

from __future__ import annotations

from typing import Any

from acp.schema import ElicitationSchema

from app.events import Question, QuestionAnswer, QuestionOption
from app.providers.acp.elicitation import ELICITATION_TOOL, Form, accepted_content, read_form

OTHER = {
    "type": "string",
    "title": "Other",
    "description": "Type your own answer, or add a note to the option you chose above (optional).",
}
COLOR_FIELD = {
    "type": "string",
    "title": "Color",
    "oneOf": [
        {"const": "Red", "title": "Red", "description": "warm"},
        {"const": "Blue", "title": "Blue", "description": "cool"},
    ],
}
TOPPINGS_FIELD = {
    "type": "array",
    "title": "Toppings",
    "description": "Which toppings?",
    "items": {
        "anyOf": [
            {"const": "Cheese", "title": "Cheese", "description": "melted"},
            {"const": "Olives", "title": "Olives"},
        ]
    },
}


def form(properties: dict[str, Any], message: str = "Which color?") -> Form:
    schema = ElicitationSchema.model_validate({"type": "object", "properties": properties})
    read = read_form("elicit-1", message, schema, tool_id="toolu_1")
    assert read is not None
    return read


def answer(*selected: str, text: str | None = None) -> QuestionAnswer:
    return QuestionAnswer(selected=list(selected), text=text)


def test_the_adapters_single_question_is_one_question_with_its_message_as_prompt() -> None:
    color = form({"question_0": COLOR_FIELD, "question_0_custom": OTHER})
    assert color.request.tool == ELICITATION_TOOL
    assert (color.request.request_id, color.request.tool_id) == ("elicit-1", "toolu_1")
    assert color.request.questions == (
        Question(
            prompt="Which color?",
            header="Color",
            options=[
                QuestionOption(label="Red", description="warm"),
                QuestionOption(label="Blue", description="cool"),
            ],
            multi_select=False,
            free_text=True,
        ),
    )


def test_several_questions_take_their_text_from_each_field() -> None:
    color = {**COLOR_FIELD, "description": "Which color?"}
    both = form(
        {
            "question_0": color,
            "question_0_custom": OTHER,
            "question_1": TOPPINGS_FIELD,
            "question_1_custom": OTHER,
        },
        message="Please answer the following questions.",
    )
    prompts = [(q.prompt, q.header, q.multi_select, q.free_text) for q in both.request.questions]
    assert prompts == [
        ("Which color?", "Color", False, True),
        ("Which toppings?", "Toppings", True, True),
    ]
    assert [o.label for o in both.request.questions[1].options] == ["Cheese", "Olives"]


def test_a_choice_without_its_custom_field_takes_no_text_of_the_users_own() -> None:
    [question] = form({"pick": {"type": "string", "enum": ["a", "b"]}}).request.questions
    assert (question.prompt, question.header, question.free_text) == ("Which color?", None, False)
    assert [o.label for o in question.options] == ["a", "b"]


def test_a_plain_string_field_is_a_question_answered_in_words() -> None:
    fields = {
        "name": {"type": "string", "title": "Name", "description": "Your name?"},
        "ok": {"type": "boolean", "title": "Proceed?"},
    }
    name, ok = form(fields, message="Tell me").request.questions
    assert (name.prompt, name.header, name.options, name.free_text) == (
        "Your name?",
        "Name",
        [],
        True,
    )
    assert (ok.prompt, [o.label for o in ok.options], ok.free_text) == (
        "Proceed?",
        ["Yes", "No"],
        False,
    )


def test_a_form_the_gateway_cannot_take_is_not_asked() -> None:
    number = {"count": {"type": "number", "title": "How many?"}}
    for properties in ({}, {"question_0": COLOR_FIELD, **number}):
        schema = ElicitationSchema.model_validate({"type": "object", "properties": properties})
        assert read_form("elicit-1", "?", schema) is None


def test_answers_go_back_under_the_schemas_field_names() -> None:
    color = {**COLOR_FIELD, "description": "Which color?"}
    both = form(
        {
            "question_0": color,
            "question_0_custom": OTHER,
            "question_1": TOPPINGS_FIELD,
            "question_1_custom": OTHER,
        }
    )
    answers = (answer("Blue"), answer("Cheese", "Olives", text=" anchovies "))
    assert accepted_content(both, answers) == {
        "question_0": "Blue",
        "question_1": ["Cheese", "Olives"],
        "question_1_custom": "anchovies",
    }
    own_words = (answer(text="teal"), answer("Olives"))
    assert accepted_content(both, own_words) == {
        "question_0_custom": "teal",
        "question_1": ["Olives"],
    }


def test_titled_options_answer_with_their_value_and_booleans_with_true_or_false() -> None:
    fields = {
        "size": {
            "type": "string",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
        },
        "ok": {"type": "boolean"},
        "name": {"type": "string"},
    }
    asked = form(fields)
    assert [o.label for o in asked.request.questions[0].options] == ["Small", "Large"]
    answers = (answer("Large"), answer("No"), answer(text="Ada"))
    assert accepted_content(asked, answers) == {"size": "l", "ok": False, "name": "Ada"}


def test_nobody_answering_declines_the_form() -> None:
    assert accepted_content(form({"question_0": COLOR_FIELD}), None) is None
