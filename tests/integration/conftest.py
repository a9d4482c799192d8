"""Gateways for the CLI process tests (tests/integration/cliprocs.py has their helpers), and a
store with its event log for the event log's tests (tests/integration/eventlogs.py), on a SQLite
file and on a private PostgreSQL server alike.

The gateway factory every integration test uses (``make_fake_gateway``, ``fake_gateway``) is in
tests/conftest.py.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.runtime.eventlog import EventLog
from app.store.db import create_engine
from app.store.repository import Store
from app.store.schema import upgrade
from tests.conftest import MIGRATED_TEMPLATE
from tests.dbservers import PostgresServer, RedisServer
from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import GatewayProcess
from tests.integration.cliprocs import SHARED_LIMITS, fake_gateway_in, gateway_secrets
from tests.integration.eventlogs import NOW, OTHER, SESSION
from tests.integration.replicas import two_replicas
from tests.integration.rows import session_record


@pytest.fixture(scope="session")
def migrated_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database at the head revision, made once by ``agent-gateway migrate``."""
    directory = tmp_path_factory.mktemp("migrated")
    GatewayProcess(data_dir=directory, config={}).migrate()
    return directory / "gateway.db"


@pytest.fixture(scope="module")
def cli_gateway(
    tmp_path_factory: pytest.TempPathFactory, migrated_database: Path
) -> Iterator[FakeGateway]:
    """One gateway for a module's tests that need none of their own: small limits, secrets in
    its environment, a configured CLI variable and the CLI's own credential to pass through.
    Each test works in sessions of its own and finds its CLI processes by their thread."""
    gateway = fake_gateway_in(
        tmp_path_factory.mktemp("cli-gateway"),
        migrated_database,
        limits=SHARED_LIMITS,
        sessions={"turn_timeout_s": 120},
    )
    gateway.config["providers"]["claude_code"]["env"]["CONFIGURED_FOR_CLI"] = "configured-value"
    gateway.extra_env = {**gateway_secrets(gateway), "ANTHROPIC_API_KEY": "sk-ant-passthrough"}
    try:
        yield gateway.start()
    finally:
        gateway.stop()


@pytest.fixture
def make_cli_gateway(tmp_path: Path, migrated_database: Path) -> Iterator[FakeGatewayFactory]:
    """Gateways of the test's own (it kills or restarts the gateway, or needs settings that
    would change what the others see), on the migrated database; stopped at the test's end."""
    made: list[FakeGateway] = []

    def make(**overrides: Any) -> FakeGateway:
        made.append(
            fake_gateway_in(tmp_path / f"gateway-{len(made)}", migrated_database, **overrides)
        )
        return made[-1]

    yield make
    for gateway in made:
        gateway.stop()


BACKENDS = ["sqlite", "postgresql"]
"""The storage engines the store's and the event log's tests run on, each test on both."""


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database at the head revision, of this test's own, on each backend (the PostgreSQL
    server starts with the first test that needs it)."""
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'gateway.db'}"
        upgrade(url)
        return url
    server: PostgresServer = request.getfixturevalue("postgres")
    name = f"t{next(_DATABASE_NUMBERS)}"
    server.create_database(name, template=MIGRATED_TEMPLATE)
    return server.url(name)


_DATABASE_NUMBERS = itertools.count(1)


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    """A store on a migrated database (SQLite file, PostgreSQL) holding two sessions
    (``SESSION`` and ``OTHER``)."""
    engine = create_engine(database_url)
    store = Store(engine)
    await store.create_session(session_record(SESSION, at=NOW))
    await store.create_session(session_record(OTHER, at=NOW))
    yield store
    store.close()
    await engine.dispose()


@pytest.fixture
def log(store: Store) -> EventLog:
    """The event log on ``store``."""
    return EventLog(store)


@pytest.fixture
def replicas(
    tmp_path: Path, postgres: PostgresServer, redis_server: RedisServer
) -> Iterator[dict[str, FakeGateway]]:
    """Replicas gw-a and gw-b (not started) on a fresh database and an empty Redis (a test
    module that needs them otherwise defines its own)."""
    with two_replicas(tmp_path, postgres, redis_server) as made:
        yield made
