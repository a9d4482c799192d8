"""Claude Code stdout becomes normalized items; driven by recorded real CLI output: whole
sessions, the pairing of streamed and whole messages, tool calls."""

from __future__ import annotations

import pytest

from app.events import (
    MessageCompleted,
    MessageDelta,
    ReasoningCompleted,
    ReasoningDelta,
    RetryScheduled,
    ToolCompleted,
    ToolStarted,
    Usage,
    UsageReported,
)
from app.providers.base import ApprovalRequest
from app.providers.claude.normalizer import (
    ApprovalAsked,
    ControlReply,
    ThreadSeen,
    TurnEnded,
    UsageSoFar,
    tool_kind,
)
from tests.unit.claude_lines import (
    CAPTURES,
    FINAL_TEXT,
    SUGGESTIONS,
    TOOL_ID,
    TOUCH_INPUT,
    assistant,
    cli_lines,
    completed_turn,
    feed_all,
    line,
    result,
    second_turn_text,
    stream,
)

# --- recorded sessions ----------------------------------------------------------------------


def test_approved_tool_call_session_yields_the_exact_item_sequence() -> None:
    session_id = "07b553c5-568b-44e9-9602-932d51eaafae"
    first = "msg_1795310243555:0"

    items = [item for item in feed_all(cli_lines("perm")) if not isinstance(item, UsageSoFar)]

    initialize = items[0]
    assert isinstance(initialize, ControlReply)
    assert (initialize.request_id, initialize.ok, initialize.error) == ("req_1", True, None)
    assert initialize.payload["claude_code_version"] == "2.1.330"
    assert items[1:] == [
        ThreadSeen(thread_id=session_id),
        MessageDelta(message_id=first, text="I will run a command."),
        MessageCompleted(message_id=first, text="I will run a command."),
        ToolStarted(tool_id=TOOL_ID, name="Bash", kind="command", input=TOUCH_INPUT),
        ApprovalAsked(
            request=ApprovalRequest(
                request_id="95d1a12f-f560-443c-a18e-bed706343471",
                tool="Bash",
                input=TOUCH_INPUT,
                title="create file",
                tool_id=TOOL_ID,
            ),
            suggestions=SUGGESTIONS,
        ),
        ToolCompleted(
            tool_id=TOOL_ID, status="completed", output="(Bash completed with no output)"
        ),
        *second_turn_text("msg_1795310243670"),
        *completed_turn(session_id),
    ]


@pytest.mark.parametrize("capture", ["perm", "normal"])
def test_each_model_response_reports_what_the_turn_used_so_far_up_to_its_result(
    capture: str,
) -> None:
    items = feed_all(cli_lines(capture))
    so_far = [item.usage for item in items if isinstance(item, UsageSoFar)]
    [reported] = [item.usage for item in items if isinstance(item, UsageReported)]
    # Two model responses (the tool call, then the answer): each reports its input as it
    # starts and its output as it ends, and the last sum is the result's own count.
    assert [(u.input_tokens, u.output_tokens) for u in so_far] == [
        (12, 1),
        (12, 20),
        (24, 21),
        (24, 27),
    ]
    assert (so_far[-1].input_tokens, so_far[-1].output_tokens) == (
        reported.input_tokens,
        reported.output_tokens,
    )
    assert all(u.cost_usd is None for u in so_far)  # the cost comes with the result alone
    assert items.index(next(i for i in items if isinstance(i, UsageSoFar))) < items.index(
        next(i for i in items if isinstance(i, ToolStarted))
    )


def test_completed_message_repeats_exactly_the_streamed_text_under_the_same_id() -> None:
    items = feed_all(cli_lines("perm"))

    streamed: dict[str, str] = {}
    for item in items:
        if isinstance(item, MessageDelta):
            streamed[item.message_id] = streamed.get(item.message_id, "") + item.text
    completed = {item.message_id: item.text for item in items if isinstance(item, MessageCompleted)}
    assert completed == streamed
    assert len(completed) == 2


def test_auto_approved_session_has_no_approval_and_reports_the_command_output() -> None:
    items = [i for i in feed_all(cli_lines("normal"))[1:] if not isinstance(i, UsageSoFar)]

    assert items == [
        ThreadSeen(thread_id="c31e87dc-ba5d-4210-af51-3f4acb7c3b91"),
        MessageDelta(message_id="msg_1795310235370:0", text="I will run a command."),
        MessageCompleted(message_id="msg_1795310235370:0", text="I will run a command."),
        ToolStarted(
            tool_id=TOOL_ID,
            name="Bash",
            kind="command",
            input={"command": "echo hi", "description": "say hi"},
        ),
        ToolCompleted(tool_id=TOOL_ID, status="completed", output="hi"),
        *second_turn_text("msg_1795310235482"),
        *completed_turn("c31e87dc-ba5d-4210-af51-3f4acb7c3b91"),
    ]


