"""The failover hand-off (pure): what the new agent is told, and how it is bounded; and the
rules of who fails over."""

from __future__ import annotations

from typing import Any

import pytest

from app.events import TurnError
from app.runtime.coordinator import RetryPolicy
from app.runtime.failover import may_fail_over, wants_failover
from app.runtime.handoff import SUMMARY_CHARS, build_handoff
from app.runtime.requests import SessionRequest
from app.settings import SelectionSettings, Settings


def event(type_: str, turn: str | None, **data: Any) -> dict[str, Any]:
    return {"type": type_, "turn_id": turn, "data": data}


def turn(turn_id: str, prompt: str, answer: str, *tools: tuple[str, str, str]) -> list[Any]:
    """A finished turn's events; each tool is ``(kind, name, input path or command)``."""
    events = [event("turn.started", turn_id, prompt=prompt)]
    for n, (kind, name, target) in enumerate(tools):
        key = "file_path" if kind == "file_change" else "command"
        tool_id = f"{turn_id}-t{n}"
        events.append(
            event(
                "tool.started", turn_id, tool_id=tool_id, name=name, kind=kind, input={key: target}
            )
        )
        events.append(event("tool.completed", turn_id, tool_id=tool_id, status="completed"))
    events.append(event("message.completed", turn_id, message_id="m", text=answer))
    events.append(event("turn.completed", turn_id, final_text=answer))
    return events


def handoff(events: list[Any], *, max_chars: int = 24_000, prompt: str = "What now?") -> Any:
    return build_handoff(
        events,
        current_turn_id="now",
        prompt=prompt,
        from_provider="claude_code",
        reason="usage_limit: limit reached",
        max_chars=max_chars,
    )


def test_the_conversation_goes_along_in_order_with_tools_files_and_answers() -> None:
    events = [
        event("session.created", None, provider="claude_code"),
        *turn("a", "Fix the parser", "Fixed it.", ("command", "Bash", "pytest -q")),
        *turn("b", "Rename x to y", "Renamed.", ("file_change", "Edit", "src/app.py")),
        event("turn.started", "now", prompt="What now?"),
    ]
    result = handoff(events)
    text = result.prompt
    assert (result.turns, result.chars) == (2, len(text))
    assert "another coding agent (claude_code)" in text
    assert "usage_limit: limit reached" in text
    order = [
        "## Turn 1",
        "User: Fix the parser",
        "Agent ran: Bash pytest -q → completed",
        "Agent: Fixed it.",
        "## Turn 2",
        "Files changed: src/app.py",
        "Agent: Renamed.",
        "## Now",
        "User: What now?",
    ]
    positions = [text.index(part) for part in order]
    assert positions == sorted(positions)


def test_what_the_failed_turn_did_before_the_failure_is_told() -> None:
    events = [
        *turn("a", "First", "One."),
        event("turn.started", "now", prompt="Second"),
        event(
            "tool.started",
            "now",
            tool_id="t",
            name="Write",
            kind="file_change",
            input={"file_path": "notes.md"},
        ),
        event("tool.completed", "now", tool_id="t", status="completed"),
    ]
    text = handoff(events, prompt="Second").prompt
    now = text[text.index("## Now") :]
    assert "ran Write notes.md → completed" in now
    assert "changed notes.md" in now
    assert now.endswith("User: Second")


def test_with_nothing_said_before_the_new_agent_gets_the_prompt_as_it_is() -> None:
    result = handoff([event("turn.started", "now", prompt="Hello")], prompt="Hello")
    assert (result.prompt, result.turns, result.chars) == ("Hello", 0, 5)


def test_the_newest_turns_stay_whole_older_ones_are_cut_and_the_oldest_left_out() -> None:
    long = "word " * 400  # 2,000 characters
    events = [
        *(e for n in range(6) for e in turn(f"t{n}", f"prompt {n} {long}", f"answer {n} {long}")),
        event("turn.started", "now", prompt="What now?"),
    ]
    result = handoff(events, max_chars=7_000)
    text = result.prompt
    assert len(text) <= 7_000
    assert result.chars == len(text)
    assert "## Turn 6\n" in text  # newest: whole
    assert text.count(long.strip()) >= 2
    assert "## Turn 5 (summarized)" in text
    assert "## Turn 1" not in text
    assert f"({6 - result.turns} of 6 earlier turns are left out for length.)" in text
    summarized = text[text.index("## Turn 5 (summarized)") : text.index("## Turn 6")]
    assert max(len(line) for line in summarized.splitlines()) <= len("Agent: ") + SUMMARY_CHARS
    assert text.endswith("User: What now?")


def test_the_failed_turns_prompt_is_always_whole() -> None:
    prompt = "do this " * 100
    events = [*turn("a", "x " * 20, "y " * 20), event("turn.started", "now", prompt=prompt)]
    text = handoff(events, max_chars=1_500, prompt=prompt).prompt
    assert text.endswith(f"User: {prompt}")
    assert len(text) <= 1_500


def test_a_prompt_longer_than_the_bound_goes_alone_and_whole() -> None:
    prompt = "do this " * 500
    events = [*turn("a", "x " * 2000, "y " * 2000), event("turn.started", "now", prompt=prompt)]
    result = handoff(events, max_chars=1_500, prompt=prompt)
    assert (result.prompt, result.turns) == (prompt, 0)


