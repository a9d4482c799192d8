"""The gateway on PostgreSQL, as a real process on a private server: serve migrates an empty
database (several processes at once, under the advisory lock), sessions, turns and the event
log work and survive a restart, and a server that goes away answers 503
``storage_unavailable`` and fails the turn whose events cannot be stored, then everything
works again once it is back, without a restart of the gateway."""

from __future__ import annotations

import os
from pathlib import Path

from alembic.script import ScriptDirectory

from app.store.schema import MIGRATIONS_DIR
from tests.dbservers import PostgresServer
from tests.fakes.gateway import FakeGatewayFactory, fake_gateway_at
from tests.gateway import SseReader, migrate_at_once
from tests.integration.callers import PROBLEM, create
from tests.integration.streams import (
    contiguous,
    envelopes,
    is_delta,
    is_end,
    read_frames,
    sse_headers,
    start_turn,
    stored,
    wait_until,
)

HEAD = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()


def test_serve_migrates_an_empty_database_and_keeps_sessions_across_a_restart(
    make_fake_gateway: FakeGatewayFactory, postgres: PostgresServer
) -> None:
    postgres.create_database("serve_empty")
    gateway = make_fake_gateway(storage={"url": postgres.url("serve_empty")}).start()
    with gateway.client() as client:
        sid = create(client, gateway)
        start_turn(client, sid, "hi")
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers()) as r:
            delivered = envelopes(read_frames(SseReader(r), is_end))
        assert delivered[-1]["type"] == "turn.completed"
        assert any(is_delta(event) for event in delivered)
        assert stored(client, sid) == delivered
    gateway.stop()
    assert not (gateway.data_dir / "gateway.db").exists()  # nothing went to a SQLite file

    gateway.start()
    with gateway.client() as client:
        assert stored(client, sid) == delivered  # the same events, same seqs, same payloads
        session = client.get(f"/v1/sessions/{sid}").json()
        assert session["status"] == "idle"
        start_turn(client, sid, "hi")
        with client.stream(
            "GET", f"/v1/sessions/{sid}/events", headers=sse_headers(delivered[-1]["seq"])
        ) as r:
            second = envelopes(read_frames(SseReader(r), is_end))
        assert second[-1]["type"] == "turn.completed"
        assert contiguous(1, stored(client, sid))
    gateway.stop()


def test_processes_migrating_one_empty_database_at_once_all_find_it_at_head(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    postgres.create_database("migrate_race")
    url = postgres.url("migrate_race")
    env = {"GATEWAY_STORAGE__URL": url, "GATEWAY_STORAGE__DATA_DIR": str(tmp_path)}
    said = migrate_at_once({**_clean_env(), **env})
    assert sum("created" in line for line in said) == 1, said  # one migrated, two found it done
    assert postgres.query("migrate_race", "SELECT version_num FROM alembic_version") == [(HEAD,)]


def test_a_postgres_server_that_goes_away_answers_503_fails_the_turn_and_recovers(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    with PostgresServer(tmp_path / "own-postgres") as server:
        server.create_database("gateway")
        gateway = make_fake_gateway(storage={"url": server.url("gateway")}).start()
        statuses: list[int] = []
        with gateway.client() as client:
            sid = create(client, gateway)
            start_turn(client, sid, "slow")
            with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers()) as r:
                reader = SseReader(r)
                delivered = envelopes(read_frames(reader, lambda f: is_delta(f.json())))
                server.stop()
                try:
                    create_answer = client.post(
                        "/v1/sessions", json={"workspace": str(gateway.workspace)}
                    )
                    statuses.append(create_answer.status_code)
                    assert create_answer.status_code == 503, create_answer.text
                    assert create_answer.headers["content-type"] == PROBLEM
                    assert create_answer.json()["type"].endswith(":storage_unavailable")
                    assert int(create_answer.headers["retry-after"]) >= 1
                    assert "Traceback" not in create_answer.text
                    turn_start = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
                    statuses.append(turn_start.status_code)
                    assert turn_start.status_code in (409, 503), turn_start.text
                    ready = client.get("/readyz")
                    assert ready.status_code == 503, ready.text
                    assert ready.json()["checks"]["database"].startswith("error")
                finally:
                    server.start()
                # Back: the failed turn's end is recorded, then sent.
                delivered += envelopes(read_frames(reader, is_end))
            assert delivered[-1]["type"] == "turn.failed"
            assert delivered[-1]["data"]["error"]["reason"] == "storage_unavailable"
            everything = stored(client, sid)
            assert delivered == everything[: len(delivered)]  # nothing sent that is not stored
            assert contiguous(1, everything)

            def created() -> bool:
                answer = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
                statuses.append(answer.status_code)
                return answer.status_code == 201

            wait_until(created, what="a session created once PostgreSQL is back")
            assert client.get("/readyz").json()["checks"]["database"] == "ok"
            start_turn(client, sid, "hi")
            with client.stream(
                "GET", f"/v1/sessions/{sid}/events", headers=sse_headers(everything[-1]["seq"])
            ) as r:
                assert envelopes(read_frames(SseReader(r), is_end))[-1]["type"] == (
                    "turn.completed"
                )
        assert set(statuses) <= {201, 409, 503}, statuses
        gateway.stop()


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}


def test_a_postgres_server_that_stops_answering_fails_calls_within_the_timeout(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    """A server that hangs (SIGSTOP: a partition, a stuck host) is as unavailable as one that
    is gone once ``storage.timeout_s`` passes; no request hangs on it."""
    with PostgresServer(tmp_path / "own-postgres") as server:
        server.create_database("gateway")
        storage = {"url": server.url("gateway"), "timeout_s": 2}
        gateway = make_fake_gateway(storage=storage).start()
        with gateway.client() as client:  # its 30 s would outlast a hang of 2 s
            sid = create(client, gateway)
            server.pause()
            try:
                answer = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
                assert answer.status_code == 503, answer.text
                assert answer.json()["type"].endswith(":storage_unavailable")
                assert client.get(f"/v1/sessions/{sid}").status_code == 503
            finally:
                server.resume()

            def created() -> bool:
                again = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
                return again.status_code == 201

            wait_until(created, what="a session created once PostgreSQL answers again")
            assert client.get(f"/v1/sessions/{sid}").json()["id"] == sid
        gateway.stop()


def test_a_second_gateway_on_one_postgres_database_without_a_cluster_is_refused(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    url = postgres.create_database("sole")
    first = fake_gateway_at(tmp_path / "first", storage={"url": url})
    second = fake_gateway_at(tmp_path / "second", storage={"url": url})
    try:
        first.start()
        second.data_dir.mkdir(parents=True)
        refused = second.command("serve", check=False)
        assert refused.returncode == 5, refused.stdout + refused.stderr
        assert "another gateway already serves" in refused.stderr
        assert "[cluster] redis_url" in refused.stderr
        assert "Traceback" not in refused.stderr
        first.stop()
        second.start()  # the database is free once its gateway is gone
        with second.client() as client:
            assert client.get("/readyz").status_code == 200
    finally:
        first.stop()
        second.stop()
