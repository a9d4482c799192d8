"""Following a running gateway's events: SSE messages and WebSocket frames read up to the one
a test waits for, cursors, and what the store holds."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.frames import Close
from websockets.sync.client import ClientConnection

from tests.fakes.gateway import FakeGateway
from tests.gateway import TOKEN, SseEvent, SseReader, is_turn_end
from tests.gateway import wait_until as poll_until

AUTH = {"Authorization": f"Bearer {TOKEN}"}

wait_until = partial(poll_until, timeout=20.0)


def create(client: httpx.Client, gateway: FakeGateway) -> str:
    response = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
    assert response.status_code == 201, response.text
    session_id: str = response.json()["id"]
    return session_id


def start_turn(client: httpx.Client, sid: str, prompt: str) -> str:
    response = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": prompt})
    assert response.status_code == 202, response.text
    turn_id: str = response.json()["id"]
    return turn_id


def last_seq(client: httpx.Client, sid: str) -> int:
    value: int = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
    return value


def stored(client: httpx.Client, sid: str, after: int = 0) -> list[dict[str, Any]]:
    """Every stored event after ``after``, paging through the JSON API."""
    events: list[dict[str, Any]] = []
    while True:
        page = client.get(f"/v1/sessions/{sid}/events", params={"after": after, "limit": 1000})
        assert page.status_code == 200, page.text
        batch = page.json()["events"]
        events += batch
        if not batch:
            return events
        after = batch[-1]["seq"]


def sse_headers(after: int | None = None) -> dict[str, str]:
    headers = {"Accept": "text/event-stream"}
    if after is not None:
        headers["Last-Event-ID"] = str(after)
    return headers


def read_frames(frames: Iterator[SseEvent], stop: Callable[[SseEvent], bool]) -> list[SseEvent]:
    """SSE messages up to and including the first one ``stop`` accepts."""
    seen: list[SseEvent] = []
    for frame in frames:
        seen.append(frame)
        if stop(frame):
            return seen
    raise AssertionError(f"stream ended early after {[(f.event, f.id) for f in seen]}")


def envelopes(frames: list[SseEvent]) -> list[dict[str, Any]]:
    """The event envelopes among SSE messages (control frames have an ``event:`` name)."""
    out = []
    for frame in frames:
        if frame.event is None:
            envelope = frame.json()
            assert frame.id == str(envelope["seq"])
            out.append(envelope)
    return out


class RetryRecordingReader(SseReader):
    """An ``SseReader`` that also records every ``retry:`` hint it reads."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(response)
        self.retries: list[str] = []

        def lines() -> Iterator[str]:
            for line in response.iter_lines():
                if line.startswith("retry:"):
                    self.retries.append(line.partition(":")[2].strip())
                yield line

        self._lines = lines()


def turn_events(client: httpx.Client, sid: str, after: int = 0) -> list[dict[str, Any]]:
    """The session's events from ``after`` to the end of the next turn, over SSE."""
    with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(after)) as r:
        return envelopes(read_frames(SseReader(r), is_end))


def is_end(frame: SseEvent) -> bool:
    return frame.event is None and is_turn_end(frame.json())


def seqs(events: list[dict[str, Any]]) -> list[int]:
    return [e["seq"] for e in events]


def contiguous(first: int, events: list[dict[str, Any]]) -> bool:
    return seqs(events) == list(range(first, first + len(events)))


def ws_url(gateway: FakeGateway, sid: str, after: int | None = None) -> str:
    query = "" if after is None else f"?after={after}"
    return f"{gateway.ws_url}/v1/sessions/{sid}/ws{query}"


def ws_frames(ws: ClientConnection, stop: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """Frames up to and including the first one ``stop`` accepts."""
    seen: list[dict[str, Any]] = []
    while True:
        frame = json.loads(ws.recv(timeout=20))
        seen.append(frame)
        if stop(frame):
            return seen


def recv_until_closed(ws: ClientConnection) -> tuple[list[dict[str, Any]], Close]:
    """Every frame until the server closes the connection, and its close frame."""
    frames: list[dict[str, Any]] = []

    def receive_all() -> None:
        while True:
            frames.append(json.loads(ws.recv(timeout=20)))

    with pytest.raises(ConnectionClosed) as closed:
        receive_all()
    assert closed.value.rcvd is not None, "closed without a close frame"
    return frames, closed.value.rcvd


def is_delta(envelope: dict[str, Any]) -> bool:
    return envelope.get("type") == "message.delta"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ", 1)[1][0] != "Z"


def database(gateway: FakeGateway) -> Path:
    return gateway.data_dir / "gateway.db"


def small_window_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    sock.settimeout(30)
    sock.connect((host, port))
    return sock


def parse_sse(text: str) -> list[SseEvent]:
    frames = []
    for block in text.split("\n\n"):
        fields: dict[str, list[str]] = {}
        for line in block.splitlines():
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields.setdefault(name, []).append(value.removeprefix(" "))
        if "data" in fields:
            frames.append(
                SseEvent(
                    id=fields.get("id", [None])[-1],
                    event=fields.get("event", [None])[-1],
                    data="\n".join(fields["data"]),
                )
            )
    return frames
