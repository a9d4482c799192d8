"""The SDK's SSE decoder and stream rules, with no I/O: messages split anywhere, the line
ends and fields of the event-stream format, duplicates dropped, control frames read."""

from __future__ import annotations

import json

import pytest
from agent_gateway_sdk._sse import SseDecoder, SseMessage
from agent_gateway_sdk._streaming import Backoff, Deliver, Reconnect, StreamState
from agent_gateway_sdk.controls import Degraded, Shutdown
from agent_gateway_sdk.errors import EventsSkipped
from agent_gateway_sdk.events import MessageDeltaEvent, TurnCompletedEvent

WIRE = (
    b"\xef\xbb\xbf: connected\nretry: 2000\n\n"
    b"id: 1\ndata: first\n\n"
    b'event: shutdown\r\ndata: {"retry_ms": 5000}\r\n\r\n'
    b"data: two\rdata: lines\r\r"
    b"id: 3\nevent: custom\ndata:no-space\n\n"
)
EXPECTED = [
    SseMessage(event="message", data="first", id="1"),
    SseMessage(event="shutdown", data='{"retry_ms": 5000}', id=None),
    SseMessage(event="message", data="two\nlines", id=None),
    SseMessage(event="custom", data="no-space", id="3"),
]


def decode(chunks: list[bytes]) -> tuple[list[SseMessage], SseDecoder]:
    decoder = SseDecoder()
    found: list[SseMessage] = []
    for chunk in chunks:
        found += decoder.feed(chunk)
    return found, decoder


def test_a_stream_fed_whole_gives_every_message_with_its_fields() -> None:
    found, decoder = decode([WIRE])
    assert found == EXPECTED
    assert decoder.retry_ms == 2000
    assert decoder.comments == 1


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64])
def test_a_stream_split_anywhere_gives_the_same_messages(size: int) -> None:
    chunks = [WIRE[i : i + size] for i in range(0, len(WIRE), size)]
    assert decode(chunks)[0] == EXPECTED


def test_a_cr_at_the_end_of_a_chunk_waits_for_a_possible_lf() -> None:
    found, _ = decode([b"data: a\r", b"\n\r", b"\n"])
    assert found == [SseMessage(event="message", data="a", id=None)]


def test_utf8_split_inside_a_character_is_decoded_whole() -> None:
    wire = "data: héllo ✓\n\n".encode()
    cut = wire.index("✓".encode()) + 1
    assert decode([wire[:cut], wire[cut:]])[0][0].data == "héllo ✓"


def test_fields_without_data_dispatch_nothing_and_a_nul_id_is_ignored() -> None:
    found, decoder = decode([b"id: 4\nevent: x\n\nretry: soon\nid: a\x00b\ndata: d\n\n"])
    assert found == [SseMessage(event="message", data="d", id=None)]
    assert decoder.retry_ms is None


def envelope(seq: int, kind: str = "message.delta", **data: object) -> SseMessage:
    body = {
        "seq": seq,
        "session_id": "ses_1",
        "turn_id": "trn_1",
        "at": "2026-01-01T00:00:00Z",
        "type": kind,
        "data": data or {"message_id": "m", "text": str(seq)},
    }
    return SseMessage(event="message", data=json.dumps(body), id=str(seq))


def frame(name: str, **data: object) -> SseMessage:
    return SseMessage(event=name, data=json.dumps({"type": name, **data}), id=None)


def test_events_at_or_below_the_cursor_are_dropped_and_the_cursor_follows() -> None:
    state = StreamState(after=2, on_control=None, stop_when=None)
    assert state.read(envelope(2)) is None
    step = state.read(envelope(3))
    assert isinstance(step, Deliver)
    assert isinstance(step.event, MessageDeltaEvent)
    assert state.read(envelope(3)) is None
    assert (state.cursor, state.session_id) == (3, "ses_1")
    assert state.headers() == {"Accept": "text/event-stream", "Last-Event-ID": "3"}


def test_a_stream_with_no_cursor_sends_none() -> None:
    assert StreamState(after=None, on_control=None, stop_when=None).headers() == {
        "Accept": "text/event-stream"
    }


def test_the_end_condition_ends_the_stream_after_delivering_its_event() -> None:
    state = StreamState(
        after=None, on_control=None, stop_when=lambda e: isinstance(e, TurnCompletedEvent)
    )
    state.read(envelope(1))
    assert not state.ended
    step = state.read(envelope(2, "turn.completed", final_text="ok"))
    assert isinstance(step, Deliver)
    assert state.ended


def test_control_frames_steer_the_reconnect() -> None:
    told: list[object] = []
    state = StreamState(after=1, on_control=told.append, stop_when=None)
    assert state.read(frame("shutdown", reason="gateway_shutdown", retry_ms=1500)) == Reconnect(1.5)
    assert state.read(frame("shutdown", reason="gateway_shutdown", retry_ms=10**9)) == Reconnect(
        30.0
    )
    assert state.read(frame("evicted", last_seq_sent=1, reason="lagging")) == Reconnect(0.0)
    assert state.read(frame("degraded", reason="redis_unreachable", poll_ms=2000)) is None
    assert state.degraded
    assert state.read(frame("recovered")) is None
    assert not state.degraded
    assert state.read(frame("resync_required", first_seq=50, after=1)) is None
    assert state.cursor == 49
    assert state.read(frame("something_new")) is None
    assert told[0] == Shutdown(retry_ms=1500)
    assert told[3] == Degraded(reason="redis_unreachable", poll_ms=2000)
    assert len(told) == 6


def test_a_gap_without_a_control_handler_raises() -> None:
    state = StreamState(after=1, on_control=None, stop_when=None)
    with pytest.raises(EventsSkipped, match=r"events 2\.\.49 are no longer kept"):
        state.read(frame("resync_required", first_seq=50, after=1))


def test_backoff_starts_at_once_doubles_to_its_cap_and_gives_up_after_its_timeout() -> None:
    backoff = Backoff(timeout_s=3600, cap_s=2.0)
    delays = [backoff.next_delay() for _ in range(6)]
    assert delays[0] == 0.0
    for got, nominal in zip(delays[1:], [0.25, 0.5, 1.0, 2.0, 2.0], strict=True):
        assert got is not None
        assert nominal * 0.8 <= got <= nominal * 1.2
    backoff.progress()
    assert backoff.next_delay() == 0.0
    assert backoff.next_delay(at_least_s=7.0) == 7.0  # a Retry-After is honoured
    assert Backoff(timeout_s=0.0).next_delay() is None
