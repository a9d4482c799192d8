"""The gateway stopping, against a real gateway process with the fake ``claude``: SIGTERM
ends streams with frames, interrupts turns and exits promptly (R13); SIGKILL mid-stream keeps
the database sound and every delivered event (R3)."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect as ws_connect

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import SseReader, is_turn_end
from tests.integration.callers import create
from tests.integration.streams import (
    AUTH,
    RetryRecordingReader,
    alive,
    contiguous,
    database,
    envelopes,
    is_delta,
    is_end,
    read_frames,
    recv_until_closed,
    sse_headers,
    start_turn,
    stored,
    ws_frames,
    ws_url,
)

# --- R13: graceful shutdown -------------------------------------------------------------------


def test_r13_sigterm_ends_streams_with_frames_interrupts_turns_and_exits_promptly(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    grace_s = 10.0
    gateway = make_fake_gateway(server={"shutdown_grace_s": grace_s}).start()
    assert gateway.process is not None
    with gateway.client() as client:
        sid = create(client, gateway)
        turn_id = start_turn(client, sid, "slow")
        with (
            client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers()) as stream,
            ws_connect(ws_url(gateway, sid), additional_headers=AUTH) as ws,
        ):
            reader = RetryRecordingReader(stream)
            read_frames(reader, lambda f: f.event is None and is_delta(f.json()))
            ws_frames(ws, is_delta)
            cli_pid = client.get(f"/v1/sessions/{sid}").json()["process"]["pid"]
            signalled = time.monotonic()
            gateway.process.send_signal(signal.SIGTERM)

            tail = read_frames(reader, lambda f: f.event == "shutdown")
            assert list(reader) == []  # and the stream ends
            ended_after = time.monotonic() - signalled
            shutdown = tail[-1]
            assert json.loads(shutdown.data) == {
                "type": "shutdown",
                "reason": "gateway_shutdown",
                "retry_ms": 5000,
            }
            assert reader.retries[-1] == "5000"  # the reconnection hint came with the frame
            # The turn's end was recorded and sent before the stream was closed.
            assert envelopes(tail)[-1]["type"] == "turn.interrupted"

            _, close = recv_until_closed(ws)
            assert close.code == 1012

        code = gateway.process.wait(timeout=grace_s + 10)
        exited_after = time.monotonic() - signalled
    assert code == 0
    # Liveness bounds only: far below uvicorn's graceful timeout, which open streams used to
    # hold the stop for.
    assert ended_after < grace_s / 2
    assert exited_after < grace_s
    assert not alive(cli_pid)
    assert [s["pid"] for s in gateway.spawns() if alive(s["pid"])] == []
    gateway.stop()
    wal = database(gateway).with_name("gateway.db-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # checkpointed into the database
    with sqlite3.connect(database(gateway)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)

    gateway.start()
    with gateway.client() as client:
        turn = client.get(f"/v1/sessions/{sid}/turns/{turn_id}").json()
        assert turn["status"] == "interrupted"
        assert turn["error"]["kind"] == "interrupted"
        assert turn["error"]["reason"] == "gateway_shutdown"
        events = stored(client, sid)
        assert [e["type"] for e in events if is_turn_end(e)] == ["turn.interrupted"]
        assert contiguous(1, events)
        assert client.get(f"/v1/sessions/{sid}").json()["status"] == "idle"


# --- R3: SIGKILL mid-stream -------------------------------------------------------------------


def test_r3_sigkill_mid_stream_keeps_the_database_sound_and_every_delivered_event(
    fake_gateway: FakeGateway,
) -> None:
    gateway = fake_gateway
    assert gateway.process is not None
    delivered: list[dict[str, Any]] = []
    with gateway.client() as client:
        sid = create(client, gateway)
        turn_id = start_turn(client, sid, "slow")
        process = gateway.process

        def read_until_killed() -> None:
            with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers()) as r:
                for frame in SseReader(r):
                    delivered.append(frame.json())
                    if sum(is_delta(e) for e in delivered) == 20:
                        process.kill()  # mid-stream, while deltas are being appended

        with pytest.raises(httpx.TransportError):
            read_until_killed()
    assert sum(is_delta(e) for e in delivered) >= 20
    gateway.stop()
    with sqlite3.connect(database(gateway)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []

    gateway.start()
    with gateway.client() as client:
        everything = stored(client, sid)
        assert everything[: len(delivered)] == delivered  # persisted before delivered
        with client.stream(
            "GET", f"/v1/sessions/{sid}/events", headers=sse_headers(delivered[-1]["seq"])
        ) as stream:
            resumed = envelopes(read_frames(SseReader(stream), is_end))
        assert delivered + resumed == everything  # each event once, no gap
        assert contiguous(1, everything)
        turn = client.get(f"/v1/sessions/{sid}/turns/{turn_id}").json()
        assert turn["status"] == "failed"
        assert turn["error"]["kind"] == "interrupted"
        assert turn["error"]["reason"] == "gateway_restart"
        assert [e["type"] for e in everything if is_turn_end(e)] == ["turn.failed"]
