"""Claude Code's TodoWrite calls as the turn's plan (``plan.updated``)."""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from app.events import PlanEntry, PlanUpdated, ToolCompleted, ToolStarted
from app.providers.claude.normalizer import TurnEnded
from tests.unit.claude_lines import FIXTURES, TOOL_ID, assistant, feed_all, tool_result

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
