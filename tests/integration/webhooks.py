"""What the webhook tests share: a gateway's ``[webhooks]`` section for a receiver, a turn run
to its end, and the delivery log read through the API."""

from __future__ import annotations

from typing import Any

import httpx

from tests.fakes.gateway import FakeGateway
from tests.gateway import follow
from tests.integration.streams import create, last_seq, start_turn
from tests.webhook_receiver import SECRET

FAST_RETRIES = [0.05, 0.05, 0.05, 0.05]
"""Retry waits short enough for a test (the schedule is the point, not its length)."""


def webhooks_section(*endpoints: dict[str, Any], **more: Any) -> dict[str, Any]:
    """``[webhooks]`` allowing plain http to loopback, with ``endpoints``."""
    return {
        "allow_http_hosts": ["127.0.0.1"],
        "retry_delays_s": FAST_RETRIES,
        "poll_interval_s": 0.2,
        "endpoints": list(endpoints),
        **more,
    }


def endpoint(url: str, *events: str, secret: str = SECRET, **more: Any) -> dict[str, Any]:
    return {"url": url, "secret": secret, "events": list(events), **more}


def run_turn(
    client: httpx.Client, gateway: FakeGateway, prompt: str, *, sid: str | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """Run one turn (allowing every approval it asks for) in ``sid`` or a new session;
    the session id and the turn's events."""
    sid = sid or create(client, gateway)
    after = last_seq(client, sid)
    start_turn(client, sid, prompt)
    seen: list[dict[str, Any]] = []

    def step(envelope: dict[str, Any]) -> bool:
        seen.append(envelope)
        if envelope["type"] == "approval.requested":
            approval = envelope["data"]["approval_id"]
            answer = client.post(
                f"/v1/sessions/{sid}/approvals/{approval}", json={"decision": "allow"}
            )
            assert answer.status_code == 200, answer.text
        return envelope["type"] in {"turn.completed", "turn.failed", "turn.interrupted"}

    follow(client, sid, step, after=after)
    return sid, seen


def deliveries(client: httpx.Client, endpoint_id: str, **params: Any) -> list[dict[str, Any]]:
    response = client.get(f"/v1/webhooks/{endpoint_id}/deliveries", params=params)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["deliveries"]
    return found
