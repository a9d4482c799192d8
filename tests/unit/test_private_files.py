"""``app.store.files``: the data directory 0700 and the database 0600 whatever the umask."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from app.store.files import private_database, private_directory


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)  # the widest a caller could start the gateway with
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.usefixtures("open_umask")
def test_a_new_directory_and_database_are_private(tmp_path: Path) -> None:
    data = tmp_path / "a" / "data"
    private_directory(data)
    assert (mode(tmp_path / "a"), mode(data)) == (0o700, 0o700)
    database = tmp_path / "b" / "gateway.db"
    private_database(database)
    assert (mode(database.parent), mode(database)) == (0o700, 0o600)
    with closing(sqlite3.connect(database)) as connection:  # SQLite takes the empty file
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("CREATE TABLE t (x)")
        connection.execute("INSERT INTO t VALUES (1)")
        connection.commit()
        for companion in ("-wal", "-shm"):  # made by SQLite with the database's mode
            assert mode(Path(f"{database}{companion}")) == 0o600


@pytest.mark.usefixtures("open_umask")
def test_existing_wide_ones_are_narrowed_and_a_shared_directory_left_alone(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    database = data / "gateway.db"
    database.write_bytes(b"")
    database.chmod(0o644)
    Path(f"{database}-wal").write_bytes(b"")
    private_directory(data)
    private_database(database)
    assert (mode(data), mode(database), mode(Path(f"{database}-wal"))) == (0o700, 0o600, 0o600)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp
    private_directory(shared)
    assert mode(shared) == 0o1777
