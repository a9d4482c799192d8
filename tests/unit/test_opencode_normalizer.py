"""OpenCode's event stream becomes normalized items; driven by recorded real server output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.events import (
    MessageCompleted,
    MessageDelta,
    ReasoningCompleted,
    ReasoningDelta,
    RetryScheduled,
    ToolCompleted,
    ToolStarted,
    TurnError,
    Usage,
    UsageReported,
)
from app.providers.base import ApprovalRequest, TurnOutcome
from app.providers.items import ApprovalAsked, ApprovalWithdrawn, TurnEnded, UsageSoFar
from app.providers.opencode.normalizer import OpenCodeItem, TurnNormalizer
from app.providers.opencode.sse import ServerEvent, parse_event
from app.providers.output import MAX_TOOL_OUTPUT_BYTES

REFERENCE = Path(__file__).parent.parent / "fixtures" / "opencode" / "reference"
NOW = 1795310840.0  # epoch seconds, between the captures' retry notices


def events(name: str) -> list[ServerEvent]:
    """The capture's events in order (lines that do not parse are skipped, as live)."""
    lines = (REFERENCE / f"{name}.txt").read_text().splitlines()
    parsed = [parse_event(line[4:]) for line in lines if line.startswith("SSE ")]
    return [event for event in parsed if event is not None]


def thread_events(name: str, index: int = 0) -> list[ServerEvent]:
    """The events of the capture's ``index``-th created thread."""
    captured = events(name)
    threads = [e.session_id for e in captured if e.type == "session.created"]
    return [e for e in captured if e.session_id == threads[index]]


def turns(stream: list[ServerEvent]) -> list[list[OpenCodeItem]]:
    """Feed a thread's events to one normalizer per turn, a new one as each turn ends."""
    result: list[list[OpenCodeItem]] = [[]]
    normalizer = TurnNormalizer(clock=lambda: NOW)
    for event in stream:
        result[-1] += normalizer.feed(event)
        if normalizer.ended:
            normalizer = TurnNormalizer(clock=lambda: NOW)
            result.append([])
    return [items for items in result if items]


def outcome_of(items: list[OpenCodeItem]) -> TurnOutcome:
    ended = items[-1]
    assert isinstance(ended, TurnEnded), items
    return ended.outcome


def of(items: list[OpenCodeItem], kind: type[Any]) -> list[Any]:
    return [item for item in items if isinstance(item, kind)]


def event(kind: str, **properties: Any) -> ServerEvent:
    return ServerEvent(
        type=kind, properties={"sessionID": "ses_x", **properties}, session_id="ses_x"
    )


BUSY = event("session.status", status={"type": "busy"})
IDLE = event("session.idle")


def text_part(part_id: str, text: str, *, end: bool, kind: str = "text") -> ServerEvent:
    time = {"start": 1, "end": 2} if end else {"start": 1}
    part = {"id": part_id, "messageID": "msg_a", "type": kind, "text": text, "time": time}
    return event("message.part.updated", part=part)


def delta(part_id: str, text: str) -> ServerEvent:
    return event("message.part.delta", messageID="msg_a", partID=part_id, field="text", delta=text)


def tool(call_id: str, **state: Any) -> ServerEvent:
    part = {"id": "prt_t", "messageID": "msg_a", "type": "tool", "tool": "bash", "callID": call_id}
    return event("message.part.updated", part={**part, "state": state})


# --- recorded turns --------------------------------------------------------------------------


def test_a_text_turn_streams_deltas_then_the_message_usage_and_the_end() -> None:
    (items,) = turns(thread_events("global-event_text"))
    part = "prt_20122f17f001ojBt7c4X9CBkSe"
    usage = Usage(input_tokens=12, output_tokens=7, cost_usd=0.0)
    assert items == [
        MessageDelta(message_id=part, text="Hello"),
        MessageDelta(message_id=part, text=" from"),
        MessageDelta(message_id=part, text=" stub."),
        MessageCompleted(message_id=part, text="Hello from stub."),
        UsageSoFar(usage=usage),  # its one model call's step ended
        UsageReported(usage=usage),
        TurnEnded(
            outcome=TurnOutcome(
                status="completed", final_text="Hello from stub.", usage=usage, stop_reason="stop"
            )
        ),
    ]


