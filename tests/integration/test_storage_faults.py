"""Storage faults, against a real gateway process on a real SQLite file: a database that
cannot be written answers 503 and stops the turn (R12); a second process writing the same
database causes no 5xx and no "locked" errors (R11)."""

from __future__ import annotations

import resource
import sqlite3
import subprocess
import sys

import httpx

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import SseReader
from tests.integration.callers import PROBLEM, create
from tests.integration.streams import (
    alive,
    contiguous,
    database,
    envelopes,
    is_delta,
    is_end,
    last_seq,
    read_frames,
    sse_headers,
    start_turn,
    stored,
    wait_until,
)

# --- R12: disk full / write errors ------------------------------------------------------------


def test_r12_a_database_that_cannot_be_written_answers_503_and_stops_the_turn(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    """The gateway may not grow any file past its current size (RLIMIT_FSIZE: writes fail
    with EFBIG, as on a full disk), then the limit is lifted again."""
    gateway = make_fake_gateway().start()
    assert gateway.process is not None
    pid = gateway.process.pid
    statuses: list[int] = []
    with gateway.client() as client:
        sid = create(client, gateway)
        turn_id = start_turn(client, sid, "slow")
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers()) as r:
            reader = SseReader(r)
            delivered = envelopes(read_frames(reader, lambda f: is_delta(f.json())))
            cli_pid = client.get(f"/v1/sessions/{sid}").json()["process"]["pid"]
            files = [database(gateway), database(gateway).with_name("gateway.db-wal")]
            limit = max(f.stat().st_size for f in files if f.exists())
            soft, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, hard))
            try:

                def refused() -> httpx.Response | None:
                    response = client.post(
                        "/v1/sessions", json={"workspace": str(gateway.workspace)}
                    )
                    statuses.append(response.status_code)
                    return response if response.status_code == 503 else None

                answer = wait_until(refused, what="a 503 while the disk is full")
                assert answer.headers["content-type"] == PROBLEM
                assert answer.json()["type"].endswith(":storage_unavailable")
                assert int(answer.headers["retry-after"]) >= 1
                assert "Traceback" not in answer.text
                # The turn whose events cannot be stored stops its CLI.
                wait_until(lambda: not alive(cli_pid), what="the CLI to be stopped")
                turn_start = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
                statuses.append(turn_start.status_code)
                assert turn_start.status_code in (409, 503), turn_start.text
            finally:
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))
            # Writable again: the turn's end is recorded, then sent.
            delivered += envelopes(read_frames(reader, is_end))
        assert set(statuses) <= {201, 409, 503}
        failed = delivered[-1]
        assert failed["type"] == "turn.failed"
        assert failed["data"]["error"]["reason"] == "storage_unavailable"
        everything = stored(client, sid)
        assert delivered == everything[: len(delivered)]  # nothing sent that is not stored
        assert contiguous(1, everything)
        turn = client.get(f"/v1/sessions/{sid}/turns/{turn_id}").json()
        assert turn["status"] == "failed"
        assert (
            client.post("/v1/sessions", json={"workspace": str(gateway.workspace)}).status_code
            == 201
        )
        start_turn(client, sid, "hi")
        with client.stream(
            "GET", f"/v1/sessions/{sid}/events", headers=sse_headers(everything[-1]["seq"])
        ) as r:
            assert envelopes(read_frames(SseReader(r), is_end))[-1]["type"] == "turn.completed"
    with sqlite3.connect(database(gateway)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# --- R11: SQLite contention from a second process ---------------------------------------------

HAMMER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
db.execute("PRAGMA busy_timeout=30000")
db.execute("CREATE TABLE IF NOT EXISTS hammer (id INTEGER PRIMARY KEY, at REAL)")
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO hammer (at) VALUES (?)", (time.time(),))
    time.sleep(0.02)  # hold the write lock, as a long transaction would
    db.execute("COMMIT")
    time.sleep(0.005)
"""


def test_r11_a_second_writer_on_the_database_causes_no_5xx_and_no_locked_errors(
    fake_gateway: FakeGateway,
) -> None:
    gateway = fake_gateway
    hammer = subprocess.Popen(
        [sys.executable, "-c", HAMMER, str(database(gateway)), "60"], stdout=subprocess.DEVNULL
    )
    statuses: list[int] = []
    try:
        with sqlite3.connect(database(gateway)) as db:
            wait_until(
                lambda: db.execute(
                    "SELECT count(*) FROM sqlite_master WHERE name = 'hammer'"
                ).fetchone()[0],
                what="the second writer to start",
            )
        with gateway.client() as client:
            for _ in range(2):
                created = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
                statuses.append(created.status_code)
                sid = created.json()["id"]
                for _ in range(2):
                    after = last_seq(client, sid)
                    started = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
                    statuses.append(started.status_code)
                    with client.stream(
                        "GET", f"/v1/sessions/{sid}/events", headers=sse_headers(after)
                    ) as r:
                        events = envelopes(read_frames(SseReader(r), is_end))
                    assert events[-1]["type"] == "turn.completed"
                    statuses.append(r.status_code)
                statuses.append(client.delete(f"/v1/sessions/{sid}").status_code)
            with sqlite3.connect(database(gateway)) as db:
                during = db.execute("SELECT count(*) FROM hammer").fetchone()[0]
    finally:
        hammer.terminate()
        hammer.wait(timeout=10)
    assert during > 20  # the other process held the write lock throughout
    assert all(status < 500 for status in statuses), statuses
    log = gateway.log()
    assert "database is locked" not in log
    assert "storage unavailable" not in log
    assert " 500 " not in log
    assert " 503 " not in log
