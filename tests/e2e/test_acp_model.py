"""An ACP session's ``model`` with the real pinned agents: set through the model option the
agent advertises; refused at creation for an agent known to offer none, or at the turn (with
``invalid_request`` and the agent's process closed) for a model the agent does not offer —
never a turn run on another model under the session's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import GatewayFactory
from tests.e2e.test_contract import create_session, run_turn

pytestmark = pytest.mark.e2e


def test_an_agent_without_a_model_option_refuses_a_chosen_model_before_it_starts(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    # Copilot offers no model option: a session naming a model is a 422 at creation (no
    # session stored, no agent started); without one the agent runs its own model.
    gateway = make_gateway("acp:copilot").start()
    with gateway.client() as client:
        body = {"workspace": str(workspace), "provider": "acp:copilot", "model": "stub-model"}
        refused = client.post("/v1/sessions", json=body)
        assert refused.status_code == 422, refused.text
        problem = refused.json()
        assert problem["type"].endswith(":capabilities_unmet")
        assert "can run model 'stub-model'" in problem["detail"]
        assert problem["candidates"] == [
            {"provider": "acp:copilot", "reason": "lacks required capabilities: model_choice"}
        ]
        assert client.get("/v1/sessions").json()["sessions"] == []
        capabilities = client.get("/v1/providers/acp:copilot").json()["capabilities"]
        assert capabilities["model_choice"] is False

        sid = create_session(client, workspace)["id"]
        completed = run_turn(client, sid, "Say hello")[-1]
        assert completed["type"] == "turn.completed", completed


def test_a_model_is_set_through_the_agents_option_or_refused_with_what_it_offers(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway("acp:codebuddy").start()
    with gateway.client() as client:
        sid = create_session(client, workspace, model="no-such-model")["id"]
        failed = run_turn(client, sid, "Say hello")[-1]
        assert failed["type"] == "turn.failed"
        assert failed["data"]["error"]["kind"] == "invalid_request"
        assert "it offers: custom-local:stub-model" in failed["data"]["error"]["message"]
        assert client.get(f"/v1/sessions/{sid}").json()["process"] is None

        sid = create_session(client, workspace, model="custom-local:stub-model")["id"]
        completed = run_turn(client, sid, "Say hello")[-1]
        assert completed["type"] == "turn.completed", completed
        assert client.get(f"/v1/sessions/{sid}").json()["model"] == "custom-local:stub-model"
