"""Threat model T17, T20 and T21 (SECURITY.md) against a running gateway over real sockets.

T17: connections that never finish their request are closed by the head deadline and the
body rate, so they cannot hold ``server.limit_concurrency`` slots; T20: malformed input that
was a 500, a traceback or an ERROR line (a path component over the name limit, a binary
WebSocket frame, refused upgrades); T21: the request target counts in the head limit.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import TOKEN

HEAD_TIMEOUT_S = 1.0
BODY_RATE = 100.0
AUTH = f"Authorization: Bearer {TOKEN}\r\n".encode()


@pytest.fixture
def gateway(make_fake_gateway: FakeGatewayFactory) -> FakeGateway:
    return make_fake_gateway(
        server={
            "limit_concurrency": 6,
            "request_head_timeout_s": HEAD_TIMEOUT_S,
            "request_body_min_rate_bytes_s": BODY_RATE,
        },
        limits={"max_subscribers_per_session": 1},
    ).start()


_OPENED: list[socket.socket] = []
"""Every slow client's socket, closed after each test however it ends."""


@pytest.fixture(autouse=True)
def _close_slow_sockets() -> Iterator[None]:
    yield
    while _OPENED:
        _OPENED.pop().close()


@dataclass
class Slow:
    """A client that opens a connection and then sends ``trickle`` one byte at a time, one
    whenever the server has said nothing for a while, for as long as it stays open."""

    name: str
    first: bytes = b""
    trickle: bytes = b""
    sock: socket.socket = field(init=False)
    answer: bytes = b""
    closed_after_s: float | None = None

    def open(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        _OPENED.append(self.sock)
        if self.first:
            self.sock.sendall(self.first)


def run_until_closed(slows: list[Slow], *, limit_s: float) -> None:
    """Keep every slow client trickling until the server closes it (or ``limit_s`` passes)."""
    started = time.monotonic()
    open_ = {s.sock: s for s in slows}
    sent = {s.name: 0 for s in slows}
    while open_ and time.monotonic() - started < limit_s:
        readable, _, _ = select.select(list(open_), [], [], 0.2)  # the server's move, if any
        for sock in readable:
            slow = open_[sock]
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            slow.answer += chunk
            if not chunk:
                slow.closed_after_s = time.monotonic() - started
                del open_[sock]
        for slow in open_.values():  # the client's move: one more byte
            if sent[slow.name] < len(slow.trickle):
                slow.sock.sendall(slow.trickle[sent[slow.name] : sent[slow.name] + 1])
                sent[slow.name] += 1
    for slow in slows:
        slow.sock.close()


@pytest.fixture
def slow_clients(gateway: FakeGateway) -> list[Slow]:
    body_head = (
        b"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + AUTH + b"Content-Type: "
        b"application/json\r\nContent-Length: 4096\r\n\r\n"
    )
    slows = [
        Slow("silent"),
        Slow("header trickle", b"GET /v1/sessions HTTP/1.1\r\n", b"X-Slow: " + b"a" * 4000),
        Slow("body trickle", body_head, b'{"workspace": "' + b"a" * 4000),
    ]
    return slows


def test_t17_slow_connections_are_closed_by_the_deadline_and_hold_no_slot(
    gateway: FakeGateway, slow_clients: list[Slow]
) -> None:
    # A kept-alive connection: one request answered, then the next one trickles in.
    kept = Slow("kept-alive trickle", trickle=b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 4000)
    kept.open(gateway.port)
    kept.sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    first = b""
    while b'{"status":"ok"}' not in first:
        chunk = kept.sock.recv(65536)
        assert chunk, first
        first += chunk
    assert first.startswith(b"HTTP/1.1 200"), first
    for slow in slow_clients:
        slow.open(gateway.port)
    # Four slow connections are open and the limit is 6: a good request is served meanwhile.
    assert httpx.get(gateway.base_url + "/healthz").status_code == 200
    every = [*slow_clients, kept]
    run_until_closed(every, limit_s=30)
    for slow in every:
        assert slow.closed_after_s is not None, f"{slow.name} was never closed"
        assert slow.answer.startswith(b"HTTP/1.1 408 "), (slow.name, slow.answer[:200])
        problem = json.loads(slow.answer.split(b"\r\n\r\n", 1)[1])
        assert problem["type"].endswith(":request_timeout"), problem
        # Closed by the deadline, long before a trickle of 4,000 bytes every 0.2 s would end.
        assert slow.closed_after_s < 10 * HEAD_TIMEOUT_S, (slow.name, slow.closed_after_s)
    assert (
        "request_head_timeout_s" in json.loads(every[0].answer.split(b"\r\n\r\n", 1)[1])["detail"]
    )
    assert (
        "request_body_min_rate_bytes_s"
        in json.loads(every[2].answer.split(b"\r\n\r\n", 1)[1])["detail"]
    )
    with gateway.client() as client:  # the trickled body created nothing
        assert client.get("/v1/sessions").json()["sessions"] == []
    assert "Traceback" not in gateway.log()


def test_t17_a_full_house_of_silent_sockets_is_cleared_by_the_deadline(
    gateway: FakeGateway,
) -> None:
    """The reported case: as many silent sockets as the limit allows made every request,
    /healthz included, a 503 for as long as they stayed; now only until the deadline."""
    silent = [Slow(f"silent {n}") for n in range(6)]
    for slow in silent:
        slow.open(gateway.port)
    run_until_closed(silent, limit_s=30)
    assert all(s.answer.startswith(b"HTTP/1.1 408 ") for s in silent)
    assert httpx.get(gateway.base_url + "/healthz").status_code == 200


def test_t21_the_request_target_counts_in_the_head_limit(gateway: FakeGateway) -> None:
    def head(target: bytes, extra: bytes = b"") -> bytes:
        request = b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        request += AUTH + extra + b"\r\n"  # read to the end: closed after the answer
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
            sock.sendall(request)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        return answer

    long_query = head(b"/v1/sessions?limit=5&" + b"x" * 100_000)
    assert long_query.startswith(b"HTTP/1.1 414 "), long_query[:200]
    assert b"target_too_long" in long_query
    fields = b"".join(b"X-F%d: %s\r\n" % (n, b"v" * 900) for n in range(30))  # 27 KB
    together = head(b"/v1/sessions?limit=5&before=" + b"1" * 7000, fields)
    assert together.startswith(b"HTTP/1.1 431 "), together[:200]
    assert head(b"/v1/sessions?limit=5", fields).startswith(b"HTTP/1.1 200 ")


def test_t20_a_path_component_over_the_name_limit_is_a_workspace_rejection(
    gateway: FakeGateway,
) -> None:
    workspace = f"{gateway.workspace}/{'a' * 300}"
    with gateway.client() as client:
        for path, body in (
            ("/v1/sessions", {"workspace": workspace}),
            ("/v1/runs", {"workspace": workspace, "prompt": "hi"}),
        ):
            refused = client.post(path, json=body)
            assert refused.status_code == 422, refused.text
            assert refused.json()["type"].endswith(":workspace_rejected")
            assert "File name too long" in refused.json()["detail"]
    assert gateway.spawns() == []
    assert "Traceback" not in gateway.log()


def drain(ws: Any) -> None:
    """Read frames until the server closes the connection (raises ``ConnectionClosed``)."""
    while True:
        ws.recv(timeout=10)


def test_t20_a_binary_websocket_frame_is_closed_with_1003(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        sid = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)}).json()["id"]
    url = f"{gateway.ws_url}/v1/sessions/{sid}/ws"
    with connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "session.created"
        ws.send(b'{"type": "turn.interrupt"}')
        with pytest.raises(ConnectionClosed) as closed:
            drain(ws)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1003
    assert "JSON in text frames" in closed.value.rcvd.reason
    assert "Traceback" not in gateway.log()


