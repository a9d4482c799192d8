"""The ``POST /v1/runs`` SSE stream is a subscriber like the session events stream.

It is capped (T13), ends visibly with ``evicted`` when its client stops reading (R8) and
with ``shutdown`` on SIGTERM (R13). The gateway runs as a child process with the fake
``claude``; the R8 and R13 tests share one (R13 stops it; a test after it starts it again).
"""

from __future__ import annotations

import http.client
import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory, fake_gateway_at
from tests.gateway import TOKEN, SseEvent, SseReader
from tests.integration.streams import (
    RetryRecordingReader,
    alive,
    contiguous,
    envelopes,
    is_delta,
    is_end,
    parse_sse,
    read_frames,
    small_window_socket,
)

AUTH = {"Authorization": f"Bearer {TOKEN}"}
SSE = {"Accept": "text/event-stream"}
PROBLEM = "application/problem+json"
GRACE_S = 10.0
MAX_LAG = 1000
"""Room for a reader that keeps up with a CLI printing 2,500 deltas a second (``deltas:N@R``);
a stalled reader passes it long before the run ends."""


@pytest.fixture(scope="module")
def shared_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGateway]:
    gateway = fake_gateway_at(
        tmp_path_factory.mktemp("runs"),
        limits={"subscriber_max_lag_events": MAX_LAG},
        # Every delta its own event: the flood must outrun a stalled reader by MAX_LAG events.
        server={"shutdown_grace_s": GRACE_S, "coalesce_deltas_ms": 0},
    )
    yield gateway
    gateway.stop()


@pytest.fixture
def gateway(shared_gateway: FakeGateway) -> FakeGateway:
    """The shared gateway, started again if a test stopped it."""
    if shared_gateway.process is None:
        shared_gateway.start()
    return shared_gateway


def run_body(gateway: FakeGateway, prompt: str) -> dict[str, Any]:
    return {"prompt": prompt, "workspace": str(gateway.workspace), "retry": {"enabled": False}}


def session_ids(client: httpx.Client) -> set[str]:
    response = client.get("/v1/sessions", params={"limit": 500})
    assert response.status_code == 200, response.text
    return {s["id"] for s in response.json()["sessions"]}


def assert_refused(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    problem: dict[str, Any] = response.json()
    assert problem["type"].endswith(":" + slug)
    assert int(response.headers["retry-after"]) >= 1
    return problem


def is_first_delta(frame: SseEvent) -> bool:
    return frame.event is None and is_delta(frame.json())


# --- T13: a run stream is a capped subscriber -------------------------------------------------


def test_t13_run_streams_count_towards_the_subscriber_caps_and_are_refused_beyond_them(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(
        limits={"max_subscribers_per_session": 1, "max_subscribers": 2}
    ).start()
    with gateway.client() as client:
        other = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)}).json()["id"]
        with client.stream("POST", "/v1/runs", json=run_body(gateway, "slow"), headers=SSE) as run:
            assert run.status_code == 200
            reader = SseReader(run)
            sid = envelopes(read_frames(reader, is_first_delta))[0]["session_id"]

            # The run stream holds its session's only slot.
            refused = client.get(f"/v1/sessions/{sid}/events", headers=SSE)
            problem = assert_refused(refused, 429, "rate_limited")
            assert problem["limit"] == 1

            with client.stream("GET", f"/v1/sessions/{other}/events", headers=SSE) as second:
                assert second.status_code == 200  # the gateway's last slot
                sessions, spawns = session_ids(client), len(gateway.spawns())
                refused = client.post("/v1/runs", json=run_body(gateway, "hi"), headers=SSE)
                problem = assert_refused(refused, 503, "at_capacity")
                assert problem["limit"] == 2
                assert "limits.max_subscribers" in problem["detail"]
                # Refused before anything happened: no session, no CLI.
                assert session_ids(client) == sessions
                assert len(gateway.spawns()) == spawns
                # A run answered as JSON is no subscriber and is not capped.
                answered = client.post("/v1/runs", json=run_body(gateway, "hi"))
                assert answered.status_code == 200, answered.text
                assert answered.json()["final_text"] == "fake reply"

            assert client.post(f"/v1/sessions/{sid}/interrupt").status_code == 202
            tail = list(reader)  # the run's stream ends after its last event, no frame
        assert tail[-1].event is None
        assert tail[-1].json()["type"] == "turn.interrupted"
        assert all(frame.event is None for frame in tail)


