"""Framing OpenCode's event stream and unwrapping its envelopes."""

from __future__ import annotations

import json
from pathlib import Path

from app.providers.opencode.sse import ServerEvent, SseDecoder, parse_event

REFERENCE = Path(__file__).parent.parent / "fixtures" / "opencode" / "reference"


def decode(text: str) -> list[str]:
    decoder = SseDecoder()
    return [data for line in text.split("\n") if (data := decoder.feed(line)) is not None]


def test_messages_end_at_blank_lines_and_multi_line_data_is_joined() -> None:
    stream = 'data: {"a":1}\n\n: keep-alive comment\n\nevent: x\nid: 7\ndata: one\ndata:two\n\n\n'
    assert decode(stream) == ['{"a":1}', "one\ntwo"]


def test_an_unfinished_message_is_not_returned() -> None:
    assert decode("data: half") == []


def test_a_global_event_is_unwrapped_with_its_thread() -> None:
    data = json.dumps(
        {
            "directory": "/srv/project",
            "payload": {
                "id": "evt_1",
                "type": "session.idle",
                "properties": {"sessionID": "ses_a"},
            },
        }
    )
    assert parse_event(data) == ServerEvent(
        type="session.idle", properties={"sessionID": "ses_a"}, session_id="ses_a"
    )


def test_server_events_have_no_thread_and_sync_duplicates_and_junk_are_dropped() -> None:
    connected = parse_event('{"payload":{"id":"evt_1","type":"server.connected","properties":{}}}')
    assert connected == ServerEvent(type="server.connected", properties={}, session_id=None)
    sync = {"directory": "/d", "payload": {"type": "sync", "syncEvent": {"type": "x"}}}
    assert parse_event(json.dumps(sync)) is None
    for junk in ("not json", "[1]", '{"payload": 3}', '{"payload": {"type": 4}}', '{"a": '):
        assert parse_event(junk) is None


def test_the_per_directory_shape_is_accepted_too() -> None:
    bare = '{"id":"evt_1","type":"session.status","properties":{"sessionID":"ses_b","status":{}}}'
    event = parse_event(bare)
    assert event is not None
    assert (event.type, event.session_id) == ("session.status", "ses_b")


def test_every_recorded_global_event_parses_and_session_events_name_their_thread() -> None:
    for path in REFERENCE.glob("global-event_*.txt"):
        lines = [line[4:] for line in path.read_text().splitlines() if line.startswith("SSE ")]
        raw = [json.loads(line) for line in lines]
        parsed = [parse_event(line) for line in lines]
        for envelope, event in zip(raw, parsed, strict=True):
            if envelope["payload"]["type"] == "sync":
                assert event is None
                continue
            assert event is not None, envelope
            if event.type.startswith(("message.", "session.", "permission.")):
                assert event.session_id is not None
                assert event.session_id.startswith("ses_")
