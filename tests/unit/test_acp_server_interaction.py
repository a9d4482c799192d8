"""Approvals as ACP permission requests, questions as ACP form elicitations, the client's
answers back, and how a turn's end answers ``session/prompt``. Approvals come from the
providers' recorded requests; each ACP message is checked against the SDK's own model, and a
form against the gateway's own reader of such forms."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from acp.schema import (
    AcceptElicitationResponse,
    CreateFormSessionElicitationRequest,
    RequestPermissionRequest,
    RequestPermissionResponse,
)
from pydantic import JsonValue

from app.api.acp.endings import TurnFailure, stop_reason
from app.api.acp.interaction import (
    answers_from,
    decision_for,
    elicitation_form,
    permission_options,
    tool_call_for_approval,
)
from app.errors import InvalidRequest
from app.events import (
    ApprovalOption,
    ApprovalRequested,
    Question,
    QuestionAnswer,
    QuestionAsked,
    QuestionOption,
    TurnCompleted,
    TurnError,
    TurnFailed,
    TurnInterrupted,
    Warning,
)
from app.providers.acp.elicitation import accepted_content, read_form
from app.providers.base import ApprovalRequest, QuestionRequest
from app.providers.claude.questions import question_request as claude_questions
from app.providers.items import ApprovalAsked
from app.providers.opencode.questions import question_request as opencode_questions
from app.runtime.approvals import OPTION_LABELS
from app.runtime.questions import check_answers
from tests.unit.acp_streams import SESSION, claude_items, envelopes, opencode_items

EXPIRES = datetime(2026, 11, 22, 14, 0, tzinfo=UTC)


def requested(request: ApprovalRequest, approval_id: str = "apr_1") -> ApprovalRequested:
    """The approval the gateway asks for a provider's request (as the approvals service)."""
    return ApprovalRequested(
        approval_id=approval_id,
        tool=request.tool,
        input=request.input,
        options=[ApprovalOption(decision=d, label=OPTION_LABELS[d]) for d in request.options],
        expires_at=EXPIRES,
        title=request.title,
        tool_id=request.tool_id,
    )


def asked_in(items: list[object]) -> ApprovalRequest:
    [asked] = [item.request for item in items if isinstance(item, ApprovalAsked)]
    return asked


def permission_request(data: ApprovalRequested) -> dict[str, Any]:
    """``session/request_permission``'s params, checked against the SDK's model."""
    request = RequestPermissionRequest(
        session_id=SESSION,
        tool_call=tool_call_for_approval(data, cwd="/srv/project"),
        options=permission_options(data.options),
        field_meta={"agentGateway": {"approvalId": data.approval_id}},
    )
    params = request.model_dump(by_alias=True, exclude_none=True, mode="json")
    again = RequestPermissionRequest.model_validate(params)
    assert again.model_dump(by_alias=True, exclude_none=True, mode="json") == params
    return params


# --- permissions ----------------------------------------------------------------------------


