"""Threat model T23 (SECURITY.md): a rotated admin token is masked from the moment it is
issued, and what was opened with the old one stops.

One real gateway without ``server.token`` (its admin key is ``<data_dir>/token``) and two
named keys; the token is rotated the way ``agent-gateway token rotate`` does it, by replacing
the file, while the gateway runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from app.api.security import write_token_file
from tests.fakes.gateway import FakeGateway, FileTokenGateway, fake_gateway_at
from tests.gateway import SseReader, is_turn_end
from tests.integration.callers import ALICE, KEYS, as_key, new_session


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[FakeGateway]:
    gateway = fake_gateway_at(tmp_path, gateway_class=FileTokenGateway, server=KEYS)
    gateway.start()
    yield gateway
    gateway.stop()


def admin_token(gateway: FakeGateway) -> str:
    return (gateway.data_dir / "token").read_text().strip()


def rotate(gateway: FakeGateway) -> str:
    """Replace the token file as ``agent-gateway token rotate`` does; the new token."""
    return write_token_file(gateway.data_dir / "token")


def until_closed(ws: ClientConnection) -> tuple[list[dict[str, Any]], ConnectionClosed]:
    """The frames the server sends until it closes the connection, and how it closed it."""
    frames = []
    while True:
        try:
            frames.append(json.loads(ws.recv(timeout=10)))
        except ConnectionClosed as closed:
            return frames, closed


def test_t23_a_token_issued_while_the_gateway_runs_is_masked_in_what_is_stored_next(
    gateway: FakeGateway,
) -> None:
    old = admin_token(gateway)
    new = rotate(gateway)
    # Nobody has used the new token yet: the gateway learns it from the file itself.
    with as_key(gateway, ALICE) as alice:
        sid = new_session(alice, gateway.workspace)
        headers = {"Accept": "text/event-stream"}
        with alice.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as stream:
            prompt = f"remember {new} and {old} and {new.encode().hex()}"
            started = alice.post(f"/v1/sessions/{sid}/turns", json={"prompt": prompt})
            assert started.status_code == 202, started.text
            live = json.dumps(SseReader(stream).until(is_turn_end))
        page = alice.get(f"/v1/sessions/{sid}/events").text
    for shown in (live, page):
        assert "remember [redacted] and [redacted] and [redacted]" in shown
        assert new not in shown
        assert old not in shown


def test_t23_a_websocket_opened_with_a_rotated_token_starts_no_turn(
    gateway: FakeGateway,
) -> None:
    old = admin_token(gateway)
    with as_key(gateway, old) as admin:
        sid = new_session(admin, gateway.workspace)
    url = f"{gateway.ws_url}/v1/sessions/{sid}/ws?access_token={old}"
    with connect(url, open_timeout=10) as ws:
        new = rotate(gateway)
        ws.send(json.dumps({"type": "turn.start", "prompt": "hello"}))
        frames, closed = until_closed(ws)
    assert "ack" not in [frame["type"] for frame in frames]
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1008
    assert "no longer valid" in closed.rcvd.reason
    assert gateway.spawns() == []  # no CLI was started
    with as_key(gateway, new) as admin:
        assert admin.get(f"/v1/sessions/{sid}/turns").json()["turns"] == []
        assert admin.get(f"/v1/sessions/{sid}").status_code == 200


@pytest.mark.parametrize("by_query", [False, True])
def test_t23_an_event_stream_opened_with_a_rotated_token_ends(
    gateway: FakeGateway, by_query: bool
) -> None:
    old = admin_token(gateway)
    with as_key(gateway, old) as admin:
        sid = new_session(admin, gateway.workspace)
    params = {"access_token": old} if by_query else {}
    headers = {"Accept": "text/event-stream"}
    if not by_query:
        headers["Authorization"] = f"Bearer {old}"
    with (
        httpx.Client(base_url=gateway.base_url, timeout=30.0) as client,
        client.stream(
            "GET", f"/v1/sessions/{sid}/events", headers=headers, params=params
        ) as stream,
    ):
        assert stream.status_code == 200
        reader = SseReader(stream)
        rotate(gateway)
        # No request comes meanwhile: the stream still ends, with the frame saying why.
        messages = list(reader)
    assert [m.event for m in messages][-1:] == ["evicted"]
    assert messages[-1].json()["reason"] == "key_retired"


def test_t23_an_acp_connection_opened_with_a_rotated_token_runs_nothing(
    gateway: FakeGateway,
) -> None:
    old = admin_token(gateway)
    with connect(f"{gateway.ws_url}/v1/acp?access_token={old}", open_timeout=10) as ws:
        initialize = {"protocolVersion": 1, "clientCapabilities": {}}
        ws.send(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize})
        )
        assert "result" in json.loads(ws.recv(timeout=10))
        new = rotate(gateway)
        params = {"cwd": str(gateway.workspace), "mcpServers": []}
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": params}))
        frames, closed = until_closed(ws)
    assert frames == []
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1008
    with as_key(gateway, new) as admin:
        assert admin.get("/v1/sessions").json()["sessions"] == []
