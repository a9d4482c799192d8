"""tests/dbservers.py: the private PostgreSQL and Redis a test starts for itself are real
servers on their own loopback port, survive a stop and a start on that port (PostgreSQL with
its data), hang while paused, and leave no process behind, also when they fail to start.

PostgreSQL is queried with its own ``psql`` and Redis over raw RESP, so the harness needs no
client library of its own.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.dbservers import PostgresServer, RedisError, RedisServer, redis_command
from tests.gateway import wait_until


def _group_gone(leader: int) -> bool:
    """No process is left in the process group the server started (its session)."""
    try:
        os.killpg(leader, 0)
    except ProcessLookupError:
        return True
    return False


# --- PostgreSQL ---------------------------------------------------------------------------------


def test_postgres_is_a_private_server_that_comes_back_with_its_data(tmp_path: Path) -> None:
    with PostgresServer(tmp_path) as pg:
        assert pg.port not in (5432, 6379)
        assert pg.psql("show port") == str(pg.port)
        assert Path(pg.psql("show data_directory")) == pg.data_dir
        assert (tmp_path / "data" / "PG_VERSION").is_file()  # the cluster, or a link to it

        url = pg.create_database("gateway_test")
        assert url == f"postgresql+asyncpg://gateway@127.0.0.1:{pg.port}/gateway_test"
        assert pg.psql("select 1", "gateway_test") == "1"
        assert pg.psql("select current_user", "gateway_test") == "gateway"
        pg.psql("create table kept (v text); insert into kept values ('before')", "gateway_test")

        pg.stop()
        assert pg.refuses_connections()
        with pytest.raises(RuntimeError, match="refused"):
            pg.psql("select 1", "gateway_test")

        pg.start()
        assert pg.psql("select v from kept", "gateway_test") == "before"
        backends = pg.psql("select count(*) from pg_stat_activity where backend_type <> ''")
        assert int(backends) >= 1
        assert pg.process is not None
        leader = pg.process.pid
    assert pg.process is None
    assert _group_gone(leader)
    assert pg.refuses_connections()


def test_postgres_copies_a_template_database(tmp_path: Path) -> None:
    with PostgresServer(tmp_path) as pg:
        pg.create_database("migrated")
        pg.psql(
            "create table schema_marker (n int); insert into schema_marker values (7)", "migrated"
        )
        pg.create_database("per_test", template="migrated")
        assert pg.psql("select n from schema_marker", "per_test") == "7"
        pg.psql("insert into schema_marker values (8), (null)", "per_test")
        rows = pg.query("per_test", "select n, 'a|b' from schema_marker order by n nulls last")
        assert rows == [("7", "a|b"), ("8", "a|b"), ("", "a|b")]
        assert pg.query("migrated", "select n from schema_marker") == [("7",)]
        assert pg.query("migrated", "select n from schema_marker where false") == []


def test_a_paused_postgres_hangs_and_answers_again_on_resume(tmp_path: Path) -> None:
    with PostgresServer(tmp_path) as pg:
        pg.pause()
        assert not pg.refuses_connections()  # the kernel still accepts; nobody answers
        with pytest.raises(RuntimeError, match="timeout"):
            pg.psql("select 1", connect_timeout=2)
        pg.resume()
        assert pg.psql("select 1") == "1"
        pg.pause()  # __exit__ stops a paused server too
        assert pg.process is not None
        leader = pg.process.pid
    assert _group_gone(leader)


def test_a_postgres_that_cannot_start_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        pg = PostgresServer(tmp_path, port=taken.getsockname()[1])
        with pytest.raises(RuntimeError, match="exited") as failure, pg:
            pass
    assert "could not bind" in str(failure.value)  # postgres's own log line, in the error
    assert pg.process is None
    if pg.user is not None:  # as root: the cluster's directory outside tmp_path is gone too
        assert (tmp_path / "data").is_symlink()
        assert not (tmp_path / "data").exists()


def test_the_postgres_data_of_root_lives_in_a_directory_removed_on_exit(tmp_path: Path) -> None:
    with PostgresServer(tmp_path) as pg:
        home = pg.home
        owner = home.stat().st_uid
    if os.geteuid() == 0:
        assert pg.user is not None
        assert owner == pg.user.pw_uid
        assert home != tmp_path
        assert not home.exists()
    else:
        assert home == tmp_path
        assert owner == os.geteuid()


# --- Redis --------------------------------------------------------------------------------------


def test_redis_is_a_private_server_that_comes_back_empty(tmp_path: Path) -> None:
    with RedisServer(tmp_path) as redis:
        assert redis.port not in (5432, 6379)
        assert redis.url == f"redis://gateway:{redis.password}@127.0.0.1:{redis.port}/0"
        assert redis.command("PING") == "PONG"
        with pytest.raises(RedisError, match="NOAUTH"):  # nobody gets in without a login
            redis_command(redis.port, "PING")
        gateway = ("gateway", redis.password)
        assert redis_command(redis.port, "SET", "agw:key", "value", user=gateway) == "OK"
        with pytest.raises(RedisError, match="NOPERM"):  # only the gateway's own keys
            redis_command(redis.port, "SET", "key", "value", user=gateway)
        with pytest.raises(RedisError, match="NOPERM"):  # and no administration
            redis_command(redis.port, "FLUSHALL", user=gateway)
        assert redis.command("SET", "key", "value") == "OK"
        assert redis.command("GET", "key") == b"value"
        assert redis.command("CONFIG", "GET", "save") == [b"save", b""]
        with pytest.raises(RedisError, match="unknown command"):
            redis.command("NOT-A-COMMAND")

        redis.stop()
        assert redis.refuses_connections()
        with pytest.raises(ConnectionError):
            redis.command("PING")

        redis.start()
        assert redis.command("PING") == "PONG"
        assert redis.command("GET", "key") is None  # nothing persisted
        assert redis.process is not None
        leader = redis.process.pid
    assert _group_gone(leader)
    assert redis.refuses_connections()
    assert (tmp_path / "redis.log").is_file()


def test_a_paused_redis_hangs_and_answers_again_on_resume(tmp_path: Path) -> None:
    with RedisServer(tmp_path) as redis:
        redis.pause()
        with pytest.raises(TimeoutError):
            redis.command("PING", timeout=0.5)
        redis.resume()
        assert wait_until(lambda: redis.command("PING") == "PONG", what="PONG after resume")


def test_a_redis_that_cannot_start_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        redis = RedisServer(tmp_path, port=taken.getsockname()[1])
        with pytest.raises(RuntimeError, match="exited") as failure:
            redis.start()
    assert "Address already in use" in str(failure.value)
    assert redis.process is None
