"""Budgets through a real gateway with the fake Claude Code: a session's own (``budget`` at
creation) and a key's per day (``[budgets]``), refused before a turn starts (402 and 429),
and stopped during a turn at the usage report that reaches them (``budget.reached``, then
``turn.failed`` of kind ``budget_exceeded``); what is used and left on the session and on
``GET /v1/usage``.

The fake's ``steps:<n>:<in>:<out>:<cost>`` answers in n model responses 0.2 s apart, each
streaming its usage as Claude Code does (tokens only: the cost comes with the result), and
logs each response it made; ``usage:<in>:<out>:<cached>:<cost>`` reports its usage with its
result only.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.gateway import FakeGateway
from tests.gateway import follow
from tests.integration.callers import ALICE, BOB, KEYS, as_key, assert_problem
from tests.integration.cliprocs import fake_gateway_in

STEPS = "steps:20:100:50:0"
"""20 model responses of 100 input and 50 output tokens each: 4 s if nothing stops it."""


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, migrated_database: Path
) -> Iterator[FakeGateway]:
    """Alice may spend 250 tokens a day, Bob 1,000 a day and 5 USD a month; the admin key
    has no budget. Retries come fast (one, after 0.1 s)."""
    gateway = fake_gateway_in(
        tmp_path_factory.mktemp("budgets"),
        migrated_database,
        server=KEYS,
        budgets={
            "keys": {
                "alice": {"daily": {"max_tokens": 250}},
                "bob": {"daily": {"max_tokens": 1000}, "monthly": {"max_cost_usd": 5.0}},
            }
        },
        retry={"strategies": {"default": {"delays_s": [0.1]}}},
    )
    try:
        yield gateway.start()
    finally:
        gateway.stop()


def session(client: httpx.Client, gateway: FakeGateway, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/sessions", json={"workspace": str(gateway.workspace), **body})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def run_turn(client: httpx.Client, sid: str, prompt: str) -> list[dict[str, Any]]:
    """Start a turn and read its events up to its end."""
    after = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
    response = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": prompt})
    assert response.status_code == 202, response.text
    events = follow(client, sid, after=after)
    assert all(e["turn_id"] == response.json()["id"] for e in events if e["turn_id"])
    return events


def responses_made(gateway: FakeGateway, thread: str) -> int:
    log = Path(str(gateway.spawn_log) + ".responses")
    lines = log.read_text().splitlines() if log.exists() else []
    return sum(f'"thread": "{thread}"' in line for line in lines)


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def test_a_session_budget_stops_the_turn_at_the_usage_report_that_reaches_it(
    gateway: FakeGateway,
) -> None:
    with gateway.client() as admin:
        created = session(admin, gateway, budget={"max_tokens": 300})
        assert created["budget"] == {
            "max_cost_usd": None,
            "max_tokens": 300,
            "used": {"cost_usd": 0.0, "tokens": 0},
            "left": {"cost_usd": None, "tokens": 300},
            "reached": False,
        }
        sid = created["id"]
        events = run_turn(admin, sid, STEPS)

        [reached] = of_type(events, "budget.reached")
        assert reached["data"] == {
            "budget": "session",
            "measure": "tokens",
            "limit": 300.0,
            "used": 300.0,  # the second response's output: 2 x (100 + 50)
            "key": "admin",
            "resets_at": None,
        }
        ended = events[-1]
        assert ended["type"] == "turn.failed", ended
        error = ended["data"]["error"]
        assert (error["kind"], error["reason"], error["retryable"]) == (
            "budget_exceeded",
            "session",
            False,
        )
        assert events.index(reached) < events.index(ended)
        assert of_type(events, "retry.scheduled") == []
        thread = admin.get(f"/v1/sessions/{sid}").json()["thread_id"]
        assert responses_made(gateway, thread) <= 3  # not the 20 it would have made

        turn = admin.get(f"/v1/sessions/{sid}/turns").json()["turns"][0]
        assert turn["status"] == "failed"
        assert turn["usage"]["input_tokens"] + turn["usage"]["output_tokens"] >= 300
        budget = admin.get(f"/v1/sessions/{sid}").json()["budget"]
        assert budget["reached"] is True
        assert budget["left"] == {"cost_usd": None, "tokens": 0}

        refused = admin.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
        problem = assert_problem(refused, 402, "budget_exceeded")
        assert (problem["budget"], problem["measure"], problem["limit"]) == (
            "session",
            "tokens",
            300,
        )
        assert problem["used"] >= 300
        assert problem["resets_at"] is None
        assert len(admin.get(f"/v1/sessions/{sid}/turns").json()["turns"]) == 1


def test_a_cost_reported_at_the_end_completes_the_turn_and_refuses_the_next(
    gateway: FakeGateway,
) -> None:
    with gateway.client() as admin:
        sid = session(admin, gateway, budget={"max_cost_usd": 0.5})["id"]
        first = run_turn(admin, sid, "usage:10:5:0:0.3")
        assert first[-1]["type"] == "turn.completed"
        assert of_type(first, "budget.reached") == []
        second = run_turn(admin, sid, "usage:10:5:0:0.3")
        # The cost comes with the result: the turn had done its work, and keeps it.
        assert second[-1]["type"] == "turn.completed"
        [reached] = of_type(second, "budget.reached")
        assert reached["data"]["measure"] == "cost_usd"
        assert reached["data"]["used"] == pytest.approx(0.6)
        budget = admin.get(f"/v1/sessions/{sid}").json()["budget"]
        assert budget["used"]["cost_usd"] == pytest.approx(0.6)
        assert (budget["left"]["cost_usd"], budget["reached"]) == (0, True)
        refused = admin.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
        assert assert_problem(refused, 402, "budget_exceeded")["measure"] == "cost_usd"


def test_an_attempt_that_reaches_the_budget_is_not_retried(gateway: FakeGateway) -> None:
    with gateway.client() as admin:
        # Each failed attempt of the fake reports 1 input and 2 output tokens.
        sid = session(admin, gateway, budget={"max_tokens": 3})["id"]
        events = run_turn(admin, sid, "flaky:1")
        assert of_type(events, "retry.scheduled") == []
        assert events[-1]["type"] == "turn.failed"
        assert events[-1]["data"]["error"]["kind"] == "budget_exceeded"
        assert events[-1]["data"]["error"]["reason"] == "session"
        [turn] = admin.get(f"/v1/sessions/{sid}/turns").json()["turns"]
        assert turn["attempts"] == 1

        # Without a budget the same turn is retried and completes.
        unbounded = session(admin, gateway)["id"]
        retried = run_turn(admin, unbounded, "flaky:1")
        assert len(of_type(retried, "retry.scheduled")) == 1
        assert retried[-1]["type"] == "turn.completed"


def test_a_key_budget_stops_a_running_turn_and_refuses_the_keys_next_turns_until_it_resets(
    gateway: FakeGateway,
) -> None:
    with as_key(gateway, ALICE) as alice, as_key(gateway, BOB) as bob:
        sid = session(alice, gateway)["id"]
        events = run_turn(alice, sid, STEPS)
        tomorrow = (datetime.now(UTC) + timedelta(days=1)).date()
        midnight = datetime(tomorrow.year, tomorrow.month, tomorrow.day, tzinfo=UTC)

        [reached] = of_type(events, "budget.reached")
        assert reached["data"]["budget"] == "key_daily"
        assert reached["data"]["key"] == "alice"
        assert reached["data"]["limit"] == 250
        assert datetime.fromisoformat(reached["data"]["resets_at"]) == midnight
        assert events[-1]["type"] == "turn.failed"
        assert events[-1]["data"]["error"]["reason"] == "key_daily"

        # Every session of the key is refused now, with when the budget starts over.
        other = session(alice, gateway)["id"]
        refused = alice.post(f"/v1/sessions/{other}/turns", json={"prompt": "hi"})
        problem = assert_problem(refused, 429, "key_budget_exceeded")
        assert problem["budget"] == "key_daily"
        assert datetime.fromisoformat(problem["resets_at"]) == midnight
        wait_s = (midnight - datetime.now(UTC)).total_seconds()
        assert abs(int(refused.headers["Retry-After"]) - wait_s) < 60
        run = alice.post("/v1/runs", json={"prompt": "hi", "workspace": str(gateway.workspace)})
        assert_problem(run, 429, "key_budget_exceeded")
        assert len(alice.get("/v1/sessions").json()["sessions"]) == 2  # the run made none

        # Another key's budget is its own.
        assert run_turn(bob, session(bob, gateway)["id"], "hi")[-1]["type"] == "turn.completed"

    with gateway.client() as admin:
        budgets = admin.get("/v1/usage").json()["budgets"]
    by_key = {(b["key"], b["period"]): b for b in budgets}
    assert set(by_key) == {("alice", "daily"), ("bob", "daily"), ("bob", "monthly")}
    alice_daily = by_key["alice", "daily"]
    assert alice_daily["reached"] is True
    assert alice_daily["used"]["tokens"] >= 250
    assert alice_daily["left"] == {"cost_usd": None, "tokens": 0}
    assert datetime.fromisoformat(alice_daily["resets_at"]) == midnight
    bob_daily = by_key["bob", "daily"]
    assert (bob_daily["used"]["tokens"], bob_daily["left"]["tokens"]) == (3, 997)
    assert bob_daily["reached"] is False
    assert by_key["bob", "monthly"]["left"]["cost_usd"] == 5.0


def test_a_budget_for_a_key_the_gateway_does_not_have_stops_the_start(
    tmp_path: Path, migrated_database: Path
) -> None:
    gateway = fake_gateway_in(
        tmp_path,
        migrated_database,
        server=KEYS,
        budgets={"keys": {"alcie": {"daily": {"max_tokens": 1}}, "bob": {}}},
    )
    gateway.data_dir.mkdir(parents=True, exist_ok=True)
    refused = gateway.command("serve", check=False)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "budgets.keys names keys this gateway does not have: alcie" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_budget_must_name_a_positive_maximum(gateway: FakeGateway) -> None:
    with gateway.client() as admin:
        for budget in ({"max_tokens": 0}, {"max_cost_usd": -1}, {"max_turns": 3}):
            response = admin.post(
                "/v1/sessions", json={"workspace": str(gateway.workspace), "budget": budget}
            )
            assert_problem(response, 422, "validation_failed")