def test_claude_codes_recorded_approval_asks_for_its_tool_call() -> None:
    data = requested(asked_in(claude_items("perm")))
    params = permission_request(data)
    assert params["toolCall"] == {
        "toolCallId": "toolu_01MOCK",
        "title": "touch created_by_mock.txt",
        "kind": "execute",
        "status": "pending",
        "rawInput": {"command": "touch created_by_mock.txt", "description": "create file"},
    }
    assert params["options"] == [
        {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
        {"optionId": "deny", "name": "Deny", "kind": "reject_once"},
        {"optionId": "allow_session", "name": "Allow for this session", "kind": "allow_always"},
    ]


def test_opencodes_recorded_approval_names_its_command_and_offers_what_opencode_does() -> None:
    request = asked_in(opencode_items("global-event_permission-allow"))
    params = permission_request(requested(request))
    assert params["toolCall"]["toolCallId"] == request.tool_id
    assert params["toolCall"]["title"] == request.input["command"] == "touch x.txt"
    assert params["toolCall"]["kind"] == "execute"
    assert [o["kind"] for o in params["options"]] == [
        {"allow": "allow_once", "deny": "reject_once", "allow_session": "allow_always"}[d]
        for d in request.options
    ]


def test_an_approval_without_a_tool_id_is_asked_under_its_own_id_with_its_diff() -> None:
    edit: dict[str, JsonValue] = {"file_path": "src/a.py", "old_string": "x", "new_string": "y"}
    request = ApprovalRequest(request_id="r", tool="Edit", input=edit, options=("allow", "deny"))
    params = permission_request(requested(request, approval_id="apr_9"))
    assert params["toolCall"]["toolCallId"] == "apr_9"
    assert params["toolCall"]["kind"] == "edit"
    assert params["toolCall"]["content"] == [
        {"type": "diff", "path": "/srv/project/src/a.py", "oldText": "x", "newText": "y"}
    ]
    assert params["toolCall"]["locations"] == [{"path": "/srv/project/src/a.py"}]


def test_an_approval_of_a_known_call_leaves_its_diff_to_the_call() -> None:
    # OpenCode asks about an edit with a unified diff; the tool_call already shows the diff.
    unified = "--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n"
    request = ApprovalRequest(
        request_id="per_1",
        tool="edit",
        input={"filepath": "/srv/project/a.py", "diff": unified, "patterns": ["a.py"]},
        options=("allow", "deny"),
        title="edit: a.py",
        tool_id="call_1",
    )
    call = permission_request(requested(request))["toolCall"]
    assert "content" not in call
    assert (call["toolCallId"], call["kind"]) == ("call_1", "edit")
    assert call["title"] == "Edit /srv/project/a.py"


@pytest.mark.parametrize(
    ("outcome", "decision"),
    [
        ({"outcome": "selected", "optionId": "allow"}, "allow"),
        ({"outcome": "selected", "optionId": "allow_session"}, "allow_session"),
        ({"outcome": "selected", "optionId": "deny"}, "deny"),
        ({"outcome": "cancelled"}, "deny"),
        ({"outcome": "selected", "optionId": "allow_everything"}, "deny"),
    ],
)
def test_the_clients_choice_is_the_decision(outcome: dict[str, Any], decision: str) -> None:
    response = RequestPermissionResponse.model_validate({"outcome": outcome})
    assert decision_for(response) == decision


def test_a_choice_that_was_not_offered_is_a_deny() -> None:
    offered = [ApprovalOption(decision="allow", label="Allow")]
    chosen = RequestPermissionResponse.model_validate(
        {"outcome": {"outcome": "selected", "optionId": "allow_session"}}
    )
    assert decision_for(chosen, offered) == "deny"
    allowed = RequestPermissionResponse.model_validate(
        {"outcome": {"outcome": "selected", "optionId": "allow"}}
    )
    assert decision_for(allowed, offered) == "allow"


# --- questions ------------------------------------------------------------------------------


def asked(request: QuestionRequest) -> QuestionAsked:
    return QuestionAsked(
        question_id="qst_1",
        questions=list(request.questions),
        expires_at=EXPIRES,
        tool_id=request.tool_id,
    )


CLAUDE_QUESTIONS = claude_questions(
    "req_1",
    {
        "questions": [
            {
                "question": "Which database should the service use?",
                "header": "Database",
                "multiSelect": False,
                "options": [
                    {"label": "SQLite", "description": "embedded"},
                    {"label": "PostgreSQL", "description": "a server"},
                ],
            },
            {
                "question": "Which checks should run?",
                "header": "Checks",
                "multiSelect": True,
                "options": [{"label": "lint"}, {"label": "tests"}, {"label": "types"}],
            },
        ]
    },
    "toolu_q",
)
OPENCODE_QUESTION = opencode_questions(
    {
        "id": "que_1",
        "questions": [
            {
                "question": "Name the release.",
                "header": "Name",
                "options": [],
            },
        ],
        "tool": {"callID": "call_q"},
    }
)
STRICT = QuestionRequest(
    request_id="q",
    tool="question",
    questions=(
        Question(
            prompt="Proceed?",
            header="Go",
            options=[QuestionOption(label="Yes"), QuestionOption(label="No")],
            free_text=False,
        ),
    ),
)


def form(data: QuestionAsked) -> tuple[str, dict[str, Any]]:
    """The form's message and schema, checked against the SDK's ``elicitation/create``."""
    made = elicitation_form(data)
    request = CreateFormSessionElicitationRequest(
        session_id=SESSION,
        mode="form",
        message=made.message,
        requested_schema=made.requested_schema,
    )
    params = request.model_dump(by_alias=True, exclude_none=True, mode="json")
    again = CreateFormSessionElicitationRequest.model_validate(params)
    assert again.model_dump(by_alias=True, exclude_none=True, mode="json") == params
    return params["message"], params["requestedSchema"]


@pytest.mark.parametrize("request_", [CLAUDE_QUESTIONS, OPENCODE_QUESTION, STRICT])
def test_a_form_reads_back_as_the_same_questions(request_: QuestionRequest | None) -> None:
    assert request_ is not None
    message, schema = form(asked(request_))
    read = read_form("elicit", message, schema)
    assert read is not None
    assert read.request.questions == request_.questions


def test_the_form_of_several_questions() -> None:
    assert CLAUDE_QUESTIONS is not None
    message, schema = form(asked(CLAUDE_QUESTIONS))
    assert message == "The agent asks 2 questions."
    assert list(schema["properties"]) == [
        "question_0",
        "question_0_custom",
        "question_1",
        "question_1_custom",
    ]
    database = schema["properties"]["question_0"]
    assert database["type"] == "string"
    assert (database["title"], database["description"]) == (
        "Database",
        "Which database should the service use?",
    )
    assert database["oneOf"][0] == {"const": "SQLite", "title": "SQLite", "description": "embedded"}
    checks = schema["properties"]["question_1"]
    assert checks["type"] == "array"
    assert [v["const"] for v in checks["items"]["anyOf"]] == ["lint", "tests", "types"]
    assert schema.get("required") is None  # each may be answered in the user's own words


def test_a_single_question_is_the_forms_message_and_a_strict_choice_is_required() -> None:
    message, schema = form(asked(STRICT))
    assert message == "Proceed?"
    assert "description" not in schema["properties"]["question_0"]
    assert list(schema["properties"]) == ["question_0"]
    assert schema["required"] == ["question_0"]
    assert OPENCODE_QUESTION is not None
    _, text_only = form(asked(OPENCODE_QUESTION))
    assert text_only["properties"]["question_0"] == {"type": "string", "title": "Name"}
    assert text_only["required"] == ["question_0"]


def accept(content: dict[str, Any]) -> dict[str, Any] | None:
    """The ``accept`` content as the SDK parses the client's answer."""
    return AcceptElicitationResponse.model_validate(
        {"action": "accept", "content": content}
    ).content


def test_the_accepted_content_is_the_answers() -> None:
    assert CLAUDE_QUESTIONS is not None
    data = asked(CLAUDE_QUESTIONS)
    answers = answers_from(
        data,
        accept(
            {
                "question_0": "PostgreSQL",
                "question_0_custom": "  version 17  ",
                "question_1": ["tests", "lint", "tests"],
                "question_1_custom": "",
            }
        ),
    )
    assert answers == (
        QuestionAnswer(selected=["PostgreSQL"], text="version 17"),
        QuestionAnswer(selected=["tests", "lint"]),
    )
    check_answers("qst_1", data.questions, answers)


def test_answers_written_by_the_gateways_client_read_back_the_same() -> None:
    assert CLAUDE_QUESTIONS is not None
    data = asked(CLAUDE_QUESTIONS)
    message, schema = form(data)
    read = read_form("e", message, schema)
    assert read is not None
    answers = (
        QuestionAnswer(selected=["SQLite"]),
        QuestionAnswer(selected=["types"], text="and the docs build"),
    )
    content = accepted_content(read, answers)
    assert answers_from(data, accept(dict(content or {}))) == answers


def test_an_empty_answer_is_left_for_the_gateways_check_to_refuse() -> None:
    assert OPENCODE_QUESTION is not None
    data = asked(OPENCODE_QUESTION)
    assert answers_from(data, accept({"question_0": "v2.0"})) == (QuestionAnswer(text="v2.0"),)
    empty = answers_from(data, None)
    assert empty == (QuestionAnswer(),)
    with pytest.raises(InvalidRequest, match="is empty"):
        check_answers("qst_1", data.questions, empty)


# --- the turn's end -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop", "reason"),
    [
        ("end_turn", "end_turn"),  # Claude Code, ACP agents
        (None, "end_turn"),  # Codex
        ("stop", "end_turn"),  # OpenCode
        ("tool-calls", "end_turn"),
        ("cancelled", "end_turn"),  # an ACP agent that ended its turn after a denial
        ("max_tokens", "max_tokens"),
        ("length", "max_tokens"),
        ("refusal", "refusal"),
        ("content-filter", "refusal"),
        ("max_turn_requests", "max_turn_requests"),
    ],
)
def test_a_completed_turn_ends_the_prompt(stop: str | None, reason: str) -> None:
    [event] = envelopes([TurnCompleted(final_text="done", stop_reason=stop)])
    assert stop_reason(event) == reason


