"""T6: the workspace is checked again before every spawn. A workspace swapped for a symlink
(before a session's first turn, between turns, or after a turn started) is refused at the next
spawn, through the real gateway with the fake ``claude``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import SseReader, follow, is_turn_end
from tests.integration.callers import assert_problem, create

# Long enough for the test to swap the workspace once it sees retry.scheduled.
HOLD_S = 1.0


@pytest.fixture
def gateway(make_fake_gateway: FakeGatewayFactory) -> FakeGateway:
    retry = {"strategies": {"default": {"delays_s": [0.1]}, "hold": {"delays_s": [HOLD_S]}}}
    return make_fake_gateway(retry=retry).start()


def prompts_seen(gateway: FakeGateway) -> list[str]:
    path = gateway.spawn_log.with_name(gateway.spawn_log.name + ".prompts")
    return [json.loads(line)["prompt"] for line in path.read_text().splitlines()]


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


def test_t6_workspace_swapped_during_a_turn_is_refused_at_the_respawn(
    gateway: FakeGateway, tmp_path: Path
) -> None:
    victim = gateway.workspace.parent / "victim"
    victim.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    parked = tmp_path / "parked"
    with gateway.client() as client:
        created = client.post(
            "/v1/sessions", json={"workspace": str(victim), "retry": {"strategy": "hold"}}
        )
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        after = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
        headers = {"Accept": "text/event-stream", "Last-Event-ID": str(after)}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as stream:
            reader = SseReader(stream)
            # "crash": the CLI exits mid-turn (retryable), so the next attempt spawns anew.
            answer = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "crash"})
            assert answer.status_code == 202, answer.text
            turn_id = answer.json()["id"]
            events = reader.until(lambda e: e["type"] == "retry.scheduled")
            victim.rename(parked)
            victim.symlink_to(outside, target_is_directory=True)
            events += reader.until(is_turn_end)

        (scheduled,) = of_type(events, "retry.scheduled")
        assert scheduled["data"]["kind"] == "cli_crashed"
        failed = events[-1]
        assert failed["type"] == "turn.failed"
        assert failed["attempt"] == 2
        error = failed["data"]["error"]
        assert (error["kind"], error["reason"], error["retryable"]) == (
            "invalid_request",
            "workspace_rejected",
            False,
        )
        assert "replaced by a symlink" in error["message"]
        assert str(outside) in error["message"]
        stored = client.get(f"/v1/sessions/{sid}/turns/{turn_id}").json()
        assert (stored["status"], stored["attempts"]) == ("failed", 2)
        session = client.get(f"/v1/sessions/{sid}").json()
        assert (session["status"], session["process"]) == ("idle", None)
        # Only the first attempt's CLI ever ran; nothing was started in (or wrote to) outside.
        assert len(gateway.spawns()) == 1
        assert prompts_seen(gateway) == ["crash"]
        assert list(outside.iterdir()) == []

        # Put back, the workspace serves the session again, in its own directory.
        victim.unlink()
        parked.rename(victim)
        answer = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
        assert answer.status_code == 202, answer.text
        headers["Last-Event-ID"] = str(failed["seq"])
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as stream:
            assert SseReader(stream).until(is_turn_end)[-1]["type"] == "turn.completed"
    spawned = gateway.spawns()
    assert len(spawned) == 2
    assert spawned[-1]["env"]["PWD"] == str(victim)
    assert "Traceback" not in gateway.log()


def test_t6_workspace_swapped_for_a_symlink_is_refused_and_nothing_is_spawned(
    fake_gateway: FakeGateway, tmp_path: Path
) -> None:
    gateway = fake_gateway
    outside = tmp_path / "outside"
    outside.mkdir()
    sibling = gateway.workspace.parent / "sibling"
    sibling.mkdir()
    with gateway.client() as client:
        escaped, moved = create(client, gateway), None
        project_b = gateway.workspace.parent / "project-b"
        project_b.mkdir()
        moved = client.post("/v1/sessions", json={"workspace": str(project_b)}).json()["id"]
        gateway.workspace.rmdir()
        gateway.workspace.symlink_to(outside)  # the directory is now a link out of the root
        project_b.rmdir()
        project_b.symlink_to(sibling)  # and this one a link elsewhere inside it
        for sid, why in ((escaped, "no longer resolves inside"), (moved, "another directory")):
            refused = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
            body = assert_problem(refused, 422, "workspace_rejected")
            assert why in body["detail"]
            assert client.get(f"/v1/sessions/{sid}/turns").json()["turns"] == []
            assert client.get(f"/v1/sessions/{sid}").json()["process"] is None
    assert gateway.spawns() == []


def test_t6_workspace_swapped_after_a_turn_refuses_the_next_turn(
    fake_gateway: FakeGateway,
) -> None:
    gateway = fake_gateway
    with gateway.client() as client:
        sid = create(client, gateway)
        assert client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"}).status_code == 202
        assert follow(client, sid)[-1]["type"] == "turn.completed"
        real = gateway.workspace.with_name("project-real")
        gateway.workspace.rename(real)
        gateway.workspace.symlink_to("/etc")
        refused = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "again"})
        assert_problem(refused, 422, "workspace_rejected")
    assert len(gateway.spawns()) == 1  # the first turn's; none since the swap
