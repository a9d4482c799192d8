"""The gateway's events as ACP ``session/update``s: every provider's recorded turns (their
real CLI output through their real normalizers, wrapped as the event log sends them), and
built events for what the recordings do not hold. Every update is checked against the ACP
SDK's own ``SessionNotification`` model."""

from __future__ import annotations

from typing import Any

import pytest

from app.api.acp.updates import MAX_TOOL_TEXT_CHARS, UpdateTranslator
from app.events import (
    EventData,
    MessageCompleted,
    MessageDelta,
    MessageDeltaEvent,
    PlanEntry,
    PlanUpdated,
    ReasoningCompleted,
    ReasoningDelta,
    ToolCompleted,
    ToolOutput,
    ToolStarted,
    TurnStarted,
    Usage,
    UsageReported,
)
from tests.unit.acp_streams import (
    PROMPT,
    RECORDED,
    SESSION,
    TURN,
    Stream,
    envelopes,
    recorded,
    wire,
)

Sent = list[tuple[dict[str, Any], dict[str, Any]]]
"""Each update sent, with the event it came from."""


def translate(stream: Stream, translator: UpdateTranslator | None = None) -> Sent:
    translator = translator or UpdateTranslator()
    return [(event, wire(u)) for event in stream for u in translator.updates_for(event)]


def of(sent: Sent, kind: str) -> list[dict[str, Any]]:
    return [update for _, update in sent if update["sessionUpdate"] == kind]


def texts(sent: Sent, kind: str) -> str:
    """The text of every ``kind`` chunk that is the agent's (not a gateway notice)."""
    return "".join(
        u["content"]["text"] for u in of(sent, kind) if "event" not in u["_meta"]["agentGateway"]
    )


def events(stream: Stream, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in stream if e["type"] == kind]


# --- recorded turns ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_a_recorded_turn_shows_each_text_once_and_every_tool_from_start_to_end(name: str) -> None:
    stream = recorded(name)
    sent = translate(stream)
    for event, update in sent:
        assert update["_meta"]["agentGateway"]["seq"] == event["seq"]
        assert update["_meta"]["agentGateway"]["turnId"] == TURN
    [prompt] = of(sent, "user_message_chunk")
    assert prompt["content"] == {"type": "text", "text": PROMPT}
    assert sent[0][1] is prompt
    completed = "".join(d["text"] for d in events(stream, "message.completed"))
    assert texts(sent, "agent_message_chunk") == completed
    thoughts = "".join(d["text"] for d in events(stream, "reasoning.completed"))
    assert texts(sent, "agent_thought_chunk") == thoughts
    started = [d["tool_id"] for d in events(stream, "tool.started")]
    assert [u["toolCallId"] for u in of(sent, "tool_call")] == started
    updates = of(sent, "tool_call_update")
    for data in events(stream, "tool.completed"):
        final = [u for u in updates if u["toolCallId"] == data["tool_id"]][-1]
        assert final["status"] == ("completed" if data["status"] == "completed" else "failed")
        if data["output"]:
            assert data["output"] in final["content"][0]["content"]["text"]
            assert final["rawOutput"]["output"] == data["output"]


@pytest.mark.parametrize("name", ["claude:perm", "codex:accept", "acp:copilot-tool-allow"])
def test_a_recorded_shell_call_is_an_execute_call_titled_by_its_command(name: str) -> None:
    sent = translate(recorded(name))
    [call] = of(sent, "tool_call")
    assert call["kind"] == "execute"
    assert call["status"] == "pending"
    assert call["title"] == call["rawInput"]["command"]
    assert "touch" in call["title"]
    assert "content" not in call
    final = [u for u in of(sent, "tool_call_update") if u["toolCallId"] == call["toolCallId"]][-1]
    assert final["status"] == "completed"


@pytest.mark.parametrize("name", ["claude:deny", "codex:decline", "acp:gemini-tool-reject"])
def test_a_recorded_denied_call_fails_and_says_it_was_denied(name: str) -> None:
    sent = translate(recorded(name))
    [call] = of(sent, "tool_call")
    final = [u for u in of(sent, "tool_call_update") if u["toolCallId"] == call["toolCallId"]][-1]
    assert final["status"] == "failed"
    assert final["_meta"]["agentGateway"]["status"] == "denied"