def test_an_allowed_permission_runs_the_tool_and_the_final_text_is_the_last_message() -> None:
    (items,) = turns(thread_events("global-event_permission-allow"))
    (started,) = of(items, ToolStarted)
    assert started == ToolStarted(
        tool_id="call_stub_1", name="bash", kind="command", input={"command": "touch x.txt"}
    )
    (asked,) = of(items, ApprovalAsked)
    assert asked.request == ApprovalRequest(
        request_id="per_201234ad9001f9ChBgaf0BHwBZ",
        tool="bash",
        input={"command": "touch x.txt", "patterns": ["touch x.txt"]},
        options=("allow", "deny", "allow_session"),
        title="bash: touch x.txt",
        tool_id="call_stub_1",
    )
    assert of(items, ApprovalWithdrawn) == [ApprovalWithdrawn(request_id=asked.request.request_id)]
    assert of(items, ToolCompleted) == [
        ToolCompleted(tool_id="call_stub_1", status="completed", output="(no output)", exit_code=0)
    ]
    assert [c.text for c in of(items, MessageCompleted)] == [
        "I will run a command.",
        "Tool said: (no output)",
    ]
    outcome = outcome_of(items)
    assert (outcome.status, outcome.final_text) == ("completed", "Tool said: (no output)")
    assert outcome.usage == Usage(input_tokens=24, output_tokens=14, cost_usd=0.0)  # two steps


@pytest.mark.parametrize(
    ("capture", "call_id", "feedback"),
    [
        ("global-event_permission-reject", "call_stub_1", "not here"),
        ("serve-sse_permission-reject", "toolu_01MOCK", "denied by gateway"),
    ],
)
def test_a_rejected_permission_reports_the_tool_as_denied(
    capture: str, call_id: str, feedback: str
) -> None:
    (items,) = turns(thread_events(capture))
    (completed,) = of(items, ToolCompleted)
    assert (completed.tool_id, completed.status) == (call_id, "denied")
    assert completed.output.endswith(f"with the following feedback: {feedback}")
    assert outcome_of(items).status == "completed"  # the model goes on after a denial


def test_the_older_per_directory_stream_gives_the_same_items_and_sums_the_cost() -> None:
    (items,) = turns(thread_events("serve-sse_permission-allow"))
    (started,) = of(items, ToolStarted)
    assert started.name == "bash"  # the `pending` snapshot said "Bash" and had no input
    assert started.input == {"command": "touch created_by_mock.txt", "description": "create file"}
    outcome = outcome_of(items)
    assert outcome.final_text == "Done: the command printed hi."
    assert outcome.usage == Usage(input_tokens=24, output_tokens=27, cost_usd=0.000477)


def test_an_abort_ends_the_turn_interrupted_and_the_next_turn_ignores_the_stragglers() -> None:
    first, second = turns(thread_events("global-event_abort-then-next-turn"))
    part = "prt_201234c51001vZ5Mmc2H7kzCEa"
    # The abort's idle comes before the part's final update: what streamed is completed.
    assert first[-3] == MessageCompleted(
        message_id=part, text="".join(f"tick {n} " for n in range(1, 22))
    )
    outcome = outcome_of(first)
    assert outcome.status == "interrupted"
    assert outcome.error is not None
    assert outcome.error.kind == "interrupted"
    # The second `session.idle` of the abort and the late updates went to the next turn's
    # normalizer before its `busy`, and were ignored.
    assert outcome_of(second).final_text == "Hello from stub."


def test_a_401_fails_as_auth_without_retries() -> None:
    (items,) = turns(thread_events("global-event_error-401"))
    assert of(items, RetryScheduled) == []
    error = outcome_of(items).error
    assert error is not None
    assert (error.kind, error.retryable, error.provider) == ("auth", False, "opencode")
    assert error.message.startswith("Unauthorized")


def test_retries_are_reported_then_the_final_500_is_a_retryable_server_error() -> None:
    (items,) = turns(thread_events("global-event_error-500-retries"))
    retries = of(items, RetryScheduled)
    assert [r.attempt for r in retries] == [1, 2, 3, 4, 5]
    assert {(r.source, r.kind, r.max_attempts) for r in retries} == {("cli", "server_error", None)}
    assert retries[0].delay_s == pytest.approx(1795315480.576 - NOW)  # `next` is epoch ms
    error = outcome_of(items).error
    assert error is not None
    assert (error.kind, error.retryable) == ("server_error", True)


