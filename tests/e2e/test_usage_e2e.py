"""Usage the real CLIs report reaches the session's totals, the admin report and the metrics.

The stub model answers every request with 12 input and 7 output tokens; a plain answer is
one model request, a tool call and the answer to its result two.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import GatewayFactory
from tests.e2e.test_contract import create_session, run_turn
from tests.gateway import metric, scrape

pytestmark = pytest.mark.e2e

PLAN_CALLS = {
    "claude_code": "[[call:TodoWrite "
    + json.dumps({"todos": [{"content": "Look", "status": "pending", "activeForm": "Looking"}]})
    + "]]",
    "codex": "[[call:update_plan "
    + json.dumps({"plan": [{"step": "Look", "status": "pending"}]})
    + "]]",
}
"""A tool call that needs no approval: the CLI's plan tool."""


@pytest.mark.parametrize("provider", sorted(PLAN_CALLS))
def test_the_stubs_tokens_add_up_in_the_sessions_usage(
    provider: str, make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway(provider).start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        assert session["usage"]["turns"] == 0
        first = run_turn(client, session["id"], "Say hello")
        second = run_turn(client, session["id"], PLAN_CALLS[provider])
        for events, requests in ((first, 1), (second, 2)):
            assert events[-1]["type"] == "turn.completed", events[-1]
            usage = events[-1]["data"]["usage"]
            assert (usage["input_tokens"], usage["output_tokens"]) == (12 * requests, 7 * requests)

        totals = client.get(f"/v1/sessions/{session['id']}").json()["usage"]
        assert totals["input_tokens"] == 12 * 3
        assert totals["output_tokens"] == 7 * 3
        assert totals["turns"] == 2

        report = client.get("/v1/usage").json()  # the gateway's own key is the admin key
        [group] = report["groups"]
        model = session["model"]  # the provider's configured model, if any
        assert (group["key"], group["provider"], group["model"]) == ("admin", provider, model)
        assert group["usage"] == totals

        samples = scrape(client)
        labels = {"provider": provider, "model": model or "default"}
        assert metric(samples, "agent_gateway_tokens_total", **labels, kind="input") == 36
        assert metric(samples, "agent_gateway_tokens_total", **labels, kind="output") == 21