def test_denied_tool_call_completes_as_denied_and_the_turn_still_completes() -> None:
    items = feed_all(cli_lines("deny"))

    [approval] = [item for item in items if isinstance(item, ApprovalAsked)]
    assert approval.request.request_id == "bfdcb975-cf9f-40cb-93f7-281298a7748b"
    [tool] = [item for item in items if isinstance(item, ToolCompleted)]
    assert tool == ToolCompleted(tool_id=TOOL_ID, status="denied", output="not allowed by gateway")
    assert items[-2:] == completed_turn("f7c9bd75-1a5b-4188-acaf-c7848ddfdba7")


def test_interrupted_session_ends_as_interrupted() -> None:
    items = feed_all(cli_lines("interrupt"))

    assert ControlReply(request_id="req_int", ok=True, payload={"still_queued": []}) in items
    usage = Usage(input_tokens=12, output_tokens=20, cost_usd=0.00038700000000000003)
    end = items[-1]
    assert items[-2] == UsageReported(usage=usage)
    assert isinstance(end, TurnEnded)
    assert end.thread_id == "7be4aee7-c64e-4ad6-a442-0ff8501ba062"
    assert end.outcome.status == "interrupted"
    assert end.outcome.usage == usage
    assert end.outcome.error is not None
    assert end.outcome.error.kind == "interrupted"
    assert end.outcome.error.retryable is False
    # "[Request interrupted by user]" is a CLI marker, not a message.
    assert not [item for item in items[-4:] if isinstance(item, MessageDelta | MessageCompleted)]


def test_overloaded_api_reports_cli_retries_then_fails_retryable() -> None:
    items = feed_all(cli_lines("overloaded"))[1:]

    assert items[:3] == [
        ThreadSeen(thread_id="ec9fddf7-6dfa-46d5-9ced-bfc8e52e861d"),
        RetryScheduled(
            source="cli",
            attempt=1,
            max_attempts=2,
            delay_s=0.529,
            kind="overloaded",
            message="Claude API error 529 (overloaded); the CLI retries.",
        ),
        RetryScheduled(
            source="cli",
            attempt=2,
            max_attempts=2,
            delay_s=1.038,
            kind="overloaded",
            message="Claude API error 529 (overloaded); the CLI retries.",
        ),
    ]
    # The synthetic "API Error" assistant line is not agent prose.
    assert items[3] == UsageReported(usage=Usage(cost_usd=0.0))
    end = items[4]
    assert isinstance(end, TurnEnded)
    assert len(items) == 5
    assert end.outcome.status == "failed"
    error = end.outcome.error
    assert error is not None
    assert (error.kind, error.retryable, error.provider) == ("overloaded", True, "claude_code")
    assert error.message.startswith("API Error: 529 Overloaded.")


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_capture_ends_its_turn_once_with_the_result(capture: str) -> None:
    items = feed_all(cli_lines(capture))

    assert [type(item) for item in items].count(TurnEnded) == 1
    assert isinstance(items[-1], TurnEnded)
    assert items == feed_all(cli_lines(capture))  # deterministic


def test_without_partial_messages_whole_blocks_become_delta_and_completion() -> None:
    lines = [raw for raw in cli_lines("perm") if b'"type":"stream_event"' not in raw]

    messages = [
        item for item in feed_all(lines) if isinstance(item, MessageDelta | MessageCompleted)
    ]

    assert messages == [
        MessageDelta(message_id="msg_1795310243555:0", text="I will run a command."),
        MessageCompleted(message_id="msg_1795310243555:0", text="I will run a command."),
        MessageDelta(message_id="msg_1795310243670:0", text=FINAL_TEXT),
        MessageCompleted(message_id="msg_1795310243670:0", text=FINAL_TEXT),
    ]


# --- stream pairing -------------------------------------------------------------------------


def test_thinking_and_text_blocks_pair_with_their_streamed_indexes() -> None:
    items = feed_all(
        [
            stream({"type": "message_start", "message": {"id": "msg_1"}}),
            stream(
                {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking"}}
            ),
            stream(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "thinking_delta", "thinking": "hm"},
                }
            ),
            stream(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "signature_delta", "signature": "x"},
                }
            ),
            assistant({"type": "thinking", "thinking": "hm", "signature": "x"}),
            stream({"type": "content_block_stop", "index": 0}),
            stream(
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {"type": "text", "text": ""},
                }
            ),
            stream(
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "text_delta", "text": "Hi"},
                }
            ),
            assistant({"type": "text", "text": "Hi"}),
            stream(
                {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use"}}
            ),
            stream(
                {
                    "type": "content_block_delta",
                    "index": 2,
                    "delta": {"type": "input_json_delta", "partial_json": "{"},
                }
            ),
            assistant({"type": "tool_use", "id": "t1", "name": "mcp__git__log", "input": {}}),
            stream(
                {
                    "type": "content_block_start",
                    "index": 3,
                    "content_block": {"type": "text", "text": ""},
                }
            ),
            stream(
                {
                    "type": "content_block_delta",
                    "index": 3,
                    "delta": {"type": "text_delta", "text": "Bye"},
                }
            ),
            assistant({"type": "text", "text": "Bye"}),
            stream({"type": "message_stop"}),
        ]
    )

    assert items == [
        ReasoningDelta(message_id="msg_1:0", text="hm"),
        ReasoningCompleted(message_id="msg_1:0", text="hm"),
        MessageDelta(message_id="msg_1:1", text="Hi"),
        MessageCompleted(message_id="msg_1:1", text="Hi"),
        ToolStarted(tool_id="t1", name="mcp__git__log", kind="mcp", input={}),
        MessageDelta(message_id="msg_1:3", text="Bye"),
        MessageCompleted(message_id="msg_1:3", text="Bye"),
    ]


