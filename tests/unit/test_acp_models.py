"""An ACP session's ``model`` against what each agent advertised in its recorded ``session/new``
answer (tests/fixtures/acp): chosen through its model option, or refused with what it offers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from acp.client.connection import ClientSideConnection
from acp.schema import NewSessionResponse

from app.providers.acp.agents import BUILTIN
from app.providers.acp.options import apply_model, model_option, model_refusal
from app.providers.acp.provider import capabilities_of
from app.runtime.creation import required_capabilities
from app.runtime.requests import SessionRequest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "acp"


def opened(agent: str) -> NewSessionResponse:
    """The agent's recorded answer to ``session/new``."""
    for line in (FIXTURES / f"acp-{agent}-text.traffic.jsonl").read_text().splitlines():
        result = json.loads(line)["msg"].get("result")
        if isinstance(result, dict) and "sessionId" in result:
            return NewSessionResponse.model_validate(result)
    raise AssertionError(f"no session/new answer for {agent}")


@pytest.mark.parametrize(
    ("agent", "model"),
    [
        ("claude", "sonnet"),
        ("codex", "gpt-6.1-sol"),
        ("opencode", "stub/stub-model"),
        ("qwen", "$runtime|openai|stub-model(openai)"),
        ("codebuddy", "custom-local:stub-model"),
    ],
)
def test_a_model_the_agent_offers_is_accepted(agent: str, model: str) -> None:
    assert model_refusal(model, opened(agent).config_options, cli=agent) is None


def test_a_model_the_agent_does_not_offer_is_refused_with_what_it_offers() -> None:
    refusal = model_refusal("gpt-9", opened("claude").config_options, cli="claude-agent-acp")
    assert refusal == (
        "claude-agent-acp does not offer model 'gpt-9'; it offers: default, opus, fable, "
        "sonnet, haiku"
    )


@pytest.mark.parametrize("agent", ["copilot", "gemini"])
def test_an_agent_without_a_model_option_cannot_run_a_chosen_model(agent: str) -> None:
    refusal = model_refusal("stub-model", opened(agent).config_options, cli=agent)
    assert refusal is not None
    assert "cannot choose a model per session" in refusal
    assert "leave `model` unset" in refusal


class Recorder:
    """The one request ``apply_model`` sends, as the agent would receive it."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def set_config_option(self, **params: Any) -> None:
        self.sent.append(params)


async def test_the_model_is_set_through_the_agents_model_option_only_when_it_differs() -> None:
    options = opened("claude").config_options
    agent = Recorder()
    connection = cast("ClientSideConnection", agent)
    assert await apply_model(connection, "t1", "sonnet", options, cli="c") is None
    assert agent.sent == [{"config_id": "model", "session_id": "t1", "value": "sonnet"}]
    assert await apply_model(connection, "t1", "default", options, cli="c") is None  # current
    assert await apply_model(connection, "t1", None, options, cli="c") is None  # its own
    assert len(agent.sent) == 1


@pytest.mark.parametrize(
    "agent", ["claude", "codex", "opencode", "qwen", "codebuddy", "copilot", "gemini"]
)
def test_each_recipe_says_whether_its_agent_can_choose_a_model_as_its_session_new_answer_does(
    agent: str,
) -> None:
    # The recipe's flag decides before any process starts (a session naming a model is a 422
    # for an agent without one); the recorded answer of the pinned agent is the truth.
    recipe = BUILTIN[agent]
    offered = model_option(opened(agent).config_options) is not None
    assert recipe.chooses_model is offered
    assert capabilities_of(recipe).model_choice is offered


def test_a_session_naming_a_model_requires_a_provider_that_can_choose_it() -> None:
    def request(**fields: Any) -> SessionRequest:
        return SessionRequest(workspace="/w", **fields)

    assert required_capabilities(request()) == []
    assert required_capabilities(request(model="m")) == ["model_choice"]
    assert required_capabilities(request(model="m", requires=("approvals",))) == [
        "approvals",
        "model_choice",
    ]
    assert required_capabilities(request(model="m", requires=("model_choice",))) == ["model_choice"]