def test_a_retry_notice_delay_comes_from_its_next_timestamp() -> None:
    items = turns(thread_events("serve-sse_retry-then-abort"))[0]
    retries = of(items, RetryScheduled)
    assert [(r.attempt, r.kind, r.delay_s) for r in retries] == [
        (1, "overloaded", 2.322),
        (2, "overloaded", 6.969),
        (3, "overloaded", 16.003),
        (4, "overloaded", 32.75),
    ]
    assert retries[0].message == "Provider is overloaded"


def test_an_unknown_model_fails_as_invalid_request_with_the_first_error_message() -> None:
    (items,) = turns(thread_events("global-event_unknown-session-and-model", index=2))
    error = outcome_of(items).error
    assert error is not None
    assert (error.kind, error.retryable) == ("invalid_request", False)
    assert error.message == "Model not found: nope/zzz. Did you mean: standardcompute?"


def test_a_remembered_permission_does_not_ask_again() -> None:
    first, second = turns(thread_events("global-event_permission-always"))
    assert len(of(first, ApprovalAsked)) == 1
    assert of(second, ApprovalAsked) == []
    assert [c.status for c in of(second, ToolCompleted)] == ["completed"]


# --- edges, hand-written -----------------------------------------------------------------------


def test_nothing_counts_before_busy_and_nothing_after_the_end() -> None:
    normalizer = TurnNormalizer()
    assert normalizer.feed(IDLE) == []
    assert normalizer.feed(delta("prt_1", "stale")) == []
    assert not normalizer.ended
    assert normalizer.feed(BUSY) == []
    assert normalizer.armed
    ended = normalizer.feed(IDLE)
    assert ended == [TurnEnded(outcome=TurnOutcome(status="completed"))]
    assert normalizer.feed(delta("prt_1", "late")) == []
    assert normalizer.feed(IDLE) == []


def test_reasoning_parts_stream_as_reasoning() -> None:
    normalizer = TurnNormalizer()
    normalizer.feed(BUSY)
    items = [
        *normalizer.feed(text_part("prt_r", "", end=False, kind="reasoning")),
        *normalizer.feed(delta("prt_r", "think")),
        *normalizer.feed(text_part("prt_r", "think", end=True, kind="reasoning")),
        *normalizer.feed(text_part("prt_t", "answer", end=True)),
        *normalizer.feed(IDLE),
    ]
    assert items[:3] == [
        ReasoningDelta(message_id="prt_r", text="think"),
        ReasoningCompleted(message_id="prt_r", text="think"),
        MessageCompleted(message_id="prt_t", text="answer"),
    ]
    assert outcome_of(items).final_text == "answer"


def test_user_and_synthetic_parts_are_not_agent_output() -> None:
    normalizer = TurnNormalizer()
    user = {"id": "msg_u", "role": "user", "sessionID": "ses_x"}
    assert normalizer.feed(event("message.updated", info=user)) == []  # before busy, as live
    normalizer.feed(BUSY)
    user_part: dict[str, Any] = {"id": "prt_u", "messageID": "msg_u", "type": "text", "text": "hi"}
    assert normalizer.feed(event("message.part.updated", part=user_part)) == []
    user_delta = {"messageID": "msg_u", "partID": "prt_u", "field": "text", "delta": "hi"}
    assert normalizer.feed(event("message.part.delta", **user_delta)) == []
    synthetic = {**user_part, "id": "prt_s", "messageID": "msg_a", "synthetic": True}
    synthetic["time"] = {"start": 1, "end": 2}
    assert normalizer.feed(event("message.part.updated", part=synthetic)) == []


def test_a_tool_is_announced_once_with_its_input_and_its_output_is_capped() -> None:
    normalizer = TurnNormalizer()
    normalizer.feed(BUSY)
    huge = "x" * (MAX_TOOL_OUTPUT_BYTES * 2)
    items = [
        *normalizer.feed(tool("call_1", status="pending", input={}, raw="")),
        *normalizer.feed(tool("call_1", status="running", input={"command": "yes"})),
        *normalizer.feed(tool("call_1", status="running", input={"command": "yes"})),
        *normalizer.feed(
            tool("call_1", status="completed", input={"command": "yes"}, output=huge, metadata={})
        ),
        *normalizer.feed(tool("call_1", status="completed", input={}, output="again")),
    ]
    started, completed = items
    assert started == ToolStarted(
        tool_id="call_1", name="bash", kind="command", input={"command": "yes"}
    )
    assert isinstance(completed, ToolCompleted)
    assert completed.status == "completed"
    assert completed.exit_code is None
    assert completed.output is not None
    assert len(completed.output.encode()) <= MAX_TOOL_OUTPUT_BYTES
    assert "output truncated" in completed.output


