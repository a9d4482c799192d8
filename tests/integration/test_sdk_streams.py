"""The SDK's event streams (``Client`` and ``AsyncClient``) against a scripted SSE server on
loopback: a dropped connection, a gateway's shutdown, an eviction, a gap in the kept events,
a degraded replica, refusals, a silent connection and a gateway that stays away. Each stream
must yield every event once, in order, and resume with ``Last-Event-ID``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from agent_gateway_sdk import (
    AsyncClient,
    AuthenticationError,
    Client,
    ConnectionFailed,
    ControlFrame,
    Degraded,
    EventsSkipped,
    Evicted,
    NotFoundError,
    RateLimited,
    Recovered,
    ResyncRequired,
    Shutdown,
    UnexpectedResponse,
    UnknownEvent,
)
from agent_gateway_sdk.events import Event, MessageDeltaEvent, TurnCompletedEvent

from tests.integration.scripted_sse import (
    CONNECTED,
    DROP,
    END,
    HOLD,
    ScriptedSse,
    Status,
    Step,
    control,
    event,
    problem,
    split_bytes,
)

KINDS = ["sync", "async"]
PATH = "/v1/sessions/ses_1/events"
CLOSED = Status(204)

Opener = Callable[[Any], Any]
"""Opens a stream on a ``Client`` or an ``AsyncClient`` (the same call on both)."""


def session_events(
    after: int | None = None, on_control: Callable[[ControlFrame], object] | None = None
) -> Opener:
    return lambda client: client.stream("GET", PATH, after=after, on_control=on_control)


def collect(
    kind: str,
    server: ScriptedSse,
    opener: Opener,
    *,
    each: Callable[[Event, Any], object] | None = None,
    **options: Any,
) -> list[Event]:
    """Every event the stream yields, with the sync or the async client; ``each`` sees each
    event and the stream as it arrives."""
    options.setdefault("reconnect_timeout", 10.0)
    if kind == "sync":
        with Client(server.url, token="key", **options) as client, opener(client) as stream:
            found = []
            for item in stream:
                found.append(item)
                if each is not None:
                    each(item, stream)
            return found

    async def read() -> list[Event]:
        async with (
            AsyncClient(server.url, token="key", **options) as client,
            opener(client) as stream,
        ):
            found = []
            async for item in stream:
                found.append(item)
                if each is not None:
                    each(item, stream)
            return found

    return asyncio.run(read())


def seqs(events: list[Event]) -> list[int]:
    return [e.seq for e in events]


def serve(*steps: Step) -> ScriptedSse:
    return ScriptedSse(list(steps))


@pytest.mark.parametrize("kind", KINDS)
def test_a_dropped_connection_resumes_from_the_last_seq_and_never_repeats_an_event(
    kind: str,
) -> None:
    with serve(
        [CONNECTED, event(1), event(2), event(3), DROP],
        [CONNECTED, event(2), event(3), event(4), event(5), END],  # 2 and 3 again: dropped
        CLOSED,
    ) as server:
        found = collect(kind, server, session_events())
    assert seqs(found) == [1, 2, 3, 4, 5]
    assert all(isinstance(e, MessageDeltaEvent) for e in found)
    assert server.last_event_ids() == [None, "3", "5"]
    assert server.requests[0]["authorization"] == "Bearer key"
    assert server.requests[0]["accept"] == "text/event-stream"


@pytest.mark.parametrize("kind", KINDS)
def test_a_stream_from_a_cursor_sends_it_and_skips_what_is_not_after_it(kind: str) -> None:
    with serve([CONNECTED, event(7), event(8), END], CLOSED) as server:
        found = collect(kind, server, session_events(after=7))
    assert seqs(found) == [8]
    assert server.last_event_ids() == ["7", "8"]


@pytest.mark.parametrize("kind", KINDS)
def test_shutdown_waits_its_retry_then_resumes(kind: str) -> None:
    frames: list[ControlFrame] = []
    stamps: list[float] = []
    shutdown = control("shutdown", reason="gateway_shutdown", retry_ms=400)
    with serve([CONNECTED, event(1), shutdown, END], [CONNECTED, event(2), END], CLOSED) as server:
        found = collect(
            kind,
            server,
            session_events(on_control=frames.append),
            each=lambda _e, _s: stamps.append(time.monotonic()),
        )
    assert seqs(found) == [1, 2]
    assert frames == [Shutdown(reason="gateway_shutdown", retry_ms=400)]
    assert stamps[1] - stamps[0] >= 0.35  # it waited what the gateway asked
    assert server.last_event_ids() == [None, "1", "2"]


@pytest.mark.parametrize("kind", KINDS)
def test_evicted_reconnects_at_once_without_waiting_for_the_close(kind: str) -> None:
    evicted = control("evicted", last_seq_sent=2, reason="lagging")
    started = time.monotonic()
    with serve(
        [CONNECTED, event(1), event(2), evicted, HOLD],  # held open: the client must leave
        [CONNECTED, event(3), END],
        CLOSED,
    ) as server:
        found = collect(kind, server, session_events())
        took = time.monotonic() - started
    assert seqs(found) == [1, 2, 3]
    assert server.last_event_ids() == [None, "2", "3"]
    assert took < 10  # the held connection lasts 30 s


@pytest.mark.parametrize("kind", KINDS)
def test_a_gap_in_the_kept_events_raises_without_a_control_handler(kind: str) -> None:
    resync = control("resync_required", message_id=9, first_seq=10, after=2)
    with (
        serve([CONNECTED, resync, event(10), END], CLOSED) as server,
        pytest.raises(EventsSkipped) as raised,
    ):
        collect(kind, server, session_events(after=2))
    assert (raised.value.first_seq, raised.value.after) == (10, 2)


@pytest.mark.parametrize("kind", KINDS)
def test_a_gap_is_told_to_the_control_handler_and_the_stream_goes_on(kind: str) -> None:
    frames: list[ControlFrame] = []
    resync = control("resync_required", message_id=9, first_seq=10, after=2)
    with serve([CONNECTED, resync, event(10), event(11), DROP], CLOSED) as server:
        found = collect(kind, server, session_events(after=2, on_control=frames.append))
    assert seqs(found) == [10, 11]
    assert frames == [ResyncRequired(first_seq=10, after=2)]
    assert server.last_event_ids() == ["2", "11"]


@pytest.mark.parametrize("kind", KINDS)
def test_degraded_and_recovered_are_told_and_the_stream_goes_on(kind: str) -> None:
    frames: list[ControlFrame] = []
    states: list[bool] = []
    with serve(
        [
            CONNECTED,
            event(1),
            control("degraded", reason="redis_unreachable", poll_ms=2000),
            event(2),
            control("recovered"),
            event(3),
            END,
        ],
        CLOSED,
    ) as server:
        found = collect(
            kind,
            server,
            session_events(on_control=frames.append),
            each=lambda _e, stream: states.append(stream.degraded),
        )
    assert seqs(found) == [1, 2, 3]
    assert states == [False, True, False]
    assert frames == [Degraded(reason="redis_unreachable", poll_ms=2000), Recovered()]
    assert len(server.requests) == 2  # neither frame ended the connection


@pytest.mark.parametrize("kind", KINDS)
def test_a_refusal_while_reconnecting_is_waited_out(kind: str) -> None:
    with serve(
        [CONNECTED, event(1), DROP],
        problem(503, "at_capacity", retry_after=1),
        [CONNECTED, event(2), END],
        CLOSED,
    ) as server:
        started = time.monotonic()
        found = collect(kind, server, session_events())
        took = time.monotonic() - started
    assert seqs(found) == [1, 2]
    assert server.last_event_ids() == [None, "1", "1", "2"]
    assert took >= 0.9  # Retry-After: 1


@pytest.mark.parametrize("kind", KINDS)
def test_a_refusal_of_the_first_connection_raises_its_problem(kind: str) -> None:
    refused = problem(429, "key_share_exceeded", retry_after=7, limit=3)
    with serve(refused) as server, pytest.raises(RateLimited) as raised:
        collect(kind, server, session_events())
    error = raised.value
    assert (error.status, error.code, error.retry_after, error["limit"]) == (
        429,
        "key_share_exceeded",
        7.0,
        3,
    )
    assert error.detail == "key_share_exceeded (scripted)"
    assert len(server.requests) == 1
    with serve(problem(404, "not_found")) as server, pytest.raises(NotFoundError):
        collect(kind, server, session_events())


@pytest.mark.parametrize("kind", KINDS)
def test_a_gateway_that_stays_away_ends_the_stream_with_connection_failed(kind: str) -> None:
    server = serve([CONNECTED, event(1), DROP]).__enter__()
    started = time.monotonic()
    with pytest.raises(ConnectionFailed, match="last seq 1"):
        collect(
            kind,
            server,
            session_events(),
            each=lambda _e, _s: server.close(),  # nothing listens on its port any more
            reconnect_timeout=1.0,
        )
    assert 0.9 <= time.monotonic() - started < 8


@pytest.mark.parametrize("kind", KINDS)
def test_a_silent_connection_is_resumed_after_the_read_timeout(kind: str) -> None:
    with serve([CONNECTED, event(1), HOLD], [CONNECTED, event(2), END], CLOSED) as server:
        found = collect(kind, server, session_events(), stream_read_timeout=0.5)
    assert seqs(found) == [1, 2]
    assert server.last_event_ids() == [None, "1", "2"]


@pytest.mark.parametrize("kind", KINDS)
def test_messages_split_byte_by_byte_with_crlf_line_ends_are_read_whole(kind: str) -> None:
    wire = (b": connected\r\n\r\n" + event(1) + b": keep-alive\n\n" + event(2)).replace(
        b"\n", b"\r\n"
    )
    with serve([*split_bytes(wire), END], CLOSED) as server:
        found = collect(kind, server, session_events())
    assert seqs(found) == [1, 2]
    assert [e.data.text for e in found if isinstance(e, MessageDeltaEvent)] == ["t1", "t2"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_unknown_event_type_and_an_unknown_frame_are_passed_over_safely(kind: str) -> None:
    frames: list[ControlFrame] = []
    with serve(
        [
            CONNECTED,
            control("from_the_future", anything=1),
            event(1, kind="thing.happened", detail="new"),
            event(2),
            END,
        ],
        CLOSED,
    ) as server:
        found = collect(kind, server, session_events(on_control=frames.append))
    assert seqs(found) == [1, 2]
    assert isinstance(found[0], UnknownEvent)
    assert (found[0].type, found[0].data) == ("thing.happened", {"detail": "new"})
    assert frames == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_stream_resumes_on_the_session_and_ends_with_its_turn(kind: str) -> None:
    done = event(3, kind="turn.completed", session="ses_9", final_text="done")
    with serve(
        [CONNECTED, event(1, session="ses_9"), DROP],
        [CONNECTED, event(2, session="ses_9"), done, HOLD],  # ends at the turn's end
    ) as server:
        found = collect(
            kind,
            server,
            lambda client: client.runs.stream(prompt="hi", workspace="/w", approval_mode="ask"),
        )
    assert seqs(found) == [1, 2, 3]
    assert isinstance(found[-1], TurnCompletedEvent)
    first, resumed = server.requests
    assert (first["method"], first["path"]) == ("POST", "/v1/runs")
    assert first["body"] == '{"prompt":"hi","workspace":"/w","approval_mode":"ask"}'
    assert (resumed["method"], resumed["path"]) == ("GET", "/v1/sessions/ses_9/events")
    assert resumed["last-event-id"] == "1"


@pytest.mark.parametrize("kind", KINDS)
def test_an_evicted_frame_is_told_before_the_reconnect(kind: str) -> None:
    frames: list[ControlFrame] = []
    evicted = control("evicted", last_seq_sent=1, reason="key_retired")
    with (
        serve([CONNECTED, event(1), evicted, END], problem(401, "unauthorized")) as server,
        pytest.raises(AuthenticationError, match="401 unauthorized"),
    ):
        collect(kind, server, session_events(on_control=frames.append))
    assert frames == [Evicted(last_seq_sent=1, reason="key_retired")]


@pytest.mark.parametrize("kind", KINDS)
def test_an_event_of_another_shape_is_an_unexpected_response(kind: str) -> None:
    malformed = event(1, kind="turn.completed", no_final_text=True)
    with serve([CONNECTED, malformed, END]) as server, pytest.raises(UnexpectedResponse):
        collect(kind, server, session_events())


def test_an_answer_of_another_shape_is_an_unexpected_response() -> None:
    html = Status(200, b"<html>a proxy's page</html>", {"Content-Type": "text/html"})
    with (
        serve(html) as server,
        Client(server.url, token="key") as client,
        pytest.raises(UnexpectedResponse, match="GET /v1/sessions/ses_1 answered 200"),
    ):
        client.sessions.get("ses_1")
