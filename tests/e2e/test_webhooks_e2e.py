"""Webhooks for a real Claude Code turn against the stub model: a receiver on loopback, which
verifies every delivery with the ``standardwebhooks`` library, is told of the approval the
agent asks for and of the turn's end, each carrying the event as the stream did."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cli_harness import create_session, run_turn
from tests.e2e.conftest import GatewayFactory
from tests.gateway import wait_until
from tests.webhook_receiver import SECRET, WebhookReceiver

pytestmark = pytest.mark.e2e

EVENTS = ["approval.requested", "turn.completed", "session.idle"]


def test_a_claude_code_turn_sends_signed_approval_requested_and_turn_completed(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    with WebhookReceiver() as receiver:
        hooks = {
            "allow_http_hosts": ["127.0.0.1"],
            "endpoints": [
                {"id": "receiver", "url": receiver.url, "secret": SECRET, "events": EVENTS}
            ],
        }
        gateway = make_gateway(webhooks=hooks).start()
        with gateway.client() as client:
            sid = create_session(client, workspace)
            events = run_turn(client, sid, "[[tool:bash touch hooked.txt]]", decision="allow")
            received = receiver.wait_for(lambda got: len(got) == len(EVENTS))
            logged = wait_until(
                lambda: (
                    len(
                        found := [
                            d
                            for d in client.get("/v1/webhooks/receiver/deliveries").json()[
                                "deliveries"
                            ]
                            if d["status"] == "succeeded"
                        ]
                    )
                    == len(EVENTS)
                    and found
                )
            )
        assert (workspace / "hooked.txt").exists()
        assert not receiver.refused
        by_type = {r.type: r for r in received}
        assert sorted(by_type) == sorted(EVENTS)
        stored = {e["type"]: e for e in events}
        assert by_type["approval.requested"].data == stored["approval.requested"]
        assert by_type["approval.requested"].data["data"]["tool"] == "Bash"
        assert by_type["turn.completed"].data == stored["turn.completed"]
        assert by_type["session.idle"].data["turn_status"] == "completed"
        assert {r.data["session_id"] for r in received} == {sid}
        assert {d["message_id"] for d in logged} == {r.id for r in received}
        assert SECRET not in gateway.log()
