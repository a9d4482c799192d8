"""Gateway event streams for the ACP server's translation tests: each provider's recorded CLI
output (tests/fixtures) run through that provider's real normalizer and wrapped in envelopes
exactly as the event log writes them; and the check that an update is valid ACP."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from acp.schema import SessionNotification

from app.api.acp.updates import AcpUpdate
from app.events import (
    EventData,
    TurnCompleted,
    TurnFailed,
    TurnInterrupted,
    TurnStarted,
    encode_event,
    stored_time,
)
from app.providers.base import TurnOutcome
from app.providers.claude.normalizer import ClaudeNormalizer
from app.providers.codex.normalizer import TurnNormalizer as CodexNormalizer
from app.providers.codex.protocol import Notification, Response, parse_line
from app.providers.items import TurnEnded
from app.providers.opencode.normalizer import TurnNormalizer as OpenCodeNormalizer
from app.providers.opencode.sse import parse_event
from tests.unit.test_acp_updates import replay

FIXTURES = Path(__file__).parent.parent / "fixtures"
SESSION = "ses_acp"
TURN = "trn_1"
START = datetime(2026, 11, 22, 13, 0, tzinfo=UTC)
PROMPT = "Run the stub command."

Stream = list[dict[str, Any]]
"""A turn's events as clients receive them: parsed wire envelopes, in seq order."""


def envelopes(
    items: Iterable[EventData],
    *,
    provider: str = "claude_code",
    turn_id: str | None = TURN,
    first_seq: int = 1,
) -> Stream:
    """``items`` as the event log stores and sends them (``encode_event``), one second apart."""
    stream: Stream = []
    for offset, data in enumerate(items):
        text = encode_event(
            seq=first_seq + offset,
            session_id=SESSION,
            turn_id=turn_id,
            attempt=1 if turn_id else None,
            provider=provider,
            at=stored_time(START + timedelta(seconds=offset)),
            type=data.TYPE,
            data_json=data.model_dump_json(),
        )
        stream.append(json.loads(text))
    return stream


def turn(items: Sequence[object], outcome: TurnOutcome | None, provider: str) -> Stream:
    """A whole turn: ``turn.started``, the events among ``items`` (a normalizer's output
    holds other items too), and the end ``outcome`` stands for."""
    data: list[EventData] = [TurnStarted(prompt=PROMPT)]
    data += [item for item in items if isinstance(item, EventData)]
    if outcome is None:
        outcome = next(i.outcome for i in items if isinstance(i, TurnEnded))
    if outcome.status == "completed":
        data.append(
            TurnCompleted(
                final_text=outcome.final_text, usage=outcome.usage, stop_reason=outcome.stop_reason
            )
        )
    elif outcome.status == "interrupted":
        data.append(TurnInterrupted(reason="interrupted by the client"))
    else:
        assert outcome.error is not None
        data.append(TurnFailed(error=outcome.error))
    return envelopes(data, provider=provider)


def claude_items(capture: str) -> list[object]:
    """What Claude Code's normalizer made of a capture's stdout."""
    path = FIXTURES / "claude" / "reference" / f"stream-json_{capture}.txt"
    lines = [line[4:].encode() for line in path.read_text().splitlines() if line[:4] == "<<< "]
    normalizer = ClaudeNormalizer()
    return [item for line in lines for item in normalizer.feed(line)]


def claude(capture: str) -> Stream:
    return turn(claude_items(capture), None, "claude_code")


def codex(capture: str) -> Stream:
    path = FIXTURES / "codex" / "reference" / f"app-server_{capture}.txt"
    messages = [
        parse_line(line[4:].encode())
        for line in path.read_text().splitlines()
        if line.startswith("<<< ")
    ]
    thread = next(
        m.result["thread"]["id"]
        for m in messages
        if isinstance(m, Response) and m.result and "thread" in m.result
    )
    turn_id = next(
        m.result["turn"]["id"]
        for m in messages
        if isinstance(m, Response) and m.result and "turn" in m.result
    )
    normalizer = CodexNormalizer(turn_id)
    items = [
        item
        for m in messages
        if isinstance(m, Notification) and m.thread_id == thread
        for item in normalizer.feed(m)
    ]
    return turn(items, None, "codex")


def opencode_items(capture: str) -> list[object]:
    """What OpenCode's normalizer made of the capture's first thread's first turn."""
    lines = (FIXTURES / "opencode" / "reference" / f"{capture}.txt").read_text().splitlines()
    parsed = [parse_event(line[4:]) for line in lines if line.startswith("SSE ")]
    events = [e for e in parsed if e is not None]
    thread = next(e.session_id for e in events if e.type == "session.created")
    normalizer = OpenCodeNormalizer(clock=START.timestamp)
    items: list[object] = []
    for event in events:
        if event.session_id == thread and not normalizer.ended:
            items += normalizer.feed(event)
    return items


def opencode(capture: str) -> Stream:
    return turn(opencode_items(capture), None, "opencode")


def acp_agent(case: str) -> Stream:
    """The first prompt of an ACP agent's capture, as the gateway's ACP client reported it."""
    recorded = replay(case)[0]
    return turn(recorded.events, recorded.outcome, "acp:" + case.split("-", 1)[0])


RECORDED = {
    **{f"claude:{c}": (claude, c) for c in ("normal", "perm", "deny", "interrupt", "overloaded")},
    **{f"codex:{c}": (codex, c) for c in ("accept", "decline", "500", "disc", "interrupt")},
    **{
        f"opencode:{c}": (opencode, c)
        for c in (
            "global-event_text",
            "global-event_permission-allow",
            "global-event_permission-reject",
            "global-event_error-500-retries",
            "global-event_abort-then-next-turn",
        )
    },
    **{
        f"acp:{agent}-{case}": (acp_agent, f"{agent}-{case}")
        for agent in ("gemini", "copilot", "qwen", "codebuddy", "claude", "codex", "opencode")
        for case in ("text", "tool-allow", "tool-reject", "cancel")
    },
}
"""Every recorded stream, by name: its loader and its capture."""


def recorded(name: str) -> Stream:
    loader, capture = RECORDED[name]
    return loader(capture)


def wire(update: AcpUpdate, session_id: str = SESSION) -> dict[str, Any]:
    """``update`` as a ``session/update``'s params carry it, checked against the SDK's own
    model: it parses, and nothing is lost in parsing (the SDK drops invalid fields quietly)."""
    notification = SessionNotification(session_id=session_id, update=update)
    params = notification.model_dump(by_alias=True, exclude_none=True, mode="json")
    again = SessionNotification.model_validate(json.loads(json.dumps(params)))
    assert again.model_dump(by_alias=True, exclude_none=True, mode="json") == params
    return dict(params["update"])