def test_an_interrupted_turn_is_cancelled() -> None:
    [event] = envelopes([TurnInterrupted(reason="interrupted by the client")])
    assert stop_reason(event) == "cancelled"


def test_a_failed_turn_is_an_internal_error_carrying_the_failure() -> None:
    error = TurnError(
        kind="agent_error",
        message="This content was flagged for possible biological risk.",
        provider="codex",
    )
    [event] = envelopes([TurnFailed(error=error)])
    failure = stop_reason(event)
    assert isinstance(failure, TurnFailure)
    rpc = failure.request_error().to_error_obj()
    assert rpc == {
        "code": -32603,
        "message": "This content was flagged for possible biological risk.",
        "data": {
            "type": "urn:agent-gateway:problem:turn_failed",
            "title": "The turn failed",
            "detail": "This content was flagged for possible biological risk.",
            "turn_id": "trn_1",
            "failure": {
                "kind": "agent_error",
                "message": "This content was flagged for possible biological risk.",
                "retryable": False,
                "provider": "codex",
            },
        },
    }


def test_an_event_that_does_not_end_a_turn_has_no_stop_reason() -> None:
    [event] = envelopes([Warning(message="w")])
    with pytest.raises(ValueError, match="warning does not end a turn"):
        stop_reason(event)
