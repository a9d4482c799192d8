"""Claude Code stdout lines for the normalizer tests: recorded captures, and builders of
the lines the CLI prints (stream events, assistant messages, tool results, results)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from app.events import MessageCompleted, MessageDelta, Usage, UsageReported
from app.providers.base import TurnOutcome
from app.providers.claude.normalizer import ClaudeItem, ClaudeNormalizer, TurnEnded

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
