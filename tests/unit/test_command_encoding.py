"""Session commands have one encoding: what one replica encodes, another decodes to the same
command, and what is not a command is refused before anything runs."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import pytest

from app.errors import InvalidRequest
from app.events import QuestionAnswer
from app.records import RevertRecord, SessionRecord, TurnRecord
from app.runtime.commands import (
    Answer,
    Close,
    Command,
    Configure,
    Interrupt,
    Respond,
    Revert,
    StartTurn,
    decode,
    decode_result,
    encode,
)

COMMANDS: list[Command] = [
    StartTurn(session_id="ses_1", prompt="hi", retry={"max_attempts": 2, "strategy": "none"}),
    StartTurn(session_id="ses_1", prompt="hi"),
    Interrupt(session_id="ses_1"),
    Respond(
        session_id="ses_1",
        approval_id="apr_1",
        decision="allow",
        message="go",
        updated_input={"command": ["ls", "-l"]},
    ),
    Respond(session_id="ses_1", approval_id="apr_1", decision="deny"),
    Answer(
        session_id="ses_1",
        question_id="apr_2",
        answers=(QuestionAnswer(selected=["Yes"]), QuestionAnswer(text="my own")),
    ),
    Revert(session_id="ses_1", to_turn="trn_1"),
    Configure(session_id="ses_1", model="opus", approval_mode="auto_edits", provider="codex"),
    Configure(session_id="ses_1", approval_mode="read_only"),
    Close(session_id="ses_1"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.kind)
def test_a_command_decodes_to_itself_after_a_trip_through_json(command: Command) -> None:
    kind, fields = encode(command)
    assert kind == command.kind
    sent = json.loads(json.dumps(fields))  # as it travels between replicas
    assert decode(kind, sent) == command


def test_each_command_has_its_own_kind() -> None:
    kinds = {encode(command)[0] for command in COMMANDS}
    assert kinds == {
        "start_turn",
        "interrupt",
        "respond",
        "answer_question",
        "revert",
        "configure",
        "delete",
    }


@pytest.mark.parametrize(
    ("kind", "fields", "says"),
    [
        ("format_disk", {"session_id": "ses_1"}, "no command 'format_disk'"),
        ("start_turn", {"session_id": "ses_1"}, "invalid start_turn command"),
        ("respond", {"session_id": "ses_1", "approval_id": "a", "decision": "maybe"}, "respond"),
        ("answer_question", {"session_id": "s", "question_id": "q", "answers": "yes"}, "answer"),
        ("interrupt", {}, "invalid interrupt command"),
        ("revert", {"session_id": "ses_1"}, "invalid revert command"),
        ("configure", {"session_id": "s", "approval_mode": "yolo"}, "invalid configure command"),
    ],
)
def test_what_is_not_a_command_is_refused(kind: str, fields: dict[str, object], says: str) -> None:
    with pytest.raises(InvalidRequest, match=says):
        decode(kind, fields)


def test_an_answer_sent_back_is_read_as_the_record_the_api_would_get() -> None:
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    turn = TurnRecord(
        id="trn_1",
        session_id="ses_1",
        number=1,
        prompt="hi",
        status="queued",
        attempts=0,
        provider="claude",
        created_at=created,
    )
    sent = json.loads(json.dumps(dataclasses.asdict(turn), default=datetime.isoformat))
    assert decode_result(StartTurn(session_id="ses_1", prompt="hi"), sent) == turn
    assert decode_result(Interrupt(session_id="ses_1"), "trn_1") == "trn_1"


def test_a_revert_sent_back_is_read_as_what_it_changed() -> None:
    reverted = RevertRecord(
        session_id="ses_1",
        to_turn="trn_1",
        turn_number=1,
        files=[{"path": "a.txt", "status": "modified", "additions": 1, "deletions": 2}],
        additions=1,
        deletions=2,
    )
    sent = json.loads(json.dumps(dataclasses.asdict(reverted)))
    assert decode_result(Revert(session_id="ses_1", to_turn="trn_1"), sent) == reverted


def test_a_configure_sent_back_is_read_as_the_session() -> None:
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    session = SessionRecord(
        id="ses_1",
        owner="alice",
        provider="codex",
        workspace="/w",
        model="opus",
        approval_mode="auto_edits",
        status="idle",
        selection={"reason": "explicit", "requires": ["model_choice"]},
        created_at=created,
        updated_at=created,
    )
    sent = json.loads(json.dumps(dataclasses.asdict(session), default=datetime.isoformat))
    assert decode_result(Configure(session_id="ses_1", model="opus"), sent) == session
