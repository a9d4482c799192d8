"""Codex app-server notifications become normalized items; driven by recorded real output."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.events import (
    MessageCompleted,
    MessageDelta,
    PlanEntry,
    PlanUpdated,
    ReasoningCompleted,
    ReasoningDelta,
    RetryScheduled,
    ToolCompleted,
    ToolOutput,
    ToolStarted,
    Usage,
    UsageReported,
    Warning,
)
from app.providers.codex.normalizer import CodexItem, TurnNormalizer
from app.providers.codex.protocol import Notification, Response, ServerRequest, parse_line
from app.providers.items import ApprovalWithdrawn, TurnEnded, UsageSoFar
from app.providers.output import MAX_TOOL_OUTPUT_BYTES

REFERENCE = Path(__file__).parent.parent / "fixtures" / "codex" / "reference"
CAPTURES = sorted(path.stem.removeprefix("app-server_") for path in REFERENCE.glob("*.txt"))


@dataclass
class Capture:
    """What the real app-server printed in one recorded session (``<<<`` lines)."""

    thread_id: str
    turn_id: str
    notifications: list[Notification]
    requests: list[ServerRequest]


def read_capture(name: str) -> Capture:
    messages = [
        parse_line(line.removeprefix("<<< ").encode())
        for line in (REFERENCE / f"app-server_{name}.txt").read_text().splitlines()
        if line.startswith("<<< ")
    ]
    responses = [m for m in messages if isinstance(m, Response)]
    thread_id = next(
        r.result["thread"]["id"] for r in responses if r.result and "thread" in r.result
    )
    turn_id = next(r.result["turn"]["id"] for r in responses if r.result and "turn" in r.result)
    return Capture(
        thread_id=thread_id,
        turn_id=turn_id,
        notifications=[m for m in messages if isinstance(m, Notification)],
        requests=[m for m in messages if isinstance(m, ServerRequest)],
    )


def normalize(capture: Capture) -> list[CodexItem]:
    normalizer = TurnNormalizer(capture.turn_id)
    items: list[CodexItem] = []
    for note in capture.notifications:
        if note.thread_id == capture.thread_id:  # what the client routes to the session
            items += normalizer.feed(note)
    return items


def note(method: str, **params: Any) -> Notification:
    return Notification(method=method, params={"threadId": "T", "turnId": "U", **params})


def completed(status: str = "completed", **turn: Any) -> Notification:
    return Notification(
        method="turn/completed",
        params={"threadId": "T", "turn": {"id": "U", "status": status, **turn}},
    )


def feed(*notes: Notification) -> list[CodexItem]:
    normalizer = TurnNormalizer("U")
    return [item for n in notes for item in normalizer.feed(n)]


def outcome(items: list[CodexItem]) -> TurnEnded:
    assert isinstance(items[-1], TurnEnded)
    return items[-1]


MODEL_WARNING = (
    "Model metadata for `mock-model` not found. Defaulting to fallback metadata; this can "
    "degrade performance and cause issues."
)
TWO_REQUESTS = Usage(input_tokens=200, output_tokens=24, cached_input_tokens=40)


@pytest.mark.parametrize("name", CAPTURES)
def test_every_capture_ends_the_turn_exactly_once(name: str) -> None:
    items = normalize(read_capture(name))
    assert sum(isinstance(item, TurnEnded) for item in items) == 1
    assert isinstance(items[-1], TurnEnded)


def test_accepted_command_streams_the_tool_then_the_answer() -> None:
    items = normalize(read_capture("accept"))
    tool_input = {
        "command": "/bin/bash -lc 'touch created_by_codex_mock.txt'",
        "cwd": "/srv/project",
    }
    assert items == [
        Warning(message=MODEL_WARNING, code="codex_warning"),
        ToolStarted(tool_id="call_mock_1", name="command", kind="command", input=tool_input),
        ApprovalWithdrawn(request_id="0"),
        ToolCompleted(tool_id="call_mock_1", status="completed", exit_code=0),
        # Each model request reports what the turn used so far, the first before the answer.
        UsageSoFar(usage=Usage(input_tokens=100, output_tokens=12, cached_input_tokens=20)),
        MessageDelta(message_id="msg_2", text="Hello"),
        MessageDelta(message_id="msg_2", text=" from"),
        MessageDelta(message_id="msg_2", text=" mock."),
        MessageCompleted(message_id="msg_2", text="Hello from mock."),
        UsageSoFar(usage=TWO_REQUESTS),
        UsageReported(usage=TWO_REQUESTS),
        items[-1],
    ]
    ended = outcome(items).outcome
    assert ended.status == "completed"
    assert ended.final_text == "Hello from mock."
    assert ended.usage == TWO_REQUESTS


def test_declined_command_completes_as_denied_and_the_turn_goes_on() -> None:
    items = normalize(read_capture("decline"))
    tool_done = [item for item in items if isinstance(item, ToolCompleted)]
    assert tool_done == [ToolCompleted(tool_id="call_mock_1", status="denied")]
    assert outcome(items).outcome.status == "completed"


def test_interrupted_turn_ends_interrupted() -> None:
    ended = outcome(normalize(read_capture("interrupt"))).outcome
    assert ended.status == "interrupted"
    assert ended.error is not None
    assert ended.error.kind == "interrupted"


def test_http_500_retries_are_reported_then_the_turn_fails_retryable() -> None:
    items = normalize(read_capture("500"))
    retries = [item for item in items if isinstance(item, RetryScheduled)]
    assert [(r.source, r.attempt, r.max_attempts, r.kind) for r in retries] == [
        ("cli", 1, 2, "server_error"),
        ("cli", 2, 2, "server_error"),
    ]
    assert retries[0].message is not None
    assert "high demand" in retries[0].message
    error = outcome(items).outcome.error
    assert error is not None
    assert (error.kind, error.retryable, error.provider) == ("server_error", True, "codex")
    assert error.message.startswith("We\u2019re currently experiencing high demand")


def test_stream_cut_repeats_item_started_but_shows_nothing_twice() -> None:
    items = normalize(read_capture("disc"))
    assert [type(item) for item in items] == [Warning, RetryScheduled, RetryScheduled, TurnEnded]
    assert {item.kind for item in items if isinstance(item, RetryScheduled)} == {"network"}
    error = outcome(items).outcome.error
    assert error is not None
    assert (error.kind, error.retryable) == ("network", True)


def test_a_tool_announced_again_after_a_retry_starts_once() -> None:
    item = {"type": "commandExecution", "id": "c1", "command": "ls", "cwd": "/w"}
    items = feed(note("item/started", item=item), note("item/started", item=item))
    assert items == [
        ToolStarted(
            tool_id="c1", name="command", kind="command", input={"command": "ls", "cwd": "/w"}
        )
    ]


def test_command_output_streams_and_its_aggregate_is_capped() -> None:
    item = {"type": "commandExecution", "id": "c1", "command": "yes", "cwd": "/w"}
    huge = "y\n" * MAX_TOOL_OUTPUT_BYTES
    done = {**item, "status": "failed", "exitCode": 1, "aggregatedOutput": huge}
    items = feed(
        note("item/started", item=item),
        note("item/commandExecution/outputDelta", itemId="c1", delta="y\n"),
        note("item/completed", item=done),
        note("item/completed", item=done),
    )
    assert items[1] == ToolOutput(tool_id="c1", text="y\n")
    assert len(items) == 3
    final = items[2]
    assert isinstance(final, ToolCompleted)
    assert (final.status, final.exit_code) == ("failed", 1)
    assert final.output is not None
    assert len(final.output.encode()) <= MAX_TOOL_OUTPUT_BYTES
    assert "output truncated" in final.output


def test_a_file_change_completed_without_a_start_is_announced_first() -> None:
    change = {"path": "/w/a.txt", "kind": {"type": "add"}, "diff": "+x\n"}
    item = {"type": "fileChange", "id": "p1", "changes": [change], "status": "completed"}
    assert feed(note("item/completed", item=item)) == [
        ToolStarted(
            tool_id="p1", name="file_change", kind="file_change", input={"changes": [change]}
        ),
        ToolCompleted(tool_id="p1", status="completed"),
    ]


def test_file_changes_are_kept_for_their_approval() -> None:
    change = {"path": "/w/a.txt", "kind": {"type": "update"}, "diff": "-a\n+b\n"}
    normalizer = TurnNormalizer("U")
    item = {"type": "fileChange", "id": "p1", "changes": [change], "status": "inProgress"}
    normalizer.feed(note("item/started", item=item))
    assert normalizer.file_changes == {"p1": [change]}


def test_mcp_calls_and_web_searches_are_tools() -> None:
    call = {
        "type": "mcpToolCall",
        "id": "m1",
        "server": "docs",
        "tool": "find",
        "arguments": {"q": 1},
    }
    search = {"type": "webSearch", "id": "w1", "query": "codex app-server"}
    items = feed(
        note("item/started", item={**call, "status": "inProgress"}),
        note(
            "item/completed",
            item={
                **call,
                "status": "completed",
                "result": {"content": [{"type": "text", "text": "hit"}]},
            },
        ),
        note("item/started", item={"type": "mcpToolCall", "id": "m2", "server": "s", "tool": "t"}),
        note(
            "item/completed", item={"type": "mcpToolCall", "id": "m2", "error": {"message": "nope"}}
        ),
        note("item/started", item=search),
        note("item/completed", item=search),
    )
    assert items == [
        ToolStarted(
            tool_id="m1",
            name="docs.find",
            kind="mcp",
            input={"server": "docs", "tool": "find", "arguments": {"q": 1}},
        ),
        ToolCompleted(tool_id="m1", status="completed", output="hit"),
        ToolStarted(
            tool_id="m2",
            name="s.t",
            kind="mcp",
            input={"server": "s", "tool": "t", "arguments": None},
        ),
        ToolCompleted(tool_id="m2", status="failed", output="nope"),
        ToolStarted(
            tool_id="w1", name="web_search", kind="web_search", input={"query": "codex app-server"}
        ),
        ToolCompleted(tool_id="w1", status="completed"),
    ]


def test_reasoning_streams_then_completes_with_its_summary() -> None:
    items = feed(
        note("item/started", item={"type": "reasoning", "id": "r1"}),
        note("item/reasoning/summaryTextDelta", itemId="r1", delta="Think", summaryIndex=0),
        note("item/reasoning/textDelta", itemId="r1", delta="ing", contentIndex=0),
        note("item/completed", item={"type": "reasoning", "id": "r1", "summary": ["A", "B"]}),
        note(
            "item/completed", item={"type": "reasoning", "id": "r2", "summary": [], "content": []}
        ),
    )
    assert items == [
        ReasoningDelta(message_id="r1", text="Think"),
        ReasoningDelta(message_id="r1", text="ing"),
        ReasoningCompleted(message_id="r1", text="A\n\nB"),
    ]


def test_usage_sums_the_turn_and_ignores_what_resume_replays() -> None:
    def update(turn_id: str, last: int, total: int) -> Notification:
        def counts(n: int) -> dict[str, int]:
            return {
                "inputTokens": n,
                "cachedInputTokens": 1,
                "cacheWriteInputTokens": 2,
                "outputTokens": 3,
            }

        usage = {"last": counts(last), "total": counts(total)}
        return Notification(
            method="thread/tokenUsage/updated",
            params={"threadId": "T", "turnId": turn_id, "tokenUsage": usage},
        )

    items = feed(
        update("old", 100, 900), update("U", 100, 1000), update("U", 50, 1050), completed()
    )
    expected = Usage(
        input_tokens=150, output_tokens=6, cached_input_tokens=2, cache_creation_input_tokens=4
    )
    first = Usage(
        input_tokens=100, output_tokens=3, cached_input_tokens=1, cache_creation_input_tokens=2
    )
    assert items[:3] == [
        UsageSoFar(usage=first),
        UsageSoFar(usage=expected),
        UsageReported(usage=expected),
    ]
    assert outcome(items).outcome.usage == expected


def test_final_text_is_the_last_agent_message() -> None:
    items = feed(
        note("item/completed", item={"type": "agentMessage", "id": "a", "text": "first"}),
        note("item/completed", item={"type": "agentMessage", "id": "b", "text": "last"}),
        completed(),
    )
    assert outcome(items).outcome.final_text == "last"


def test_notifications_of_another_turn_are_dropped() -> None:
    normalizer = TurnNormalizer("U")
    stale = Notification(
        method="item/agentMessage/delta",
        params={"threadId": "T", "turnId": "old", "itemId": "m", "delta": "x"},
    )
    old_end = Notification(
        method="turn/completed", params={"turn": {"id": "old", "status": "completed"}}
    )
    assert normalizer.feed(stale) == []
    assert normalizer.feed(old_end) == []


def test_a_failed_turn_without_its_own_error_uses_the_final_error_notice() -> None:
    error = {"message": "quota", "codexErrorInfo": "usageLimitExceeded"}
    items = feed(note("error", willRetry=False, error=error), completed("failed"))
    turn_error = outcome(items).outcome.error
    assert turn_error is not None
    assert (turn_error.kind, turn_error.retryable, turn_error.message) == (
        "usage_limit",
        False,
        "quota",
    )


def test_an_interrupt_closes_what_the_turn_left_open() -> None:
    tool = {"type": "commandExecution", "id": "c1", "command": "sleep 9", "cwd": "/w"}
    items = feed(
        note("item/started", item=tool),
        note("item/agentMessage/delta", itemId="m1", delta="half"),
        note("item/reasoning/textDelta", itemId="r1", delta="hmm", contentIndex=0),
        completed("interrupted"),
    )
    assert items[3:6] == [
        MessageCompleted(message_id="m1", text="half"),
        ReasoningCompleted(message_id="r1", text="hmm"),
        ToolCompleted(tool_id="c1", status="failed"),
    ]
    assert outcome(items).outcome.status == "interrupted"


def test_warnings_requests_resolved_and_unknown_notices() -> None:
    assert feed(
        Notification(method="warning", params={"threadId": "T", "message": "model unknown"}),
        Notification(method="serverRequest/resolved", params={"threadId": "T", "requestId": 7}),
        note("turn/diff/updated", diff=""),
        note("some/new/notification"),
    ) == [
        Warning(message="model unknown", code="codex_warning"),
        ApprovalWithdrawn(request_id="7"),
    ]


@pytest.mark.parametrize(
    "bad",
    [
        note("item/agentMessage/delta", delta="no item id"),
        note("item/started", item="not an object"),
        note("serverRequest/resolved"),
        Notification(
            method="item/completed", params={"turnId": "U", "item": {"type": "agentMessage"}}
        ),
    ],
)
def test_malformed_notifications_are_dropped(bad: Notification) -> None:
    assert feed(bad) == []


def test_the_parsed_capture_keeps_the_server_request_ids() -> None:
    capture = read_capture("accept")
    assert [(r.id, r.method) for r in capture.requests] == [
        (0, "item/commandExecution/requestApproval")
    ]
    assert json.dumps(capture.requests[0].params["availableDecisions"][0]) == '"accept"'


STUB_CAPTURES = REFERENCE.parent  # recorded against tests/stub_llm/ (see its README.md)


def turns_of(name: str) -> dict[str, TurnEnded]:
    """How each turn of a stub capture ends, each normalized the way the session does it."""
    lines = (STUB_CAPTURES / f"app-server_{name}.jsonl").read_text().splitlines()
    messages = [
        parse_line(line.encode()) for line in lines if not line.startswith((">>> ", "### "))
    ]
    ends: dict[str, TurnEnded] = {}
    normalizer: TurnNormalizer | None = None
    for message in messages:
        if isinstance(message, Response) and message.result and "turn" in message.result:
            normalizer = TurnNormalizer(message.result["turn"]["id"])
        elif isinstance(message, Notification) and normalizer is not None:
            ended = [item for item in normalizer.feed(message) if isinstance(item, TurnEnded)]
            if ended:
                ends[normalizer.turn_id] = ended[0]
                normalizer = None
    return ends


def test_each_turn_counts_only_its_own_model_requests() -> None:
    # The stub answers every request with 12 input and 7 output tokens.
    first, second = turns_of("two-turns").values()
    one_request = Usage(input_tokens=12, output_tokens=7)
    assert first.outcome.usage == second.outcome.usage == one_request


def test_usage_codex_replays_after_a_resume_is_not_counted_again() -> None:
    before, after = turns_of("resume-after-restart").values()
    assert before.outcome.usage == after.outcome.usage == Usage(input_tokens=12, output_tokens=7)
    assert after.outcome.final_text.startswith("Echo: ")


def test_a_tool_turn_counts_both_requests() -> None:
    (accepted,) = turns_of("approval-accept").values()
    assert accepted.outcome.usage == Usage(input_tokens=24, output_tokens=14)
    assert accepted.outcome.final_text.startswith("Tool said:")


def test_a_bio_policy_refusal_is_final_and_never_handed_to_another_agent() -> None:
    # Codex 0.171.0 refusing a request as a possible biological risk: a failure of the
    # request itself, like `cyberPolicy`, so a failover session does not pass it on.
    (refused,) = turns_of("bio-policy").values()
    error = refused.outcome.error
    assert refused.outcome.status == "failed"
    assert error is not None
    assert (error.kind, error.retryable) == ("agent_error", False)
    assert error.message == "This content was flagged for possible biological risk."


def test_a_plan_update_becomes_the_whole_plan_with_our_status_names() -> None:
    plan = [
        {"step": "Read the code", "status": "completed"},
        {"step": "Fix the bug", "status": "inProgress"},
        {"step": "Run the tests", "status": "pending"},
    ]
    items = feed(note("turn/plan/updated", explanation="why", plan=plan))
    assert items == [
        PlanUpdated(
            entries=[
                PlanEntry(text="Read the code", status="completed"),
                PlanEntry(text="Fix the bug", status="in_progress"),
                PlanEntry(text="Run the tests", status="pending"),
            ]
        )
    ]


def test_an_emptied_plan_is_published_and_another_turns_plan_is_not() -> None:
    assert feed(note("turn/plan/updated", plan=[])) == [PlanUpdated(entries=[])]
    other_turn = Notification(
        method="turn/plan/updated",
        params={"threadId": "T", "turnId": "OTHER", "plan": [{"step": "x", "status": "pending"}]},
    )
    assert feed(other_turn) == []


def test_a_plan_step_with_an_unknown_status_drops_the_update_not_the_turn() -> None:
    bad = note("turn/plan/updated", plan=[{"step": "x", "status": "blocked"}])
    items = feed(bad, completed())
    assert not any(isinstance(item, PlanUpdated) for item in items)
    assert outcome(items).outcome.status == "completed"


def test_a_recorded_update_plan_call_publishes_the_plan_and_no_tool() -> None:
    lines = (STUB_CAPTURES / "app-server_plan.jsonl").read_text().splitlines()
    messages = [parse_line(line.encode()) for line in lines if not line.startswith(">>> ")]
    turn_id = next(
        m.result["turn"]["id"]
        for m in messages
        if isinstance(m, Response) and m.result and "turn" in m.result
    )
    normalizer = TurnNormalizer(turn_id)
    items = [i for m in messages if isinstance(m, Notification) for i in normalizer.feed(m)]
    assert [i for i in items if isinstance(i, PlanUpdated)] == [
        PlanUpdated(
            entries=[
                PlanEntry(text="Read the code", status="completed"),
                PlanEntry(text="Fix the bug", status="in_progress"),
                PlanEntry(text="Run the tests", status="pending"),
            ]
        )
    ]
    assert not any(isinstance(i, ToolStarted) for i in items)  # update_plan is not an item
    assert outcome(items).outcome.final_text.startswith("Tool said: Plan updated")
