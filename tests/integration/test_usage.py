"""What turns used, accounted through a real gateway on SQLite and on PostgreSQL: each
session's totals, the admin report by key, provider and model over a time range, who may
read it, and the token and cost counters of ``/metrics``.

The fake ``claude`` reports the usage a ``usage:<in>:<out>:<cached>:<cost>`` prompt names;
the fake Codex app-server reports 10 input tokens (2 of them cached) and 1 output token a
turn, with no cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any

import httpx
import pytest

from tests.conftest import MIGRATED_TEMPLATE
from tests.dbservers import PostgresServer
from tests.fakes.gateway import FakeGateway, FakeGatewayFactory, fake_server_in
from tests.gateway import follow, metric, scrape
from tests.integration.callers import ALICE, BOB, KEYS, as_key, assert_problem

ZERO = {
    "input_tokens": 0,
    "output_tokens": 0,
    "cached_input_tokens": 0,
    "cache_creation_input_tokens": 0,
    "cost_usd": None,
    "turns": 0,
}
_DATABASES = count(1)


def totals(
    inputs: int, outputs: int, cached: int, cost: float | None, turns: int
) -> dict[str, Any]:
    return {
        "input_tokens": inputs,
        "output_tokens": outputs,
        "cached_input_tokens": cached,
        "cache_creation_input_tokens": 0,
        "cost_usd": cost,
        "turns": turns,
    }


@pytest.fixture(params=["sqlite", "postgresql"])
def gateway(request: pytest.FixtureRequest, make_fake_gateway: FakeGatewayFactory) -> FakeGateway:
    """A gateway with two named keys besides the admin key, the fake Claude Code and the
    fake Codex, on a SQLite file or a database of its own on the run's PostgreSQL."""
    storage: dict[str, Any] = {}
    if request.param == "postgresql":
        server: PostgresServer = request.getfixturevalue("postgres")
        name = f"usage{next(_DATABASES)}"
        server.create_database(name, template=MIGRATED_TEMPLATE)
        storage["url"] = server.url(name)
    tmp_path = request.getfixturevalue("tmp_path")
    gateway = make_fake_gateway(
        server=KEYS,
        storage=storage,
        codex={"enabled": True, "executable": str(fake_server_in(tmp_path / "bin", "codex"))},
    )
    return gateway.start()


@pytest.fixture
def admin(gateway: FakeGateway) -> Iterator[httpx.Client]:
    with gateway.client() as client:
        yield client


def session(client: httpx.Client, gateway: FakeGateway, **body: Any) -> str:
    response = client.post("/v1/sessions", json={"workspace": str(gateway.workspace), **body})
    assert response.status_code == 201, response.text
    session_id: str = response.json()["id"]
    return session_id


def turn(client: httpx.Client, session_id: str, prompt: str) -> None:
    """Run one turn to its end (read off the session's event stream)."""
    after = client.get(f"/v1/sessions/{session_id}").json()["last_seq"]
    response = client.post(f"/v1/sessions/{session_id}/turns", json={"prompt": prompt})
    assert response.status_code == 202, response.text
    ended = follow(client, session_id, after=after)[-1]
    assert ended["type"] == "turn.completed", ended