@pytest.mark.parametrize("max_chars", [1_000, 3_000, 7_777, 24_000])
def test_the_whole_hand_off_is_never_longer_than_the_bound(max_chars: int) -> None:
    # Everything that can grow: a long failure message, a failed turn that ran many tools
    # and changed many files, many long earlier turns.
    many = [("file_change", "Edit", f"src/module_{n}.py") for n in range(300)]
    events = [
        *(e for n in range(40) for e in turn(f"t{n}", "p " * 3000, "a " * 3000, *many[:5])),
        *turn("now", "What now?", "partial " * 500, *many),
    ]
    result = build_handoff(
        events[:-2],  # the failed turn did not complete
        current_turn_id="now",
        prompt="What now?",
        from_provider="claude_code",
        reason="server_error: " + "API Error: 500 " * 2_000,
        max_chars=max_chars,
    )
    assert result.chars == len(result.prompt) <= max_chars
    assert result.prompt.endswith("User: What now?")
    assert "more (left out for length)" in result.prompt
    if max_chars >= 3_000:
        assert "## Turn 40" in result.prompt


def test_turns_are_numbered_from_the_sessions_count_when_older_events_were_not_read() -> None:
    events = [*turn("t8", "eighth", "8"), *turn("t9", "ninth", "9")]
    result = build_handoff(
        [*events, event("turn.started", "now", prompt="tenth")],
        current_turn_id="now",
        prompt="tenth",
        from_provider="claude_code",
        reason="auth: no",
        max_chars=24_000,
        earlier=9,
    )
    assert "## Turn 8\nUser: eighth" in result.prompt
    assert "## Turn 9\nUser: ninth" in result.prompt
    assert "(7 of 9 earlier turns are left out for length.)" in result.prompt


def test_every_text_taken_from_the_conversation_is_masked() -> None:
    secret = "sk-test-SECRET-value"
    events = [
        *turn("a", f"use {secret}", f"ok {secret}", ("command", "Bash", f"curl -H {secret}")),
        event("turn.started", "now", prompt=f"again {secret}"),
    ]
    result = build_handoff(
        events,
        current_turn_id="now",
        prompt=f"again {secret}",
        from_provider="claude_code",
        reason=f"server_error: upstream refused key {secret}",
        max_chars=24_000,
        mask=lambda text: text.replace(secret, "[redacted]"),
    )
    assert secret not in result.prompt
    assert result.prompt.count("[redacted]") == 5


def test_failed_and_interrupted_turns_say_so() -> None:
    events = [
        event("turn.started", "a", prompt="Try this"),
        event("turn.failed", "a", error={"kind": "server_error", "message": "boom"}),
        event("turn.started", "b", prompt="And that"),
        event("turn.interrupted", "b", reason="stop"),
        event("turn.started", "now", prompt="Now?"),
    ]
    text = handoff(events, prompt="Now?").prompt
    assert "(this turn failed: server_error)" in text
    assert "(this turn was interrupted)" in text


POLICY = RetryPolicy(enabled=True, strategy="default", delays_s=(1.0,), usage_limit="wait")


@pytest.mark.parametrize(
    ("kind", "reason", "usage_limit", "expected"),
    [
        ("auth", None, "wait", True),
        ("cli_missing", None, "wait", True),
        ("server_error", None, "wait", True),  # its same-thread retries are spent
        ("usage_limit", None, "wait", True),  # a reset it could not wait for
        ("usage_limit", None, "fallback", True),
        ("usage_limit", None, "fail", False),
        ("invalid_request", None, "wait", False),  # the request's own: anyone would fail
        ("agent_error", None, "wait", False),
        ("interrupted", None, "wait", False),
        ("resource_limit", "output_limit", "wait", False),
        ("unknown", "storage_unavailable", "wait", False),  # the gateway's own
    ],
)
def test_which_failures_move_a_turn_to_another_provider(
    kind: str, reason: str | None, usage_limit: str, expected: bool
) -> None:
    error = TurnError.model_validate({"kind": kind, "message": "m", "reason": reason})
    policy = RetryPolicy(
        enabled=True,
        strategy="default",
        delays_s=(1.0,),
        usage_limit=usage_limit,  # type: ignore[arg-type]
    )
    assert may_fail_over(error, policy) is expected


@pytest.mark.parametrize(
    ("request_", "selection", "expected"),
    [
        (SessionRequest(workspace="w"), SelectionSettings(), False),
        (SessionRequest(workspace="w", fallback=True), SelectionSettings(), True),
        (SessionRequest(workspace="w"), SelectionSettings(failover=True), True),
        (SessionRequest(workspace="w", fallback=False), SelectionSettings(failover=True), False),
        (
            SessionRequest(workspace="w", scenario="review"),
            SelectionSettings(failover_scenarios=["review"]),
            True,
        ),
        (
            SessionRequest(workspace="w", provider="codex", fallback=True),
            SelectionSettings(),
            True,
        ),
        (SessionRequest(workspace="w", provider="codex"), SelectionSettings(failover=True), False),
    ],
)
def test_a_session_fails_over_when_it_asks_or_its_scenario_or_the_gateway_says_so(
    request_: SessionRequest, selection: SelectionSettings, expected: bool
) -> None:
    assert wants_failover(request_, Settings(selection=selection)) is expected