def test_t20_refused_upgrades_are_logged_at_info_with_the_reason(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        sid = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)}).json()["id"]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    url = f"{gateway.ws_url}/v1/sessions/{sid}/ws"
    refusals: list[tuple[str, dict[str, str], int]] = [
        (url, {}, 401),
        (url, {**auth, "Origin": "https://evil.example"}, 403),
        (f"{gateway.ws_url}/v1/sessions/ses_missing/ws", auth, 404),
    ]
    with connect(url, additional_headers=auth) as held:  # the session's one subscriber slot
        held.recv(timeout=10)
        refusals.append((url, auth, 429))
        for target, headers, status in refusals:
            with pytest.raises(InvalidStatus) as refused:
                connect(target, additional_headers=headers, open_timeout=10)
            assert refused.value.response.status_code == status
    lines: list[dict[str, Any]] = [
        json.loads(line) for line in gateway.log().splitlines() if line.startswith("{")
    ]
    assert [line for line in lines if line["level"] == "error"] == []
    reasons = [
        line["msg"] for line in lines if "refused" in line["msg"] and "websocket" in line["msg"]
    ]
    for expected in ("unauthorized (401)", "origin_not_allowed (403)", "not_found (404)"):
        assert any(expected in reason for reason in reasons), (expected, reasons)
    assert any("(429)" in reason for reason in reasons), reasons
    assert {line["level"] for line in lines if line["msg"] in reasons} == {"info"}


def test_t17_a_client_still_sending_when_its_deadline_passes_reads_its_408(
    gateway: FakeGateway,
) -> None:
    """The connection lingers after its 408: bytes still arriving are dropped, not answered
    with a reset that would destroy the 408 before the client reads it."""
    slow = Slow("busy trickle", b"GET /healthz HTTP/1.1\r\n")
    slow.open(gateway.port)
    slow.sock.setblocking(False)
    answer = b""
    deadline = time.monotonic() + 10 * HEAD_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(BlockingIOError):
            slow.sock.send(b"X-Busy: 1\r\n")  # never the blank line that ends the head
        readable, _, _ = select.select([slow.sock], [], [], 0.005)
        if readable:
            chunk = slow.sock.recv(65536)  # a reset here (ConnectionResetError) fails the test
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["type"].endswith(":request_timeout")
