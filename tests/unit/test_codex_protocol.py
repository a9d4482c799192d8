"""JSON-RPC lines of app-server are classified and encoded without ``jsonrpc`` members."""

from __future__ import annotations

import json

import pytest

from app.providers.codex.protocol import (
    CLIENT_METHODS,
    CLIENT_NOTIFICATIONS,
    MethodNotAllowed,
    Notification,
    Response,
    ServerRequest,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
    parse_line,
)


def test_a_line_with_method_and_id_is_a_server_request_even_if_the_id_is_ours() -> None:
    # The server counts its own request ids from 0, independently of ours (reference §2.3).
    line = b'{"method":"item/fileChange/requestApproval","id":1,"params":{"threadId":"T"}}'
    assert parse_line(line) == ServerRequest(
        id=1, method="item/fileChange/requestApproval", params={"threadId": "T"}
    )


def test_notifications_and_responses() -> None:
    note = parse_line(b'{"method":"turn/started","params":{"threadId":"T"},"emittedAtMs":1}')
    assert note == Notification(method="turn/started", params={"threadId": "T"})
    assert isinstance(note, Notification)
    assert note.thread_id == "T"
    assert parse_line(b'{"method":"initialized"}') == Notification(method="initialized")
    assert parse_line(b'{"id":2,"result":{"ok":true}}') == Response(id=2, result={"ok": True})
    assert parse_line(b'{"id":"x","result":null}') == Response(id="x", result={})
    error = b'{"id":3,"error":{"code":-32600,"message":"Not initialized"}}'
    assert parse_line(error) == Response(id=3, error_code=-32600, error_message="Not initialized")


@pytest.mark.parametrize(
    "line",
    [b"WARNING: not json", b"[1,2]", b'{"result":{}}', b'{"id":true,"result":{}}', b"\xff"],
)
def test_junk_is_skipped(line: bytes) -> None:
    assert parse_line(line) is None


def test_thread_id_must_be_a_non_empty_string() -> None:
    assert ServerRequest(id=0, method="m", params={"threadId": ""}).thread_id is None
    assert Notification(method="m", params={"threadId": 5}).thread_id is None


def test_encoders_write_one_ascii_line() -> None:
    request = encode_request(
        7, "turn/start", {"input": [{"type": "text", "text": "a\nb \ud800 é"}]}
    )
    assert b"\n" not in request
    assert request.isascii()
    assert json.loads(request)["params"]["input"][0]["text"] == "a\nb \ud800 é"
    assert json.loads(request)["id"] == 7
    assert "jsonrpc" not in json.loads(request)
    assert json.loads(encode_notification("initialized")) == {"method": "initialized"}
    assert json.loads(encode_result(0, {"decision": "accept"})) == {
        "id": 0,
        "result": {"decision": "accept"},
    }
    assert json.loads(encode_error("r", -32601, "no")) == {
        "id": "r",
        "error": {"code": -32601, "message": "no"},
    }


def test_t15_only_the_gateway_vocabulary_can_be_encoded() -> None:
    assert {
        "initialize",
        "thread/start",
        "thread/resume",
        "thread/unsubscribe",
        "thread/loaded/list",
        "thread/turns/list",
        "thread/fork",
        "thread/delete",
        "turn/start",
        "turn/interrupt",
    } == CLIENT_METHODS
    for method in CLIENT_METHODS:
        assert json.loads(encode_request(1, method, {}))["method"] == method
    for method in ("command/exec", "thread/shellCommand", "fs/writeFile", "config/value/write"):
        with pytest.raises(MethodNotAllowed, match=method):
            encode_request(1, method, {})
    assert {"initialized"} == CLIENT_NOTIFICATIONS
    with pytest.raises(MethodNotAllowed):
        encode_notification("turn/start")