def test_a_tool_error_is_failed_unless_a_permission_refused_it() -> None:
    normalizer = TurnNormalizer()
    normalizer.feed(BUSY)
    failed = normalizer.feed(tool("call_1", status="error", input={"a": 1}, error="boom"))
    assert failed[-1] == ToolCompleted(tool_id="call_1", status="failed", output="boom")
    ruled = "The user has specified a rule which prevents you from using this specific tool call."
    denied = normalizer.feed(tool("call_2", status="error", input={}, error=ruled))
    assert [type(i).__name__ for i in denied] == ["ToolStarted", "ToolCompleted"]
    assert isinstance(denied[-1], ToolCompleted)
    assert denied[-1].status == "denied"


def test_each_step_that_ends_reports_what_the_turn_used_so_far() -> None:
    (items,) = turns(thread_events("global-event_permission-allow"))
    so_far = [item.usage for item in items if isinstance(item, UsageSoFar)]
    one_call = Usage(input_tokens=12, output_tokens=7, cost_usd=0.0)
    (reported,) = of(items, UsageReported)
    assert so_far == [one_call, one_call + one_call]  # the tool call's step, then the answer's
    assert so_far[-1] == reported.usage
    assert items.index(next(i for i in items if isinstance(i, UsageSoFar))) > items.index(
        next(i for i in items if isinstance(i, ToolCompleted))
    )


def test_usage_falls_back_to_step_finish_parts_and_counts_reasoning_as_output() -> None:
    normalizer = TurnNormalizer()
    normalizer.feed(BUSY)
    tokens = {"input": 10.0, "output": 5, "reasoning": 3, "cache": {"read": 4, "write": 2}}
    step = {"id": "prt_f", "messageID": "msg_a", "type": "step-finish", "tokens": tokens}
    normalizer.feed(event("message.part.updated", part={**step, "cost": 0.5, "reason": "stop"}))
    items = normalizer.feed(IDLE)
    usage = Usage(
        input_tokens=10,
        output_tokens=8,
        cached_input_tokens=4,
        cache_creation_input_tokens=2,
        cost_usd=0.5,
    )
    assert items[0] == UsageReported(usage=usage)


def test_an_assistant_message_error_fails_the_turn_when_no_session_error_came() -> None:
    normalizer = TurnNormalizer()
    normalizer.feed(BUSY)
    error = {"name": "ProviderAuthError", "data": {"providerID": "x", "message": "no key"}}
    info = {"id": "msg_a", "role": "assistant", "error": error, "tokens": {}}
    normalizer.feed(event("message.updated", info=info))
    outcome = outcome_of(normalizer.feed(IDLE))
    assert outcome.error == TurnError(kind="auth", message="no key", provider="opencode")


def test_malformed_events_cost_nothing() -> None:
    normalizer = TurnNormalizer()
    normalizer.feed(BUSY)
    malformed: list[tuple[str, dict[str, Any]]] = [
        ("message.part.updated", {"part": "x"}),
        ("message.part.updated", {"part": {"type": "tool", "callID": 3, "state": []}}),
        ("message.part.delta", {"partID": "prt", "field": "text", "delta": 7}),
        ("message.updated", {"info": {"id": "msg", "role": "assistant", "tokens": "many"}}),
        ("permission.asked", {"id": "per_1"}),
        ("permission.replied", {}),
        ("session.status", {"status": {"type": "retry", "attempt": "one", "next": "soon"}}),
        ("session.error", {"error": "bad"}),
        ("something.new", {}),
    ]
    for kind, props in malformed:
        normalizer.feed(event(kind, **props))
    outcome = outcome_of(normalizer.feed(IDLE))
    assert outcome.status == "completed"


def test_finish_ends_a_turn_from_the_threads_last_message() -> None:
    normalizer = TurnNormalizer()
    normalizer.feed(BUSY)
    normalizer.feed(delta("prt_1", "Hel"))
    last = {
        "info": {"id": "msg_a", "role": "assistant", "finish": "stop", "tokens": {"input": 1}},
        "parts": [{"id": "prt_1", "messageID": "msg_a", "type": "text", "text": "Hello"}],
    }
    items = normalizer.finish(last)
    assert items[0] == MessageCompleted(message_id="prt_1", text="Hello")
    outcome = outcome_of(items)
    assert (outcome.status, outcome.final_text, outcome.stop_reason) == (
        "completed",
        "Hello",
        "stop",
    )
    assert normalizer.finish(last) == []