def test_text_streamed_but_abandoned_by_an_interrupt_is_completed_before_the_turn_ends() -> None:
    items = feed_all(
        [
            stream({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
            stream(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "par"},
                }
            ),
            stream(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "tial"},
                }
            ),
            line(
                {
                    "type": "user",
                    "message": {
                        "role": "user",
                        "content": [{"type": "text", "text": "[Request interrupted by user]"}],
                    },
                }
            ),
            result(subtype="error_during_execution", is_error=True, errors=["[ede_diagnostic] x"]),
        ]
    )

    assert items[:4] == [
        MessageDelta(message_id="msg_1:0", text="par"),
        MessageDelta(message_id="msg_1:0", text="tial"),
        ThreadSeen(thread_id="s1"),
        MessageCompleted(message_id="msg_1:0", text="partial"),
    ]
    end = items[-1]
    assert isinstance(end, TurnEnded)
    assert end.outcome.status == "interrupted"


def test_a_message_abandoned_by_a_stream_cut_is_completed_before_the_answer_asked_again() -> None:
    # The CLI re-asks a cut stream without streaming: the cut answer's deltas stay, and the
    # answer comes whole under a new message id.
    items = feed_all(
        [
            stream({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
            *[
                stream(
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": text},
                    }
                )
                for text in ("part 1 ", "part 2 ")
            ],
            assistant({"type": "text", "text": "Hello."}, message_id="msg_2"),
            result(subtype="success", is_error=False, result="Hello."),
        ]
    )

    content = [item for item in items if isinstance(item, (MessageDelta, MessageCompleted))]
    assert content == [
        MessageDelta(message_id="msg_1:0", text="part 1 "),
        MessageDelta(message_id="msg_1:0", text="part 2 "),
        MessageCompleted(message_id="msg_1:0", text="part 1 part 2 "),
        MessageDelta(message_id="msg_2:0", text="Hello."),
        MessageCompleted(message_id="msg_2:0", text="Hello."),
    ]


def test_a_later_streamed_message_completes_the_abandoned_one_first() -> None:
    def text_delta(text: str, message_id: str) -> bytes:
        return stream(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
            message_id=message_id,
        )

    start = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
    items = feed_all(
        [
            stream(start),
            text_delta("cut", "msg_1"),
            stream(start, message_id="msg_2"),
            text_delta("whole", "msg_2"),
            assistant({"type": "text", "text": "whole"}, message_id="msg_2"),
        ]
    )

    assert items == [
        MessageDelta(message_id="msg_1:0", text="cut"),
        MessageCompleted(message_id="msg_1:0", text="cut"),
        MessageDelta(message_id="msg_2:0", text="whole"),
        MessageCompleted(message_id="msg_2:0", text="whole"),
    ]


def test_subagent_prose_is_skipped_but_its_tool_calls_are_reported() -> None:
    nested = {"parent_tool_use_id": "toolu_task"}
    items = feed_all(
        [
            stream(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "x"},
                },
                **nested,
            ),
            assistant({"type": "text", "text": "sub prose"}, **nested),
            assistant(
                {"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "/a"}},
                **nested,
            ),
        ]
    )

    assert items == [
        ToolStarted(tool_id="t2", name="Read", kind="other", input={"file_path": "/a"})
    ]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Bash", "command"),
        ("BashOutput", "command"),
        ("KillShell", "command"),
        ("Edit", "file_change"),
        ("MultiEdit", "file_change"),
        ("Write", "file_change"),
        ("NotebookEdit", "file_change"),
        ("mcp__github__create_issue", "mcp"),
        ("WebSearch", "web_search"),
        ("WebFetch", "web_search"),
        ("web_search", "web_search"),
        ("Read", "other"),
        ("Task", "other"),
    ],
)
def test_tool_kinds(name: str, kind: str) -> None:
    assert tool_kind(name) == kind


def test_server_tool_use_starts_and_completes_inside_the_assistant_message() -> None:
    items = feed_all(
        [
            assistant(
                {
                    "type": "server_tool_use",
                    "id": "srv_1",
                    "name": "web_search",
                    "input": {"query": "q"},
                }
            ),
            assistant({"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []}),
        ]
    )

    assert items == [
        ToolStarted(tool_id="srv_1", name="web_search", kind="web_search", input={"query": "q"}),
        ToolCompleted(tool_id="srv_1", status="completed"),
    ]
