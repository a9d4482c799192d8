"""Claude Code's tool results and turn results as normalized items: output, denials, failures,
the thread, cost and usage."""

from __future__ import annotations

from typing import Any

from app.events import ToolCompleted, UsageReported
from app.providers.claude.normalizer import (
    MAX_TOOL_OUTPUT_BYTES,
    ClaudeNormalizer,
    ThreadSeen,
    TurnEnded,
)
from tests.unit.claude_lines import TOOL_ID, feed_all, line, result, tool_result

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
