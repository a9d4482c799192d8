"""An ACP session's ``model`` with the real pinned agents: set through the model option the
agent advertises, or the turn refused with ``invalid_request`` and the agent's process closed
(never a turn run on another model under the session's name)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import GatewayFactory
from tests.e2e.test_contract import create_session, run_turn

pytestmark = pytest.mark.e2e


def test_an_agent_without_a_model_option_refuses_a_chosen_model(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway("acp:copilot").start()
    with gateway.client() as client:
        sid = create_session(client, workspace, model="stub-model")["id"]
        failed = run_turn(client, sid, "Say hello")[-1]
        assert failed["type"] == "turn.failed"
        assert failed["data"]["error"]["kind"] == "invalid_request"
        assert "cannot choose a model per session" in failed["data"]["error"]["message"]
        assert client.get(f"/v1/sessions/{sid}").json()["process"] is None


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