# --- R8: a run stream that stops reading is evicted, and resumes on the session stream ---------


class _SmallWindow(http.client.HTTPConnection):
    """A client whose receive window is tiny, so the gateway's writes back up quickly."""

    def connect(self) -> None:
        self.sock = small_window_socket(self.host, self.port)


def test_r8_a_run_stream_that_stops_reading_is_evicted_and_resumes_on_the_session_stream(
    gateway: FakeGateway,
) -> None:
    with gateway.client() as client:
        before = session_ids(client)
        stalled = _SmallWindow("127.0.0.1", gateway.port, timeout=30)
        body = json.dumps(run_body(gateway, "deltas:5000@2500"))
        headers = {**AUTH, **SSE, "Content-Type": "application/json"}
        stalled.request("POST", "/v1/runs", body=body, headers=headers)
        response = stalled.getresponse()  # from now on, not read until the run has ended
        assert response.status == 200
        (sid,) = session_ids(client) - before
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=SSE) as normal:
            everything = envelopes(read_frames(SseReader(normal), is_end))
        newest = everything[-1]["seq"]
        assert contiguous(1, everything)
        assert everything[-1]["type"] == "turn.completed"  # eviction did not stop the run

        frames = parse_sse(response.read().decode())
        stalled.close()
        assert frames[-1].event == "evicted"
        sent = envelopes(frames[:-1])
        assert json.loads(frames[-1].data) == {
            "type": "evicted",
            "last_seq_sent": sent[-1]["seq"],
            "reason": "lagging",
        }
        assert contiguous(1, sent)
        assert sent[-1]["seq"] < newest - MAX_LAG
        resume = {**SSE, "Last-Event-ID": str(sent[-1]["seq"])}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=resume) as again:
            rest = envelopes(read_frames(SseReader(again), lambda f: f.id == str(newest)))
        assert sent + rest == everything
        turns = client.get(f"/v1/sessions/{sid}/turns").json()["turns"]
        assert [t["status"] for t in turns] == ["completed"]
    assert "evicted" in gateway.log()


# --- R13: SIGTERM ends a run stream with the shutdown frame -----------------------------------


def test_r13_sigterm_ends_a_run_stream_with_the_shutdown_frame_after_the_interrupted_turn(
    gateway: FakeGateway,
) -> None:
    assert gateway.process is not None
    with gateway.client() as client:
        with client.stream("POST", "/v1/runs", json=run_body(gateway, "slow"), headers=SSE) as run:
            assert run.status_code == 200
            reader = RetryRecordingReader(run)
            head = read_frames(reader, is_first_delta)
            sid = envelopes(head)[0]["session_id"]
            cli_pid = client.get(f"/v1/sessions/{sid}").json()["process"]["pid"]
            signalled = time.monotonic()
            gateway.process.send_signal(signal.SIGTERM)

            tail = read_frames(reader, lambda f: f.event == "shutdown")
            assert list(reader) == []  # and the stream ends
            ended_after = time.monotonic() - signalled
        assert json.loads(tail[-1].data) == {
            "type": "shutdown",
            "reason": "gateway_shutdown",
            "retry_ms": 5000,
        }
        assert reader.retries[-1] == "5000"
        streamed = envelopes(head + tail)
        assert contiguous(1, streamed)  # every event of the run, none lost before the frame
        assert streamed[-1]["type"] == "turn.interrupted"
        assert "gateway_shutdown" in json.dumps(streamed[-1]["data"])
        code = gateway.process.wait(timeout=GRACE_S + 10)
    assert code == 0
    assert ended_after < GRACE_S / 2  # liveness bound only
    assert not alive(cli_pid)
    gateway.stop()
