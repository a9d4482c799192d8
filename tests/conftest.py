"""Event loops for async tests (asyncio's own, and uvloop too where a test asks for it), and the
fake-CLI gateway fixtures every test package uses.

The gateway runs under uvicorn, which picks uvloop when it is installed, and code at the loop
boundary (subprocess transports, pipes) must work on both. A test, class or module marked
``pytest.mark.uvloop`` runs each of its async tests once per loop (ids ``[asyncio]`` and
``[uvloop]``); every other async test runs on asyncio's loop only.

The run ends with no process of its own left (tests/leftovers.py): what is still alive once
the last fixture is torn down is killed, listed, and fails the run.

The run's private PostgreSQL and Redis (``postgres``, ``redis_server``) are here too, started
by the first test that asks for them, for the store's tests and the several-replica tests.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import uvloop

from app.store.schema import upgrade
from tests import leftovers
from tests.dbservers import PostgresServer, RedisServer
from tests.fakes.gateway import FakeGateway, FakeGatewayFactory, fake_gateway_at

LoopFactory = Callable[[], asyncio.AbstractEventLoop]

ASYNCIO_ONLY: Mapping[str, LoopFactory] = {"asyncio": asyncio.new_event_loop}
BOTH_LOOPS: Mapping[str, LoopFactory] = {**ASYNCIO_ONLY, "uvloop": uvloop.new_event_loop}


_TEMP_ROOT = pytest.StashKey[Path]()
_LEFT = pytest.StashKey[dict[int, str]]()


def pytest_configure(config: pytest.Config) -> None:
    # Registered here rather than in pyproject.toml so the marker lives next to its hook.
    config.addinivalue_line("markers", "uvloop: also run the async tests on uvloop")
    # Before any test starts a process, so every one of them inherits it.
    os.environ[leftovers.RUN_ENV] = leftovers.run_id()


@pytest.fixture(scope="session", autouse=True)
def _run_temp_root(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    """Remembers the run's temp directory, where its gateways and workspaces live."""
    request.config.stash[_TEMP_ROOT] = tmp_path_factory.getbasetemp()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Every fixture is torn down by now: a process of the run still alive fails it."""
    config = session.config
    left = leftovers.collect(
        root_pid=os.getpid(),
        run=os.environ[leftovers.RUN_ENV],
        temp_root=config.stash.get(_TEMP_ROOT, None),
    )
    if left:
        config.stash[_LEFT] = left
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    left = config.stash.get(_LEFT, {})
    if left:
        terminalreporter.section("processes left behind", red=True)
        for pid, what in sorted(left.items()):
            terminalreporter.write_line(f"pid {pid} ({what}): killed")
        terminalreporter.write_line(
            f"{len(left)} process(es) outlived the test run; the run fails until none does"
        )


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, LoopFactory]:
    # The pytest-asyncio >= 1.4 hook; overriding the ``event_loop_policy`` fixture is
    # deprecated there. Once implemented it must answer for every async test.
    return BOTH_LOOPS if item.get_closest_marker("uvloop") else ASYNCIO_ONLY


@pytest.fixture
def make_fake_gateway(tmp_path: Path) -> Iterator[FakeGatewayFactory]:
    started: list[FakeGateway] = []

    def make(**overrides: Any) -> FakeGateway:
        gateway = fake_gateway_at(tmp_path, **overrides)
        started.append(gateway)
        return gateway

    yield make
    for gateway in started:
        gateway.stop()


@pytest.fixture
def fake_gateway(make_fake_gateway: FakeGatewayFactory) -> FakeGateway:
    gateway = make_fake_gateway()
    gateway.start()
    return gateway


MIGRATED_TEMPLATE = "gateway_head"
"""A database at the head revision on the run's PostgreSQL, copied for each test that needs one."""


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """A private PostgreSQL for the run (a temp directory, a free loopback port), with a
    database at the head revision to copy (``TEMPLATE``) for each test."""
    with PostgresServer(tmp_path_factory.mktemp("postgres")) as server:
        server.create_database(MIGRATED_TEMPLATE)
        upgrade(server.url(MIGRATED_TEMPLATE))
        yield server


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A private Redis for the run (a temp directory, a free loopback port); tests that stop
    it start it again."""
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server
