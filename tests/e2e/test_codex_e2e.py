"""Codex-specific behaviour through the running gateway (the provider contract, which Codex
passes too, is in test_contract.py): how the approval modes map onto Codex's policies."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import GatewayFactory
from tests.e2e.test_contract import SSE, create_session, run_turn, start_turn, types
from tests.gateway import SseReader, is_turn_end

pytestmark = pytest.mark.e2e


def test_read_only_never_asks_and_auto_edits_still_asks_for_commands(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway("codex").start()
    with gateway.client() as client:
        reader_only = create_session(client, workspace, approval_mode="read_only")
        events = run_turn(client, reader_only["id"], "[[tool:bash touch ro.txt]]")
        assert "approval.requested" not in types(events)
        assert events[-1]["type"] == "turn.completed", events[-1]
        assert "Read-only file system" in events[-1]["data"]["final_text"]
        assert not (workspace / "ro.txt").exists()

        editor = create_session(client, workspace, approval_mode="auto_edits")
        headers = {**SSE, "Last-Event-ID": str(editor["last_seq"])}
        with client.stream(
            "GET", f"/v1/sessions/{editor['id']}/events", headers=headers
        ) as response:
            reader = SseReader(response)
            start_turn(client, editor["id"], "[[tool:bash touch cmd.txt]]")
            asked = reader.until(lambda e: e["type"] == "approval.requested")[-1]["data"]
            assert asked["tool"] == "command"
            client.post(
                f"/v1/sessions/{editor['id']}/approvals/{asked['approval_id']}",
                json={"decision": "allow"},
            )
            assert reader.until(is_turn_end)[-1]["type"] == "turn.completed"
        assert (workspace / "cmd.txt").exists()
