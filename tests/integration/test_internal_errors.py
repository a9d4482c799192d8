"""T25: an unexpected error is answered with an id only, logged once under that id, and the
request ends there: the server never sees the exception (it would log its traceback again and
cut the connection)."""

from __future__ import annotations

import sqlite3

from tests.fakes.gateway import FakeGateway
from tests.gateway import log_lines
from tests.integration.callers import create


def test_t25_an_unexpected_error_is_one_problem_with_an_id_and_one_log_record(
    fake_gateway: FakeGateway,
) -> None:
    with fake_gateway.client() as client:
        sid = create(client, fake_gateway)
        # A row no request could have written: reading it back fails unexpectedly.
        with sqlite3.connect(fake_gateway.data_dir / "gateway.db") as db:
            db.execute("UPDATE sessions SET retry = '[1]' WHERE id = ?", (sid,))
        failed = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
        assert failed.status_code == 500, failed.text
        assert failed.headers["content-type"] == "application/problem+json"
        problem = failed.json()
        error_id = problem["error_id"]
        assert problem["detail"].startswith(f"internal error, id {error_id}")
        assert "attribute" not in failed.text
        assert failed.headers.get("connection") != "close"
        # The same connection goes on serving.
        after = client.get("/v1/providers")
        assert after.status_code == 200
        assert after.extensions["network_stream"] is failed.extensions["network_stream"]
    errors = [r for r in log_lines(fake_gateway) if r.get("level") == "error"]
    assert [r.get("error_id") for r in errors] == [error_id], errors
    assert "Exception in ASGI application" not in fake_gateway.log()
