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
    # Before any test starts a process, so every one of them inherits it. Under xdist the
    # workers inherit the controller's id, so one check at the end covers the whole run.
    if not _is_worker(config):
        os.environ[leftovers.RUN_ENV] = leftovers.run_id()


def _is_worker(config: pytest.Config) -> bool:
    """Whether this is a pytest-xdist worker (the controller, or a plain run, is not)."""
    return hasattr(config, "workerinput")


@pytest.fixture(scope="session", autouse=True)
def _run_temp_root(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    """Remembers the run's temp directory, where its gateways and workspaces live."""
    request.config.stash[_TEMP_ROOT] = tmp_path_factory.getbasetemp()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Every fixture is torn down by now: a process of the run still alive fails it.

    Under xdist only the controller looks, after every worker has ended (``trylast``: after
    xdist's own teardown of the workers), over the whole run's temp directory."""
    config = session.config
    if _is_worker(config):
        return
    temp_root = config.stash.get(_TEMP_ROOT, None)
    if temp_root is None and config.pluginmanager.hasplugin("dsession"):
        factory: pytest.TempPathFactory = config._tmp_path_factory  # type: ignore[attr-defined]
        temp_root = factory.getbasetemp()  # the workers' temp dirs are below it
    left = leftovers.collect(
        root_pid=os.getpid(),
        run=os.environ[leftovers.RUN_ENV],
        temp_root=temp_root,
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keeps the tests that share a fixture wider than a test on one xdist worker.

    The suite runs spread over workers (``--dist loadgroup``, scripts/run-tests.sh): a test
    with function-scoped fixtures only may run anywhere; the tests of a module (or class)
    fixture run together in one group per module, those of a package fixture in one group
    per package, so each such fixture is made once and sees the tests written against it.
    """
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        scopes = {d.scope for defs in info.name2fixturedefs.values() for d in defs}
        path = Path(str(item.path)).relative_to(config.rootpath)
        if "package" in scopes:
            item.add_marker(pytest.mark.xdist_group(str(path.parent)))
        elif scopes & {"module", "class"}:
            item.add_marker(pytest.mark.xdist_group(str(path)))


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
