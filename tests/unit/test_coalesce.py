"""The coalescer's rules on their own (the event log's use of it: tests/integration/
test_coalescing.py), and the budget size it charges for a delta it has not encoded."""

from __future__ import annotations

import asyncio

import pytest

from app.events import MessageDelta, ReasoningDelta, StreamedText, ToolOutput
from app.runtime.coalesce import MAX_HELD_CHARS, Coalescer, Origin, encoded_size

ORIGIN: Origin = ("turn", 1, "claude_code")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def coalescer(window_s: float = 0.01) -> tuple[Coalescer[str], list[str], Clock]:
    released: list[str] = []
    clock = Clock()

    def release(target: str, data: StreamedText, origin: Origin) -> None:
        released.append(f"{target}:{data.text}")

    return Coalescer(window_s, release, clock=clock), released, clock


def delta(text: str, item: str = "m") -> MessageDelta:
    return MessageDelta(message_id=item, text=text)


@pytest.mark.parametrize(
    "data",
    [
        MessageDelta(message_id="msg_01:0", text="plain text "),
        ReasoningDelta(message_id="x", text='quotes " and \\ backslashes'),
        ToolOutput(tool_id="toolu_1", text="line\nbreaks\tand\x00\x01 controls"),
        MessageDelta(message_id="é", text="non-ASCII: é ü 漢字 🚀"),
        MessageDelta(message_id="m", text=""),
    ],
)
def test_the_charged_size_is_never_less_than_the_encoded_event(data: StreamedText) -> None:
    assert encoded_size(data) >= len(data.model_dump_json())


async def test_the_first_delta_after_a_pause_is_numbered_at_once_the_next_ones_held() -> None:
    coalesce, released, clock = coalescer()
    assert coalesce.add("s", "s", delta("a"), ORIGIN) is False  # the caller numbers it
    assert coalesce.add("s", "s", delta("b"), ORIGIN) is True
    assert coalesce.add("s", "s", delta("c"), ORIGIN) is True
    assert released == []
    coalesce.flush("s")
    assert released == ["s:bc"]
    clock.now += 1  # a pause longer than the window
    assert coalesce.add("s", "s", delta("d"), ORIGIN) is False


async def test_the_window_closing_releases_what_is_held() -> None:
    released: list[str] = []
    done = asyncio.Event()

    def release(target: str, data: StreamedText, origin: Origin) -> None:
        released.append(data.text)
        done.set()

    coalesce: Coalescer[str] = Coalescer(0.001, release)
    coalesce.add("s", "s", delta("a"), ORIGIN)
    coalesce.add("s", "s", delta("b"), ORIGIN)
    async with asyncio.timeout(5):
        await done.wait()  # the timer fires on the loop; nothing else releases it
    assert released == ["b"]
    assert coalesce.holding == 0


async def test_another_item_origin_or_kind_releases_first() -> None:
    coalesce, released, _ = coalescer(window_s=60)
    coalesce.add("s", "s", delta("a"), ORIGIN)
    assert coalesce.add("s", "s", delta("b"), ORIGIN)
    assert coalesce.add("s", "s", delta("c", item="other"), ORIGIN)  # b released, c held
    assert released == ["s:b"]
    assert coalesce.add("s", "s", delta("d", item="other"), ("turn", 2, "claude_code"))
    assert released == ["s:b", "s:c"]
    assert coalesce.add("s", "s", ReasoningDelta(message_id="other", text="e"), ORIGIN)
    assert released == ["s:b", "s:c", "s:d"]
    coalesce.flush_all()
    assert released == ["s:b", "s:c", "s:d", "s:e"]


async def test_sessions_are_held_apart() -> None:
    coalesce, released, _ = coalescer(window_s=60)
    for session in ("s", "t"):
        coalesce.add(session, session, delta("1"), ORIGIN)
    for session in ("s", "t", "s"):
        coalesce.add(session, session, delta("2"), ORIGIN)
    coalesce.flush("t")
    assert released == ["t:2"]
    coalesce.forget("s")
    assert released == ["t:2", "s:22"]


async def test_a_long_held_text_is_released_without_waiting_for_the_window() -> None:
    coalesce, released, _ = coalescer(window_s=60)
    coalesce.add("s", "s", delta("a"), ORIGIN)
    chunk = "x" * 1024
    for _ in range(MAX_HELD_CHARS // len(chunk)):
        coalesce.add("s", "s", delta(chunk), ORIGIN)
    assert released == ["s:" + chunk * (MAX_HELD_CHARS // len(chunk))]


async def test_a_zero_window_holds_nothing() -> None:
    coalesce, _, _ = coalescer(window_s=0)
    assert [coalesce.add("s", "s", delta(t), ORIGIN) for t in "abc"] == [False] * 3
    assert coalesce.holding == 0
