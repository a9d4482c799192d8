"""Model-server faults played by the stub, seen through the real CLIs and a real gateway.

Each CLI retries failed model requests itself (budgets from ``retry.cli_request_retries`` /
``retry.cli_stream_retries``, OpenCode's fixed 5); the gateway reports those retries as
``retry.scheduled`` events of source ``cli``. The stub's fault directives (``tests.stub_llm``)
play the faults: ``[[fail:<status>:<n>]]``, ``[[cut:<k>[:<n>]]]``, ``[[hang]]``,
``[[error:<status>]]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import GatewayFactory
from tests.e2e.providers import CONFIGS
from tests.e2e.test_contract import create_session, run_turn, types
from tests.stub_llm import DEFAULT_TEXT, StubLLM

pytestmark = pytest.mark.e2e

PROVIDERS = ["claude_code", "codex", "opencode"]
NO_GATEWAY_RETRY = {"enabled": False}


def section(provider: str, stub: StubLLM, tmp_path: Path) -> dict[str, Any]:
    """The provider's section as ``make_gateway`` builds it (same HOME: ``tmp_path/home``)."""
    return CONFIGS[provider](stub, tmp_path / "home")


def gateway_budgets(provider: str, stub: StubLLM, tmp_path: Path) -> dict[str, Any]:
    """Overrides that leave the CLI retry budgets to the gateway's ``retry`` settings.

    tests/e2e/providers.py pins them to 0 in the provider sections (CLAUDE_CODE_MAX_RETRIES,
    Codex ``request_max_retries`` / ``stream_max_retries``); this removes those pins.
    """
    values = section(provider, stub, tmp_path)
    if provider == "claude_code":
        env = {k: v for k, v in values["env"].items() if k != "CLAUDE_CODE_MAX_RETRIES"}
        return {provider: {"env": env}}
    if provider == "codex":
        config = values["config"]
        stub_provider = config["model_providers"]["stub"]
        for key in ("request_max_retries", "stream_max_retries"):
            del stub_provider[key]
        return {provider: {"config": config}}
    return {}


def cli_retries(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["data"] for e in events if e["type"] == "retry.scheduled" and e["data"]["source"] == "cli"
    ]


def gateway_retries(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["data"]
        for e in events
        if e["type"] == "retry.scheduled" and e["data"]["source"] == "gateway"
    ]