def usage_of(client: httpx.Client, session_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/sessions/{session_id}")
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()["usage"]
    return found


def report(client: httpx.Client, **params: str) -> dict[str, Any]:
    response = client.get("/v1/usage", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def groups(body: dict[str, Any]) -> dict[tuple[str | None, str, str | None], dict[str, Any]]:
    return {(g["key"], g["provider"], g["model"]): g["usage"] for g in body["groups"]}


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def test_sessions_show_their_totals_and_the_report_groups_by_key_provider_and_model(
    gateway: FakeGateway, admin: httpx.Client
) -> None:
    before = datetime.now(UTC)
    with as_key(gateway, ALICE) as alice, as_key(gateway, BOB) as bob:
        plain = session(alice, gateway)
        turn(alice, plain, "usage:100:20:5:0.25")
        turn(alice, plain, "usage:50:10:0:0.5")
        named = session(alice, gateway, model="opus")
        turn(alice, named, "usage:7:3:0:0.125")
        codex = session(alice, gateway, provider="codex")
        turn(alice, codex, "hello")
        turn(alice, codex, "hello")
        theirs = session(bob, gateway)
        turn(bob, theirs, "usage:1:1:1:0")
        idle = session(bob, gateway)
        after = datetime.now(UTC)

        assert usage_of(alice, plain) == totals(150, 30, 5, 0.75, 2)
        assert usage_of(alice, named) == totals(7, 3, 0, 0.125, 1)
        assert usage_of(alice, codex) == totals(20, 2, 4, None, 2)  # Codex reports no cost
        assert usage_of(bob, theirs) == totals(1, 1, 1, 0.0, 1)
        assert usage_of(bob, idle) == ZERO
        # The list shows the same totals as each session.
        listed = alice.get("/v1/sessions").json()["sessions"]
        assert {s["id"]: s["usage"] for s in listed} == {
            plain: totals(150, 30, 5, 0.75, 2),
            named: totals(7, 3, 0, 0.125, 1),
            codex: totals(20, 2, 4, None, 2),
        }

    body = report(admin, **{"from": iso(before), "to": iso(after)})
    assert groups(body) == {
        ("alice", "claude_code", None): totals(150, 30, 5, 0.75, 2),
        ("alice", "claude_code", "opus"): totals(7, 3, 0, 0.125, 1),
        ("alice", "codex", None): totals(20, 2, 4, None, 2),
        ("bob", "claude_code", None): totals(1, 1, 1, 0.0, 1),
    }
    assert next(g["key"] for g in body["groups"]) == "alice"  # most tokens first
    assert body["total"] == totals(178, 36, 10, 0.875, 6)
    assert body["from"] == iso(before)
    assert body["to"] == iso(after)

    # The default range is the last 30 days up to now, which holds every turn above.
    default = report(admin)
    assert groups(default) == groups(body)
    now = datetime.fromisoformat(default["to"])
    assert before <= now
    assert datetime.fromisoformat(default["from"]) == now - timedelta(days=30)

    # Turns count where they ended: a range that ends before them, or starts after, is empty.
    assert report(admin, to=iso(before))["groups"] == []
    later = report(admin, **{"from": iso(after), "to": iso(after + timedelta(hours=1))})
    assert later["groups"] == []
    assert later["total"] == ZERO


def test_the_report_refuses_inverted_ranges_and_keys_that_are_not_admin(
    gateway: FakeGateway, admin: httpx.Client
) -> None:
    moment = "2026-01-02T03:04:05Z"
    empty = admin.get("/v1/usage", params={"from": moment, "to": moment})  # [from, to): empty
    assert empty.status_code == 200, empty.text
    assert (empty.json()["groups"], empty.json()["total"]) == ([], ZERO)
    inverted = {"from": "2026-02-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}
    problem = assert_problem(admin.get("/v1/usage", params=inverted), 422, "invalid_request")
    assert "must not be after to" in problem["detail"]
    assert problem["range_from"].startswith(inverted["from"][:19])
    malformed = [
        ("from", "2026-01-01T00:00:00"),  # no time zone
        ("to", "yesterday"),
        ("from", "1767225600"),  # a Unix time is not a date-time here
    ]
    for name, value in malformed:
        response = admin.get("/v1/usage", params={name: value})
        problem = assert_problem(response, 422, "validation_failed")
        assert [e["location"] for e in problem["errors"]] == [f"query.{name}"]

    with as_key(gateway, ALICE) as alice:
        refused = assert_problem(alice.get("/v1/usage"), 403)
        assert "admin key" in refused["detail"]
    with httpx.Client(base_url=gateway.base_url) as anonymous:
        assert_problem(anonymous.get("/v1/usage"), 401)


def test_metrics_count_tokens_and_cost_by_provider_and_model(
    gateway: FakeGateway, admin: httpx.Client
) -> None:
    with as_key(gateway, BOB) as bob:
        plain = session(bob, gateway)
        turn(bob, plain, "usage:100:20:5:0.25")
        turn(bob, plain, "usage:50:10:0:0.5")
        named = session(bob, gateway, model="opus")
        turn(bob, named, "usage:7:3:0:0")
        codex = session(bob, gateway, provider="codex")
        turn(bob, codex, "hello")

    samples = scrape(admin)
    tokens = "agent_gateway_tokens_total"
    cost = "agent_gateway_cost_usd_total"
    claude = {"provider": "claude_code", "model": "default"}
    assert metric(samples, tokens, **claude, kind="input") == 150
    assert metric(samples, tokens, **claude, kind="output") == 30
    assert metric(samples, tokens, **claude, kind="cached_input") == 5
    assert metric(samples, tokens, provider="claude_code", model="opus", kind="input") == 7
    assert metric(samples, tokens, provider="codex", model="default", kind="input") == 10
    assert metric(samples, tokens, provider="codex", model="default", kind="cached_input") == 2
    assert metric(samples, cost, **claude) == 0.75
    assert (cost, frozenset({"provider": "claude_code", "model": "opus"}.items())) not in samples
    assert (cost, frozenset({"provider": "codex", "model": "default"}.items())) not in samples
