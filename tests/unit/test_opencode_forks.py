"""Where OpenCode's fork of a thread stops: before the first message of the turn after the
kept ones."""

from __future__ import annotations

from typing import Any

import pytest

from app.providers.base import ForkFailed
from app.providers.opencode.forks import fork_point


def _thread(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for number in range(1, turns + 1):
        messages.append({"info": {"id": f"msg_u{number}", "role": "user"}, "parts": []})
        messages.append({"info": {"id": f"msg_a{number}", "role": "assistant"}, "parts": []})
    return messages


def test_a_fork_stops_before_the_prompt_of_the_next_turn() -> None:
    assert fork_point(_thread(3), 1) == "msg_u2"
    assert fork_point(_thread(3), 2) == "msg_u3"


def test_a_fork_of_every_turn_keeps_the_whole_thread() -> None:
    assert fork_point(_thread(3), 3) is None


def test_a_thread_with_fewer_turns_than_kept_is_refused() -> None:
    with pytest.raises(ForkFailed, match="2 user messages, fewer than the 3"):
        fork_point(_thread(2), 3)