def turn_ends(events: list[dict[str, Any]]) -> list[str]:
    return [t for t in types(events) if t in ("turn.completed", "turn.failed", "turn.interrupted")]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_two_failed_requests_are_retried_by_the_cli_and_the_turn_completes(
    provider: str, make_gateway: GatewayFactory, workspace: Path, stub: StubLLM, tmp_path: Path
) -> None:
    # Codex's HTTP-level retries are silent; with none of them each 500 becomes a visible
    # stream reconnect ("Reconnecting... n/2", willRetry).
    retry = {"cli_request_retries": 0 if provider == "codex" else 2, "cli_stream_retries": 2}
    overrides = gateway_budgets(provider, stub, tmp_path)
    gateway = make_gateway(provider, retry=retry, **overrides).start()
    with gateway.client() as client:
        sid = create_session(client, workspace)["id"]
        events = run_turn(client, sid, "[[fail:500:2]]")

    assert turn_ends(events) == ["turn.completed"], events[-1]
    assert events[-1]["data"]["final_text"] == DEFAULT_TEXT
    assert stub.fault_uses("[[fail:500:2]]") == 2
    assert [r.status for r in stub.responses] == [500, 500, 200]
    # The budget the gateway set is what the CLI reports (OpenCode reports none).
    budget = None if provider == "opencode" else 2
    retries = [(d["attempt"], d["max_attempts"], d["kind"]) for d in cli_retries(events)]
    assert retries == [(1, budget, "server_error"), (2, budget, "server_error")]
    assert gateway_retries(events) == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_auth_failure_fails_once_and_the_gateway_does_not_retry_it(
    provider: str, make_gateway: GatewayFactory, workspace: Path
) -> None:
    # Gateway retries stay on (the default policy): auth is never retried by the gateway.
    gateway = make_gateway(provider).start()
    with gateway.client() as client:
        sid = create_session(client, workspace)["id"]
        events = run_turn(client, sid, "[[error:401]]")
        turns = client.get(f"/v1/sessions/{sid}/turns").json()["turns"]

    assert turn_ends(events) == ["turn.failed"]
    error = events[-1]["data"]["error"]
    assert (error["kind"], error["retryable"]) == ("auth", False), error
    assert gateway_retries(events) == []
    assert [t["status"] for t in turns] == ["failed"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stream_cut_once_is_recovered_by_the_cli(
    provider: str, make_gateway: GatewayFactory, workspace: Path, stub: StubLLM, tmp_path: Path
) -> None:
    retry = {**NO_GATEWAY_RETRY, "cli_request_retries": 0, "cli_stream_retries": 2}
    overrides = gateway_budgets(provider, stub, tmp_path)
    gateway = make_gateway(provider, retry=retry, **overrides).start()
    with gateway.client() as client:
        sid = create_session(client, workspace)["id"]
        events = run_turn(client, sid, "[[cut:2:1]]")

    assert turn_ends(events) == ["turn.completed"], events[-1]
    assert events[-1]["data"]["final_text"] == DEFAULT_TEXT
    answers = [(r.request.body["stream"], r.cut, r.completed) for r in stub.responses]
    retries = [(d["attempt"], d["kind"]) for d in cli_retries(events)]
    completed = [e["data"]["text"] for e in events if e["type"] == "message.completed"]
    if provider == "claude_code":
        # Claude Code re-asks the cut request, silently, as a non-streaming one
        # (CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK is left unset): no retry event. Whether
        # it printed the cut answer's deltas before it gave up on that stream depends on
        # timing; when it did, that message is completed with exactly what streamed, before
        # the answer asked again.
        assert answers == [(True, True, False), (False, False, True)]
        assert retries == []
        final_id = next(
            e["data"]["message_id"]
            for e in events
            if e["type"] == "message.completed" and e["data"]["text"] == DEFAULT_TEXT
        )
        cut_text = "".join(
            e["data"]["text"]
            for e in events
            if e["type"] == "message.delta" and e["data"]["message_id"] != final_id
        )
        assert cut_text in ("", "part 1 ", "part 1 part 2 ")
        assert completed == ([cut_text] if cut_text else []) + [DEFAULT_TEXT]
    else:
        # Codex and OpenCode stream again; both report it as a CLI retry.
        assert answers == [(True, True, False), (True, False, True)]
        assert retries == [(1, "network")]
    if provider == "codex":
        # Codex reports the cut answer's two deltas, and even completes that message.
        assert sorted(completed) == sorted([DEFAULT_TEXT, "part 1 part 2 "])
    if provider == "opencode":
        assert completed == [DEFAULT_TEXT]
    assert gateway_retries(events) == []


@pytest.mark.parametrize("provider", ["claude_code", "codex"])
def test_a_stream_cut_every_time_fails_the_turn_as_a_retryable_network_error(
    provider: str, make_gateway: GatewayFactory, workspace: Path, stub: StubLLM, tmp_path: Path
) -> None:
    # (OpenCode is left out: a cut carries no retry-after, so its 5 fixed retries back off
    # 2 + 4.5 + 9 + 20 + 30 s and the turn fails after ~65 s, kind network.)
    retry = {**NO_GATEWAY_RETRY, "cli_request_retries": 0, "cli_stream_retries": 1}
    overrides = gateway_budgets(provider, stub, tmp_path)
    gateway = make_gateway(provider, retry=retry, **overrides).start()
    with gateway.client() as client:
        sid = create_session(client, workspace)["id"]
        events = run_turn(client, sid, "[[cut:2]]")

    assert turn_ends(events) == ["turn.failed"], events[-1]
    error = events[-1]["data"]["error"]
    assert (error["kind"], error["retryable"]) == ("network", True), error
    answers = [(r.request.body["stream"], r.cut) for r in stub.responses]
    if provider == "claude_code":
        # The non-streaming fallback is cut too; with CLAUDE_CODE_MAX_RETRIES=0 that is final.
        assert answers == [(True, True), (False, True)]
        assert cli_retries(events) == []
    else:
        assert answers == [(True, True), (True, True)]
        assert [(d["attempt"], d["max_attempts"]) for d in cli_retries(events)] == [(1, 1)]
    assert gateway_retries(events) == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_hung_stream_fails_the_turn_on_the_idle_timeout(
    provider: str, make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    # Keep-alives reach the CLI every 0.5 s, but the CLI prints nothing: the gateway's idle
    # timeout ends the turn, not the CLI's own (Codex stream_idle_timeout_ms: 300 s).
    idle = {provider: {"turn_idle_timeout_s": 3}}
    gateway = make_gateway(provider, retry=NO_GATEWAY_RETRY, **idle).start()
    with gateway.client() as client:
        sid = create_session(client, workspace)["id"]
        events = run_turn(client, sid, "[[hang]]")

    assert turn_ends(events) == ["turn.failed"], events[-1]
    error = events[-1]["data"]["error"]
    assert (error["kind"], error["retryable"]) == ("idle_timeout", True), error
    assert "turn_idle_timeout_s" in error["message"]
    assert "message.delta" not in types(events)
    assert len(stub.model_requests()) == 1
    assert gateway_retries(events) == []
