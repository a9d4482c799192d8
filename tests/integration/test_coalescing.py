"""Delta coalescing in the event log, on a real store: streamed deltas of one item are joined
before they are numbered, nothing is dropped or reordered, and a replay is what was sent."""

from __future__ import annotations

import asyncio
import json

from app.events import MessageDelta, ReasoningDelta, StreamedText, ToolOutput, TurnStarted
from app.runtime.eventlog import EventLog
from app.runtime.subscription import LoggedEvent
from app.store.repository import Store
from tests.integration.eventlogs import SESSION, subscribe

LONG_S = 60.0
"""A window no test outlives: what it holds is released only by what the test does."""


def texts(events: list[LoggedEvent]) -> list[tuple[str, str]]:
    """``(type, text)`` of each event (the payload's text, or the turn's prompt)."""
    out: list[tuple[str, str]] = []
    for event in events:
        data = json.loads(event.json)["data"]
        out.append((event.type, data.get("text", data.get("prompt", ""))))
    return out


async def stored(log: EventLog) -> list[LoggedEvent]:
    await log.flush()
    return await log.page(SESSION, after=0, limit=1000)


async def test_a_burst_of_deltas_becomes_the_first_delta_and_one_joined_event(
    store: Store,
) -> None:
    log = EventLog(store, coalesce_s=LONG_S)
    words = [f"w{i} " for i in range(50)]
    for word in words:
        await log.stream(SESSION, MessageDelta(message_id="m", text=word), turn_id="t")
    await log.append(SESSION, TurnStarted(prompt="next"))  # flushes what is held first

    events = await stored(log)
    assert [e.seq for e in events] == [1, 2, 3]
    assert (
        texts(events)
        == [
            ("message.delta", "w0 "),  # the first after a quiet spell goes out at once
            ("message.delta", "".join(words[1:])),
            ("turn.started", "next"),
        ]
    )
    assert json.loads(events[1].json)["turn_id"] == "t"


async def test_deltas_of_other_items_and_kinds_are_never_joined_or_reordered(
    store: Store,
) -> None:
    log = EventLog(store, coalesce_s=LONG_S)
    sequence: list[StreamedText] = [
        MessageDelta(message_id="a", text="1"),
        MessageDelta(message_id="a", text="2"),
        MessageDelta(message_id="a", text="3"),
        ReasoningDelta(message_id="a", text="r1"),
        ReasoningDelta(message_id="a", text="r2"),
        MessageDelta(message_id="b", text="4"),
        ToolOutput(tool_id="tool", text="o1"),
        ToolOutput(tool_id="tool", text="o2"),
        MessageDelta(message_id="b", text="5"),
    ]
    for data in sequence:
        await log.stream(SESSION, data)
    events = await stored(log)
    assert texts(events) == [
        ("message.delta", "1"),
        ("message.delta", "23"),
        ("reasoning.delta", "r1r2"),
        ("message.delta", "4"),
        ("tool.output", "o1o2"),
        ("message.delta", "5"),
    ]
    assert [e.seq for e in events] == list(range(1, 7))


async def test_deltas_of_another_attempt_are_not_joined(store: Store) -> None:
    log = EventLog(store, coalesce_s=LONG_S)
    for attempt, text in [(1, "a"), (1, "b"), (1, "c"), (2, "d"), (2, "e")]:
        await log.stream(SESSION, MessageDelta(message_id="m", text=text), attempt=attempt)
    events = await stored(log)
    assert texts(events) == [("message.delta", t) for t in ("a", "bc", "de")]
    assert [json.loads(e.json)["attempt"] for e in events] == [1, 1, 2]


async def test_a_held_delta_is_sent_when_its_window_closes(store: Store) -> None:
    log = EventLog(store, coalesce_s=0.02)
    subscription = subscribe(log)
    first = asyncio.ensure_future(anext(subscription))
    for text in ("x", "y", "z"):
        await log.stream(SESSION, MessageDelta(message_id="m", text=text))
    async with asyncio.timeout(10):
        assert (await first) is not None
        joined = await anext(subscription)  # nothing else is appended: the timer sends it
    assert joined is not None
    assert texts([joined]) == [("message.delta", "yz")]
    await subscription.aclose()


async def test_without_a_window_every_delta_is_its_own_event(store: Store) -> None:
    log = EventLog(store, coalesce_s=0)
    for i in range(20):
        await log.stream(SESSION, MessageDelta(message_id="m", text=str(i)))
    events = await stored(log)
    assert texts(events) == [("message.delta", str(i)) for i in range(20)]


async def test_live_subscribers_see_exactly_what_a_replay_shows(store: Store) -> None:
    log = EventLog(store, coalesce_s=0.005)
    subscription = subscribe(log)
    received: list[LoggedEvent] = []

    async def read() -> None:
        async for event in subscription:
            if event is not None:
                received.append(event)
                if event.type == "turn.started":
                    return

    reader = asyncio.create_task(read())
    sent = ""
    for i in range(2000):
        text = f"{i},"
        sent += text
        await log.stream(SESSION, MessageDelta(message_id="m", text=text))
        if i % 100 == 0:
            await asyncio.sleep(0.003)  # let some windows close mid-stream
    await log.append(SESSION, TurnStarted(prompt="end"))
    async with asyncio.timeout(10):
        await reader
    replay = await log.page(SESSION, after=0, limit=5000)
    assert [e.json for e in received] == [e.json for e in replay]
    assert "".join(t for kind, t in texts(replay) if kind == "message.delta") == sent
    assert len(replay) < 2000  # joined, not one event per delta
    await subscription.aclose()