def test_recorded_retries_are_told_as_thoughts_with_the_event_whole() -> None:
    stream = recorded("claude:overloaded")
    retries = [e for e in stream if e["type"] == "retry.scheduled"]
    assert retries
    notices = [
        u for u in of(translate(stream), "agent_thought_chunk") if u["messageId"][:4] == "evt_"
    ]
    assert [n["_meta"]["agentGateway"]["event"] for n in notices] == retries
    assert notices[0]["content"]["text"].strip() == (
        "The agent is retrying in 0.5 s (attempt 1 of 2) after an overloaded service: "
        "Claude API error 529 (overloaded); the CLI retries."
    )


def test_a_recorded_plan_becomes_the_acp_plan() -> None:
    plan = PlanUpdated(
        entries=[
            PlanEntry(text="Read the code", status="completed"),
            PlanEntry(text="Fix the bug", status="in_progress"),
            PlanEntry(text="Run the tests", status="pending"),
        ]
    )
    [update] = translate(envelopes([plan]))
    assert update[1]["entries"] == [
        {"content": "Read the code", "priority": "medium", "status": "completed"},
        {"content": "Fix the bug", "priority": "medium", "status": "in_progress"},
        {"content": "Run the tests", "priority": "medium", "status": "pending"},
    ]


# --- messages -------------------------------------------------------------------------------


def test_streamed_text_goes_once_as_its_deltas_and_the_completion_adds_nothing() -> None:
    sent = translate(
        envelopes(
            [
                ReasoningDelta(message_id="m:0", text="Let me "),
                ReasoningDelta(message_id="m:0", text="think."),
                ReasoningCompleted(message_id="m:0", text="Let me think."),
                MessageDelta(message_id="m:1", text="Hello"),
                MessageDelta(message_id="m:1", text=" there."),
                MessageCompleted(message_id="m:1", text="Hello there."),
            ]
        )
    )
    assert [(u["sessionUpdate"], u["messageId"], u["content"]["text"]) for _, u in sent] == [
        ("agent_thought_chunk", "m:0", "Let me "),
        ("agent_thought_chunk", "m:0", "think."),
        ("agent_message_chunk", "m:1", "Hello"),
        ("agent_message_chunk", "m:1", " there."),
    ]


def test_a_completion_without_deltas_carries_its_whole_text_once() -> None:
    # OpenCode completes a text part that never streamed; Codex a reasoning summary.
    sent = translate(
        envelopes(
            [
                ReasoningCompleted(message_id="rs_1", text="A\n\nB"),
                MessageCompleted(message_id="prt_t", text="answer"),
                MessageCompleted(message_id="prt_empty", text=""),
                MessageDelta(message_id="prt_e", text=""),  # an empty delta shows nothing
                MessageCompleted(message_id="prt_e", text="shown once"),
            ]
        )
    )
    assert [(u["sessionUpdate"], u["messageId"], u["content"]["text"]) for _, u in sent] == [
        ("agent_thought_chunk", "rs_1", "A\n\nB"),
        ("agent_message_chunk", "prt_t", "answer"),
        ("agent_message_chunk", "prt_e", "shown once"),
    ]


def test_deltas_of_an_earlier_turn_do_not_hide_a_later_completion() -> None:
    translator = UpdateTranslator()
    first = envelopes([TurnStarted(prompt="one"), MessageDelta(message_id="m", text="partial")])
    translate(first, translator)
    second = envelopes(
        [TurnStarted(prompt="two"), MessageCompleted(message_id="m", text="whole")],
        turn_id="trn_2",
        first_seq=3,
    )
    sent = translate(second, translator)
    assert [u["content"]["text"] for u in of(sent, "agent_message_chunk")] == ["whole"]
    assert of(sent, "user_message_chunk")[0]["messageId"] == "trn_2"


# --- tools ----------------------------------------------------------------------------------


def shell(tool_id: str = "t1", command: str = "make test") -> ToolStarted:
    return ToolStarted(tool_id=tool_id, name="Bash", kind="command", input={"command": command})


