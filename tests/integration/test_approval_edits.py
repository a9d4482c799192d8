"""Threat model T18 (SECURITY.md): an edited approval is on the record.

A running gateway with the fake ``claude`` (its ``ask:<command>`` prompt asks to run a Bash
command and answers with the command it was allowed to run) and, for a provider that cannot
run edited input, the fake ``codex app-server``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory, fake_server_in
from tests.gateway import follow

ALICE = "alice-token-0123456789abcdefghijklmnopqrstuvwxyz"


def alice(gateway: FakeGateway) -> httpx.Client:
    return httpx.Client(
        base_url=gateway.base_url, headers={"Authorization": f"Bearer {ALICE}"}, timeout=30
    )


def ask(client: httpx.Client, gateway: FakeGateway, prompt: str, **session: Any) -> tuple[str, Any]:
    created = client.post("/v1/sessions", json={"workspace": str(gateway.workspace), **session})
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    assert client.post(f"/v1/sessions/{sid}/turns", json={"prompt": prompt}).status_code == 202
    asked = follow(client, sid, lambda e: e["type"] == "approval.requested")[-1]
    return sid, asked


def log_lines(gateway: FakeGateway) -> list[dict[str, Any]]:
    return [json.loads(line) for line in gateway.log().splitlines() if line.startswith("{")]


def test_t18_an_edited_approval_keeps_the_original_the_edit_and_who_made_it(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(server={"api_keys": [{"name": "alice", "token": ALICE}]}).start()
    with alice(gateway) as client:
        sid, asked = ask(client, gateway, "ask:echo RAN2 > ran2.txt")
        approval_id = asked["data"]["approval_id"]
        assert asked["data"]["input"] == {"command": "echo RAN2 > ran2.txt"}
        edited = {"command": "echo EDITED > /elsewhere.txt"}
        answer = client.post(
            f"/v1/sessions/{sid}/approvals/{approval_id}",
            json={"decision": "allow", "updated_input": edited},
        )
        assert answer.status_code == 200, answer.text
        record = answer.json()
        assert record["input"] == {"command": "echo RAN2 > ran2.txt"}  # what the agent asked
        assert record["updated_input"] == edited  # what runs
        assert record["updated_by"] == "alice"
        events = follow(client, sid)
        [resolved] = [e for e in events if e["type"] == "approval.resolved"]
        assert resolved["data"]["updated_input"] == edited
        assert resolved["data"]["updated_by"] == "alice"
        assert events[-1]["data"]["final_text"] == "ran: echo EDITED > /elsewhere.txt"
        [listed] = client.get(f"/v1/sessions/{sid}/approvals").json()["approvals"]
        assert (listed["updated_input"], listed["updated_by"]) == (edited, "alice")
    [line] = [line for line in log_lines(gateway) if line.get("event") == "approval.resolved"]
    assert line["input_edited"] is True
    assert line["updated_by"] == "alice"
    assert "the input was edited by alice" in line["msg"]


def test_t18_an_unchanged_updated_input_is_no_edit(fake_gateway: FakeGateway) -> None:
    with fake_gateway.client() as client:
        sid, asked = ask(client, fake_gateway, "ask:ls")
        answer = client.post(
            f"/v1/sessions/{sid}/approvals/{asked['data']['approval_id']}",
            json={"decision": "allow", "updated_input": {"command": "ls"}},
        ).json()
        assert (answer["updated_input"], answer["updated_by"]) == (None, None)
        resolved = next(e for e in follow(client, sid) if e["type"] == "approval.resolved")
        assert resolved["data"]["updated_input"] is None


def test_t18_an_operator_can_forbid_edits(make_fake_gateway: FakeGatewayFactory) -> None:
    gateway = make_fake_gateway(sessions={"allow_updated_input": False}).start()
    with gateway.client() as client:
        sid, asked = ask(client, gateway, "ask:ls")
        url = f"/v1/sessions/{sid}/approvals/{asked['data']['approval_id']}"
        refused = client.post(url, json={"decision": "allow", "updated_input": {"command": "id"}})
        assert refused.status_code == 422, refused.text
        assert "sessions.allow_updated_input" in refused.json()["detail"]
        [pending] = client.get(f"/v1/sessions/{sid}/approvals").json()["approvals"]
        assert pending["status"] == "pending"  # still the client's to answer
        assert client.post(url, json={"decision": "allow"}).status_code == 200
        assert follow(client, sid)[-1]["data"]["final_text"] == "ran: ls"


def test_t18_a_provider_that_runs_only_what_it_asked_refuses_an_edit(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    gateway = make_fake_gateway(
        codex={
            "enabled": True,
            "executable": str(fake_server_in(tmp_path / "bin", "codex")),
        },
        selection={"default": "codex"},
    ).start()
    with gateway.client() as client:
        providers = {p["name"]: p for p in client.get("/v1/providers").json()["providers"]}
        assert providers["codex"]["capabilities"]["approval_edits"] is False
        assert providers["claude_code"]["capabilities"]["approval_edits"] is True
        sid, asked = ask(client, gateway, "[[approve]]")
        url = f"/v1/sessions/{sid}/approvals/{asked['data']['approval_id']}"
        edited = {**asked["data"]["input"], "command": "rm -rf /"}
        refused = client.post(url, json={"decision": "allow", "updated_input": edited})
        assert refused.status_code == 422, refused.text
        assert "codex runs exactly the tool call it asked about" in refused.json()["detail"]
        allowed = client.post(url, json={"decision": "allow"})
        assert allowed.status_code == 200, allowed.text
        assert allowed.json()["updated_input"] is None
        assert follow(client, sid)[-1]["type"] == "turn.completed"
