"""Provider selection through the API: reasons, required capabilities, 503 with candidates."""

from __future__ import annotations

import re

from tests.fakes.gateway import FakeGateway
from tests.gateway import follow, is_turn_end
from tests.integration.callers import assert_problem
from tests.integration.cliprocs import run_turn, terminal


def test_selection_honours_requires_and_lists_why_nothing_can_serve(
    fake_gateway: FakeGateway,
) -> None:
    workspace = str(fake_gateway.workspace)
    with fake_gateway.client() as client:
        created = client.post(
            "/v1/sessions", json={"workspace": workspace, "requires": ["approvals", "resume"]}
        )
        assert created.status_code == 201, created.text
        assert created.json()["provider"] == "claude_code"
        assert created.json()["selection"] == {
            "reason": "default",
            "skipped": [],
            "strategy": "ordered",
            "scores": [{"provider": "claude_code", "score": None, "turns": 0, "exploring": False}],
            "fallback": False,
            "scenario": None,
            "requires": ["approvals", "resume"],
        }

        unknown = client.post("/v1/sessions", json={"workspace": workspace, "requires": ["x"]})
        assert unknown.status_code == 422
        assert unknown.json()["errors"][0]["location"] == "body.requires.0"
        assert "shared_process" in unknown.json()["errors"][0]["message"]  # the valid names

        # Claude Code is the only candidate and has no shared process: waiting will not help.
        unmet = client.post(
            "/v1/sessions", json={"workspace": workspace, "requires": ["shared_process"]}
        )
        assert unmet.status_code == 422, unmet.text
        assert unmet.json()["type"].endswith(":capabilities_unmet")
        (candidate,) = unmet.json()["candidates"]
        assert candidate == {
            "provider": "claude_code",
            "reason": "lacks required capabilities: shared_process",
        }

        refused = client.post("/v1/sessions", json={"workspace": workspace, "provider": "codex"})
        assert refused.status_code == 503
        assert refused.headers["content-type"].startswith("application/problem+json")
        (candidate,) = refused.json()["candidates"]
        assert candidate["provider"] == "codex"
        assert candidate["reason"].startswith("disabled")


def test_a_routing_strategy_is_recorded_and_a_turn_fills_the_provider_figures(
    fake_gateway: FakeGateway,
) -> None:
    workspace = str(fake_gateway.workspace)
    with fake_gateway.client() as client:
        unknown = client.post("/v1/sessions", json={"workspace": workspace, "strategy": "fastest"})
        body = assert_problem(unknown, 422, "validation_failed")
        (error,) = body["errors"]
        assert error["location"] == "body.strategy"
        for known in ("ordered", "lowest_latency", "lowest_cost", "balanced", "round_robin"):
            assert known in error["message"]  # what to send instead

        before = client.get("/v1/providers/claude_code").json()["figures"]
        created = client.post(
            "/v1/sessions", json={"workspace": workspace, "strategy": "lowest_latency"}
        )
        assert created.status_code == 201, created.text
        session = created.json()
        assert session["selection"]["strategy"] == "lowest_latency"
        (score,) = session["selection"]["scores"]
        assert score["provider"] == "claude_code"
        events = client.get(f"/v1/sessions/{session['id']}/events").json()["events"]
        selected = next(e for e in events if e["type"] == "session.provider_selected")
        assert selected["data"]["strategy"] == "lowest_latency"
        assert selected["data"]["scores"] == session["selection"]["scores"]

        ended = terminal(run_turn(client, session["id"], "hello"))
        assert ended["type"] == "turn.completed"
        # Recorded before the terminal event is told: no waiting needed.
        figures = client.get("/v1/providers/claude_code").json()["figures"]
        assert figures["turns"] == before["turns"] + 1
        assert figures["running"] == 0
        assert figures["first_text_p50_s"] is not None
        assert figures["first_text_p50_s"] >= 0
        assert figures["duration_p50_s"] >= figures["first_text_p50_s"]
        assert figures["failure_rate"] is not None
        listed = client.get("/v1/providers").json()["providers"]
        assert next(p for p in listed if p["name"] == "claude_code")["figures"] == figures

        metrics = client.get("/metrics").text
        measured = re.search(
            r'^agent_gateway_provider_measured_turns\{provider="claude_code"\} (\S+)$',
            metrics,
            re.MULTILINE,
        )
        assert measured is not None
        assert float(measured.group(1)) == figures["turns"]
        assert 'agent_gateway_provider_running_turns{provider="claude_code"} 0.0' in metrics


def test_a_running_turn_is_counted_and_an_interrupted_one_is_not_measured(
    fake_gateway: FakeGateway,
) -> None:
    workspace = str(fake_gateway.workspace)
    with fake_gateway.client() as client:
        created = client.post(
            "/v1/sessions", json={"workspace": workspace, "strategy": "least_loaded"}
        )
        assert created.status_code == 201, created.text
        session = created.json()
        before = client.get("/v1/providers/claude_code").json()["figures"]
        started = client.post(f"/v1/sessions/{session['id']}/turns", json={"prompt": "slow"})
        assert started.status_code == 202, started.text
        follow(client, session["id"], lambda e: e["type"] == "message.delta")
        running = client.get("/v1/providers/claude_code").json()["figures"]
        assert running["running"] == before["running"] + 1

        # least_loaded now ranks the busy provider by its running turns.
        other = client.post(
            "/v1/sessions", json={"workspace": workspace, "strategy": "least_loaded"}
        )
        assert other.status_code == 201, other.text
        (score,) = other.json()["selection"]["scores"]
        assert score["score"] == running["running"]

        assert client.post(f"/v1/sessions/{session['id']}/interrupt").status_code == 202
        ended = follow(client, session["id"], is_turn_end)[-1]
        assert ended["type"] == "turn.interrupted"
        after = client.get("/v1/providers/claude_code").json()["figures"]
        assert after["running"] == before["running"]
        assert after["turns"] == before["turns"]  # a client's interrupt says nothing of it