def test_a_tools_streamed_output_is_sent_whole_each_time_and_its_end_keeps_it() -> None:
    sent = translate(
        envelopes(
            [
                shell(),
                ToolOutput(tool_id="t1", text="line 1\n"),
                ToolOutput(tool_id="t1", text="line 2\n"),
                ToolCompleted(tool_id="t1", status="failed", exit_code=2),
            ]
        )
    )
    progress = of(sent, "tool_call_update")
    assert [u["status"] for u in progress] == ["in_progress", "in_progress", "failed"]
    shown = [u["content"][0]["content"]["text"] for u in progress]
    assert shown == [
        "```console\nline 1\n```",
        "```console\nline 1\nline 2\n```",
        "```console\nline 1\nline 2\n```",
    ]
    assert progress[-1]["rawOutput"] == {"exit_code": 2}


def test_a_long_output_repeats_only_its_tail() -> None:
    chunk = "x" * (MAX_TOOL_TEXT_CHARS // 2) + "\n"
    tool = ToolStarted(tool_id="t1", name="mcp__s__t", kind="mcp", input={})
    items: list[EventData] = [tool, *[ToolOutput(tool_id="t1", text=chunk) for _ in range(3)]]
    last = of(translate(envelopes(items)), "tool_call_update")[-1]
    text = last["content"][0]["content"]["text"]
    assert len(text) == MAX_TOOL_TEXT_CHARS
    assert text.startswith("…")
    assert text.endswith(chunk)


def test_output_with_backticks_stays_inside_its_fence() -> None:
    sent = translate(envelopes([shell(), ToolOutput(tool_id="t1", text="a ``` b\n")]))
    assert of(sent, "tool_call_update")[0]["content"][0]["content"]["text"] == (
        "````console\na ``` b\n````"
    )


def test_a_completed_edit_keeps_its_diff_and_a_failed_one_shows_why() -> None:
    edit = {"file_path": "/w/a.py", "old_string": "x = 1", "new_string": "x = 2"}
    sent = translate(
        envelopes(
            [
                ToolStarted(tool_id="e1", name="Edit", kind="file_change", input=edit),
                ToolCompleted(tool_id="e1", status="completed", output="The file was updated"),
                ToolStarted(tool_id="e2", name="Edit", kind="file_change", input=edit),
                ToolCompleted(tool_id="e2", status="failed", output="old_string not found"),
            ]
        )
    )
    first, _ = of(sent, "tool_call")
    assert first["content"] == [
        {"type": "diff", "path": "/w/a.py", "oldText": "x = 1", "newText": "x = 2"}
    ]
    assert first["locations"] == [{"path": "/w/a.py"}]
    done, failed = of(sent, "tool_call_update")
    assert "content" not in done
    assert done["rawOutput"] == {"output": "The file was updated"}
    assert failed["content"][0]["content"]["text"] == "old_string not found"


def test_output_of_a_tool_started_before_the_translator_is_still_sent() -> None:
    sent = translate(envelopes([ToolOutput(tool_id="t9", text="late")], first_seq=40))
    assert sent[0][1]["toolCallId"] == "t9"
    assert sent[0][1]["content"][0]["content"]["text"] == "late"


def test_relative_paths_are_made_absolute_in_the_sessions_workspace() -> None:
    tool = ToolStarted(
        tool_id="r1", name="read", kind="other", input={"filePath": "src/../lib/a.ts"}
    )
    [(_, call)] = translate(envelopes([tool]), UpdateTranslator(cwd="/work/repo"))
    assert (call["kind"], call["title"]) == ("read", "Read src/../lib/a.ts")
    assert call["locations"] == [{"path": "/work/repo/lib/a.ts"}]


# --- usage, notices, what is not an update -----------------------------------------------------


def test_usage_is_a_session_info_update_with_the_tokens_in_meta() -> None:
    usage = Usage(input_tokens=24, output_tokens=27, cached_input_tokens=3, cost_usd=0.0005)
    [(event, update)] = translate(envelopes([UsageReported(usage=usage)]))
    assert update["sessionUpdate"] == "session_info_update"
    assert update["updatedAt"] == event["at"] == "2026-11-22T13:00:00.000000Z"
    assert update["_meta"]["agentGateway"] == {
        "seq": 1,
        "turnId": TURN,
        "usage": {
            "input_tokens": 24,
            "output_tokens": 27,
            "cached_input_tokens": 3,
            "cache_creation_input_tokens": 0,
            "cost_usd": 0.0005,
        },
    }


def notice_of(type_: str, data: dict[str, Any], at: str = "2026-11-22T13:00:00.000000Z") -> str:
    event = {
        "seq": 7,
        "session_id": SESSION,
        "turn_id": TURN,
        "attempt": 1,
        "provider": "codex",
        "at": at,
        "type": type_,
        "data": data,
    }
    [update] = UpdateTranslator().updates_for(event)
    sent = wire(update)
    assert sent["sessionUpdate"] == "agent_thought_chunk"
    assert sent["messageId"] == "evt_7"
    assert sent["_meta"]["agentGateway"] == {"seq": 7, "turnId": TURN, "event": event}
    text: str = sent["content"]["text"]
    assert text.startswith("\n\n")
    assert text.endswith("\n\n")
    return text.strip()


def retry(**data: Any) -> dict[str, Any]:
    return {"source": "gateway", "attempt": 2, "max_attempts": 3, "delay_s": 2.0, **data}


@pytest.mark.parametrize(
    ("type_", "data", "sentence"),
    [
        (
            "retry.scheduled",
            retry(kind="rate_limited", message="429 Too Many Requests"),
            "Retrying in 2 s (attempt 2 of 3) after rate limiting: 429 Too Many Requests.",
        ),
        (
            "retry.scheduled",
            retry(source="cli", attempt=1, max_attempts=None, delay_s=0.53, kind="network"),
            "The agent is retrying in 0.5 s (attempt 1) after a network error.",
        ),
        (
            "retry.scheduled",
            retry(delay_s=None, kind="server_error", message="boom\n  at line 3"),
            "Retrying (attempt 2 of 3) after a server error: boom at line 3.",
        ),
        (
            "retry.scheduled",
            retry(delay_s=3900.0, kind="usage_limit", resume_at="2026-11-22T14:05:01Z"),
            "Waiting for the usage limit to reset at 14:05 UTC.",
        ),
        (
            "retry.scheduled",
            retry(delay_s=90000.0, kind="usage_limit", resume_at="2026-11-23T14:05:01Z"),
            "Waiting for the usage limit to reset at 2026-11-23 14:05 UTC.",
        ),
        (
            "provider.switched",
            {
                "from_provider": "codex",
                "to_provider": "claude_code",
                "reason": "usage_limit",
                "message": "You've hit your usage limit.",
            },
            "Switched from codex to claude_code after a usage limit: You've hit your usage limit.",
        ),
        (
            "provider.switched",
            {"from_provider": "codex", "to_provider": "opencode", "reason": "some_new_reason"},
            "Switched from codex to opencode after some new reason.",
        ),
        (
            "warning",
            {"message": "snapshots are off: the workspace is over the cap", "code": "snapshot"},
            "Warning: snapshots are off: the workspace is over the cap.",
        ),
    ],
)
def test_what_the_gateway_did_is_one_plain_sentence(
    type_: str, data: dict[str, Any], sentence: str
) -> None:
    assert notice_of(type_, data) == sentence


def test_a_long_message_is_cut() -> None:
    text = notice_of("warning", {"message": "x" * 1000})
    assert len(text) < 320
    assert text.endswith("…")


def test_session_approval_question_and_turn_end_events_are_not_updates() -> None:
    stream = recorded("claude:perm")
    translator = UpdateTranslator()
    silent = [
        {**stream[0], "type": "session.thread_bound", "data": {"thread_id": "th"}},
        {
            **stream[0],
            "type": "approval.resolved",
            "data": {"approval_id": "a1", "decision": "allow", "by": "client", "reason": "decided"},
        },
        {
            **stream[0],
            "type": "question.resolved",
            "data": {"question_id": "q", "answers": None, "by": "gateway", "reason": "expired"},
        },
        stream[-1],
    ]
    assert [translator.updates_for(event) for event in silent] == [[], [], [], []]


@pytest.mark.parametrize(
    "event",
    [
        {"seq": 1},
        {**envelopes([MessageDelta(message_id="m", text="hi")])[0], "type": "message.exploded"},
        {**envelopes([MessageDelta(message_id="m", text="hi")])[0], "data": {"text": 3}},
    ],
)
def test_an_event_that_does_not_parse_is_skipped(
    event: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    assert UpdateTranslator().updates_for(event) == []
    assert f"skipping event {event['seq']}" in caplog.text


def test_a_typed_event_translates_like_its_wire_form() -> None:
    [event] = envelopes([MessageDelta(message_id="m", text="hi")])
    typed = MessageDeltaEvent.model_validate(event)
    assert translate([event]) == [(event, wire(u)) for u in UpdateTranslator().updates_for(typed)]
