"""Claude Code stdout becomes normalized items; driven by recorded real CLI output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

from app.events import (
    MessageCompleted,
    MessageDelta,
    PlanEntry,
    PlanUpdated,
    ReasoningCompleted,
    ReasoningDelta,
    RetryScheduled,
    ToolCompleted,
    ToolStarted,
    Usage,
    UsageReported,
    Warning,
)
from app.providers.base import ApprovalRequest, TurnOutcome
from app.providers.claude.normalizer import (
    MAX_TOOL_OUTPUT_BYTES,
    ApprovalAsked,
    ApprovalWithdrawn,
    ClaudeItem,
    ClaudeNormalizer,
    ControlReply,
    ThreadSeen,
    TurnEnded,
    UnsupportedControlRequest,
    tool_kind,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "claude" / "reference"
CAPTURES = sorted(path.stem.removeprefix("stream-json_") for path in FIXTURES.glob("*.txt"))

TOOL_ID = "toolu_01MOCK"
TOUCH_INPUT: dict[str, JsonValue] = {
    "command": "touch created_by_mock.txt",
    "description": "create file",
}
SUGGESTIONS: list[JsonValue] = [
    {
        "type": "addRules",
        "rules": [{"toolName": "Bash", "ruleContent": "touch created_by_mock.txt"}],
        "behavior": "allow",
        "destination": "localSettings",
    },
    {"type": "addDirectories", "directories": ["/srv/project"], "destination": "session"},
    {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
]
TURN_USAGE = Usage(
    input_tokens=24,
    output_tokens=27,
    cached_input_tokens=0,
    cache_creation_input_tokens=0,
    cost_usd=0.00047700000000000005,
)
FINAL_TEXT = "Done: the command printed hi."


def cli_lines(capture: str) -> list[bytes]:
    """The lines the real CLI printed on stdout in one capture."""
    text = (FIXTURES / f"stream-json_{capture}.txt").read_text(encoding="utf-8")
    return [line[4:].encode() for line in text.splitlines() if line.startswith("<<< ")]


def feed_all(lines: list[bytes], normalizer: ClaudeNormalizer | None = None) -> list[ClaudeItem]:
    normalizer = normalizer or ClaudeNormalizer()
    return [item for line in lines for item in normalizer.feed(line)]


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def stream(event: dict[str, Any], message_id: str = "msg_1", **extra: Any) -> bytes:
    return line(
        {
            "type": "stream_event",
            "event": event,
            "api_message_id": message_id,
            "parent_tool_use_id": None,
            **extra,
        }
    )


def assistant(block: dict[str, Any], message_id: str = "msg_1", **extra: Any) -> bytes:
    return line(
        {
            "type": "assistant",
            "message": {"id": message_id, "role": "assistant", "model": "m", "content": [block]},
            "parent_tool_use_id": None,
            **extra,
        }
    )


def tool_result(content: Any, *, is_error: bool = False, **extra: Any) -> bytes:
    block = {
        "type": "tool_result",
        "tool_use_id": TOOL_ID,
        "content": content,
        "is_error": is_error,
    }
    return line({"type": "user", "message": {"role": "user", "content": [block]}, **extra})


def result(**fields: Any) -> bytes:
    return line({"type": "result", "session_id": "s1", **fields})


def second_turn_text(message_id: str) -> list[ClaudeItem]:
    text_id = f"{message_id}:0"
    return [
        MessageDelta(message_id=text_id, text="Done"),
        MessageDelta(message_id=text_id, text=": the command "),
        MessageDelta(message_id=text_id, text="printed hi."),
        MessageCompleted(message_id=text_id, text=FINAL_TEXT),
    ]


def completed_turn(session_id: str) -> list[ClaudeItem]:
    return [
        UsageReported(usage=TURN_USAGE),
        TurnEnded(
            outcome=TurnOutcome(
                status="completed", final_text=FINAL_TEXT, usage=TURN_USAGE, stop_reason="end_turn"
            ),
            thread_id=session_id,
        ),
    ]


# --- recorded sessions ----------------------------------------------------------------------


def test_approved_tool_call_session_yields_the_exact_item_sequence() -> None:
    session_id = "07b553c5-568b-44e9-9602-932d51eaafae"
    first = "msg_1795310243555:0"

    items = feed_all(cli_lines("perm"))

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
    items = feed_all(cli_lines("normal"))[1:]

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


# --- tool results ---------------------------------------------------------------------------


def test_failed_tool_result_joins_text_blocks() -> None:
    content = [
        {"type": "text", "text": "Exit code 1"},
        {"type": "image", "source": {}},
        {"type": "text", "text": "boom"},
    ]

    assert feed_all([tool_result(content, is_error=True)]) == [
        ToolCompleted(tool_id=TOOL_ID, status="failed", output="Exit code 1\nboom")
    ]


def test_huge_tool_output_is_capped_with_a_marker() -> None:
    [item] = feed_all([tool_result("é" * 100_000)])

    assert isinstance(item, ToolCompleted)
    assert item.output is not None
    assert len(item.output.encode()) <= MAX_TOOL_OUTPUT_BYTES
    assert item.output.startswith("éé")
    assert item.output.endswith("of 200000 bytes omitted]")


def test_auto_denied_tool_completes_as_denied() -> None:
    items = feed_all(
        [
            line(
                {
                    "type": "system",
                    "subtype": "permission_denied",
                    "tool_name": "Bash",
                    "tool_use_id": TOOL_ID,
                }
            ),
            tool_result("Permission denied", is_error=True),
        ]
    )

    assert items == [ToolCompleted(tool_id=TOOL_ID, status="denied", output="Permission denied")]


def test_replayed_prompt_and_text_only_user_lines_yield_nothing() -> None:
    assert (
        feed_all(
            [
                line({"type": "user", "message": {"role": "user", "content": "run echo hi"}}),
                line(
                    {
                        "type": "user",
                        "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                    }
                ),
            ]
        )
        == []
    )


# --- results --------------------------------------------------------------------------------


def test_error_result_with_success_subtype_is_a_failure() -> None:
    [thread, end] = feed_all(
        [
            result(
                subtype="success",
                is_error=True,
                result="API Error: 401 invalid x-api-key",
                api_error_status=401,
                terminal_reason="api_error",
            )
        ]
    )

    assert thread == ThreadSeen(thread_id="s1")
    assert isinstance(end, TurnEnded)
    assert end.outcome.status == "failed"
    assert end.outcome.error is not None
    assert (end.outcome.error.kind, end.outcome.error.retryable) == ("auth", False)


def test_error_during_execution_without_an_interrupt_is_a_failure() -> None:
    [_, end] = feed_all([result(subtype="error_during_execution", is_error=True, errors=["boom"])])

    assert isinstance(end, TurnEnded)
    assert end.outcome.status == "failed"
    assert end.outcome.error is not None
    assert end.outcome.error.message == "boom"


def test_thread_is_seen_once_per_id_and_taken_from_the_result_without_init() -> None:
    normalizer = ClaudeNormalizer()
    init = line({"type": "system", "subtype": "init", "session_id": "s1"})

    assert normalizer.feed(init) == [ThreadSeen(thread_id="s1")]
    assert normalizer.feed(init) == []
    assert isinstance(normalizer.feed(result(is_error=False, result="ok"))[0], TurnEnded)
    assert normalizer.feed(result(session_id="s2", result="ok"))[0] == ThreadSeen(thread_id="s2")
    assert normalizer.thread_id == "s2"


def test_turn_cost_is_per_turn_although_the_cli_reports_a_running_total() -> None:
    normalizer = ClaudeNormalizer()
    usage = {"input_tokens": 1, "output_tokens": 2, "cache_read_input_tokens": 3}

    def cost(**fields: Any) -> float | None:
        items = normalizer.feed(result(usage=usage, **fields))
        [reported] = [item for item in items if isinstance(item, UsageReported)]
        assert reported.usage.cached_input_tokens == 3
        return reported.usage.cost_usd

    assert cost(total_cost_usd=1.0) == 1.0
    assert cost(total_cost_usd=1.5) == 0.5
    since_last = {"a": {"costUSD": 0.25}, "b": {"costUSD": 0.5}}
    assert cost(total_cost_usd=2.5, model_usage_since_last_result=since_last) == 0.75
    assert cost() is None


def test_result_without_usage_reports_no_usage() -> None:
    items = feed_all([result(result="ok")])

    assert not [item for item in items if isinstance(item, UsageReported)]


# --- control protocol and misc --------------------------------------------------------------


def test_cancelled_cli_request_withdraws_the_approval() -> None:
    assert feed_all([line({"type": "control_cancel_request", "request_id": "r1"})]) == [
        ApprovalWithdrawn(request_id="r1")
    ]


def test_other_cli_requests_are_flagged_for_an_error_answer() -> None:
    request = {"subtype": "hook_callback", "callback_id": "h", "input": {}}

    assert feed_all(
        [line({"type": "control_request", "request_id": "r2", "request": request})]
    ) == [UnsupportedControlRequest(request_id="r2", subtype="hook_callback")]


def test_approval_prefers_the_title_and_honours_suppressed_always_allow() -> None:
    request = {
        "subtype": "can_use_tool",
        "tool_name": "Write",
        "input": {"file_path": "/a"},
        "title": "Claude wants to write /a",
        "description": "write",
        "suppress_always_allow_rule": True,
    }

    [asked] = feed_all([line({"type": "control_request", "request_id": "r3", "request": request})])

    assert asked == ApprovalAsked(
        request=ApprovalRequest(
            request_id="r3",
            tool="Write",
            input={"file_path": "/a"},
            options=("allow", "deny"),
            title="Claude wants to write /a",
        ),
        suggestions=[],
    )


def test_failed_control_reply_carries_the_error() -> None:
    response = {"subtype": "error", "request_id": "req_1", "error": "No conversation found"}

    assert feed_all([line({"type": "control_response", "response": response})]) == [
        ControlReply(request_id="req_1", ok=False, error="No conversation found")
    ]


def test_rejected_rate_limit_is_a_warning_and_others_are_silent() -> None:
    rejected = {"status": "rejected", "resetsAt": 1_795_312_800, "rateLimitType": "five_hour"}

    assert feed_all(
        [
            line({"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}}),
            line({"type": "rate_limit_event", "rate_limit_info": rejected}),
        ]
    ) == [
        Warning(
            code="rate_limited",
            message="Claude usage limit reached (five_hour); resets at 2026-11-22T02:00:00+00:00",
        )
    ]


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\n",
        b"Debug: starting claude\n",
        b"\xff\xfe\x00garbage",
        b"{not json",
        b"[1, 2, 3]",
        b'"a string"',
        b"null",
        b"{}",
        b'{"type": "brand_new_type", "x": 1}',
        b'{"type": "system", "subtype": "brand_new_subtype"}',
        b'{"type": "system", "subtype": "status", "status": "requesting"}',
        b'{"type": "system", "subtype": "session_state_changed", "state": "idle"}',
        b'{"type": "system", "subtype": "task_started", "task_id": "t"}',
        b'{"type": "keep_alive"}',
        b'{"type": "tool_progress", "tool_use_id": "t", "elapsed_time_seconds": 3}',
        b'{"type": "stream_event", "event": {"type": "message_delta"}}',
        b'{"type": "stream_event", "event": "oops"}',
        b'{"type": "stream_event", "event": {"type": "brand_new_event", "index": 0}}',
        b'{"type": "assistant", "message": "oops"}',
        b'{"type": "assistant", "message": {"content": [{"type": "tool_use", "id": 1}]}}',
        b'{"type": "user", "message": {"content": [{"type": "tool_result"}]}}',
        b'{"type": "control_request", "request": {"subtype": "can_use_tool"}}',
        b'{"type": "control_response", "response": null}',
    ],
)
def test_garbage_and_unknown_lines_yield_nothing_and_never_raise(raw: bytes) -> None:
    assert ClaudeNormalizer().feed(raw) == []


def test_api_retry_with_missing_or_non_finite_fields_still_schedules() -> None:
    raw = (
        b'{"type": "system", "subtype": "api_retry", "error_status": null, "retry_delay_ms": 1e999}'
    )

    [retry] = ClaudeNormalizer().feed(raw)

    assert retry == RetryScheduled(
        source="cli",
        attempt=1,
        max_attempts=None,
        delay_s=None,
        kind="network",
        message="Claude API connection error (unknown); the CLI retries.",
    )


TODOS: list[JsonValue] = [
    {"content": "Read the code", "status": "completed", "activeForm": "Reading the code"},
    {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
    {"content": "Run the tests", "status": "pending", "activeForm": "Running the tests"},
]
PLAN = PlanUpdated(
    entries=[
        PlanEntry(text="Read the code", status="completed"),
        PlanEntry(text="Fix the bug", status="in_progress"),
        PlanEntry(text="Run the tests", status="pending"),
    ]
)


def todo_write(todos: JsonValue, **extra: Any) -> bytes:
    block = {"type": "tool_use", "id": TOOL_ID, "name": "TodoWrite", "input": {"todos": todos}}
    return assistant(block, **extra)


def test_an_accepted_todo_write_publishes_the_whole_plan_after_its_tool_events() -> None:
    accepted = "Todos have been modified successfully."
    items = feed_all([todo_write(TODOS), tool_result(accepted)])
    assert items == [
        ToolStarted(tool_id=TOOL_ID, name="TodoWrite", kind="other", input={"todos": TODOS}),
        ToolCompleted(tool_id=TOOL_ID, status="completed", output=accepted),
        PLAN,
    ]


def test_a_refused_todo_write_publishes_no_plan() -> None:
    items = feed_all([todo_write(TODOS), tool_result("InputValidationError", is_error=True)])
    assert not any(isinstance(item, PlanUpdated) for item in items)


def test_a_todo_write_that_does_not_fit_the_schema_publishes_no_plan() -> None:
    bad: JsonValue = [{"content": "x", "status": "blocked", "activeForm": "x"}]
    items = feed_all([todo_write(bad), tool_result("ok")])
    assert [type(item).__name__ for item in items] == ["ToolStarted", "ToolCompleted"]


def test_a_subagents_todo_write_is_not_the_turns_plan() -> None:
    items = feed_all([todo_write(TODOS, parent_tool_use_id="toolu_task"), tool_result("ok")])
    assert not any(isinstance(item, PlanUpdated) for item in items)


def test_an_emptied_todo_list_is_published_as_an_empty_plan() -> None:
    items = feed_all([todo_write([]), tool_result("ok")])
    assert items[-1] == PlanUpdated(entries=[])


def test_a_recorded_todo_write_turn_publishes_its_plan_once_after_the_tool() -> None:
    # Claude Code 2.1.330 against the stub, CLAUDE_CODE_ENABLE_TASKS=0 and
    # CLAUDE_CODE_ENABLE_TODO_TOOLS=1 (tests/fixtures/claude/todo_write.jsonl).
    text = (FIXTURES.parent / "todo_write.jsonl").read_text(encoding="utf-8")
    lines = [line.encode() for line in text.splitlines() if not line.startswith(">>> ")]
    items = feed_all(lines)
    plans = [i for i, item in enumerate(items) if isinstance(item, PlanUpdated)]
    assert [items[i] for i in plans] == [PLAN]
    [completed] = [i for i, item in enumerate(items) if isinstance(item, ToolCompleted)]
    assert plans == [completed + 1]
    tool = items[completed]
    assert isinstance(tool, ToolCompleted)
    assert tool.status == "completed"
    assert isinstance(items[-1], TurnEnded)
    assert items[-1].outcome.status == "completed"
