"""The pure provider selector: order of candidates, skips and their reasons, refusals."""

from __future__ import annotations

import dataclasses

import pytest

from app.errors import InvalidRequest, ProviderUnavailable
from app.providers.base import Capabilities
from app.runtime.selector import (
    ApprovalModeRefused,
    Candidate,
    CapabilitiesUnmet,
    NoProviderAvailable,
    ProviderState,
    Selection,
    Skipped,
    candidates,
    select,
)
from app.settings import SelectionSettings

FULL = Capabilities(
    text_deltas=True,
    approvals=True,
    interrupt=True,
    resume=True,
    usage=True,
    cost=True,
    shared_process=False,
    approval_edits=True,
    model_choice=True,
)
CONFIGURED = ["claude_code", "codex", "opencode"]
SETTINGS = SelectionSettings(
    default="claude_code",
    fallback_chain=["codex", "opencode", "claude_code"],
    scenarios={"refactoring": ["opencode", "codex"]},
)


def ok(capabilities: Capabilities = FULL) -> ProviderState:
    return ProviderState(enabled=True, available=True, capabilities=capabilities)


def down(reason: str) -> ProviderState:
    return ProviderState(
        enabled=True, available=False, unavailable_reason=reason, capabilities=FULL
    )


OFF = "disabled: set providers.codex.enabled = true to use it"
DISABLED = ProviderState(enabled=False, available=False, unavailable_reason=OFF)


def order(provider: str | None = None, scenario: str | None = None) -> list[Candidate]:
    return candidates(
        provider=provider, scenario=scenario, configured=CONFIGURED, selection=SETTINGS
    )


def test_an_explicit_provider_is_the_only_candidate() -> None:
    assert order("codex", scenario="refactoring") == [
        Candidate(provider="codex", reason="explicit")
    ]


def test_an_unknown_explicit_provider_is_refused_as_invalid() -> None:
    with pytest.raises(InvalidRequest, match="unknown provider 'gemini'"):
        order("gemini")


def test_candidates_run_scenario_then_default_then_fallbacks_each_once() -> None:
    assert [(c.provider, c.reason) for c in order(scenario="refactoring")] == [
        ("opencode", "scenario"),
        ("codex", "scenario"),
        ("claude_code", "default"),
    ]
    assert [(c.provider, c.reason) for c in order()] == [
        ("claude_code", "default"),
        ("codex", "fallback"),
        ("opencode", "fallback"),
    ]


def test_an_unmapped_scenario_falls_through_to_the_default() -> None:
    assert order(scenario="debugging")[0] == Candidate(provider="claude_code", reason="default")


def decision(selection: Selection) -> Selection:
    """The choice itself, without the ranking behind it (tests/unit/test_strategies.py)."""
    return dataclasses.replace(selection, ranking=())


def test_the_first_candidate_that_can_serve_is_chosen_with_its_reason() -> None:
    states = {"opencode": ok(), "codex": ok(), "claude_code": ok()}
    assert decision(select(order(scenario="refactoring"), states)) == Selection(
        provider="opencode", reason="scenario"
    )
    assert decision(select(order(), states)) == Selection(provider="claude_code", reason="default")
    assert decision(select(order("codex"), states)) == Selection(
        provider="codex", reason="explicit"
    )


def test_disabled_and_unhealthy_providers_are_skipped_with_their_reasons() -> None:
    states = {"claude_code": down("'claude' was not found"), "codex": DISABLED, "opencode": ok()}
    chosen = select(order(), states)
    assert decision(chosen) == Selection(
        provider="opencode",
        reason="fallback",
        skipped=(
            Skipped(provider="claude_code", why="'claude' was not found"),
            Skipped(provider="codex", why=OFF),
        ),
    )


def test_a_provider_with_no_state_or_not_built_counts_as_disabled() -> None:
    not_built = ProviderState(enabled=True, available=True, capabilities=None)
    chosen = select(order(), {"claude_code": not_built, "opencode": ok()})
    assert chosen.provider == "opencode"
    assert [s.why for s in chosen.skipped] == ["disabled", "disabled"]


def test_a_provider_lacking_a_required_capability_is_skipped() -> None:
    no_approvals = dataclasses.replace(FULL, approvals=False, resume=False)
    states = {"claude_code": ok(no_approvals), "codex": ok()}
    chosen = select(order(), states, requires=["approvals", "resume"])
    assert chosen.provider == "codex"
    assert chosen.skipped == (
        Skipped(provider="claude_code", why="lacks required capabilities: approvals, resume"),
    )


def test_no_candidate_with_the_capabilities_is_a_422_not_a_503() -> None:
    no_cost = dataclasses.replace(FULL, cost=False)
    states = {"claude_code": ok(no_cost), "codex": down("no codex")}
    states["codex"] = dataclasses.replace(states["codex"], capabilities=no_cost)
    states["opencode"] = ok(no_cost)
    with pytest.raises(CapabilitiesUnmet) as raised:
        select(order(), states, requires=["cost"])
    assert raised.value.status == 422
    assert [s.provider for s in raised.value.skipped] == ["claude_code", "codex", "opencode"]
    # An explicit provider lacking it: the same.
    with pytest.raises(CapabilitiesUnmet, match="no candidate provider has every required"):
        select(order("claude_code"), states, requires=["cost", "approvals"])


REFUSES = "Gemini CLI refuses approval_mode 'auto_edits' in a folder it does not trust"


def test_a_provider_refusing_the_approval_mode_is_skipped_with_its_reason() -> None:
    states = {"claude_code": dataclasses.replace(ok(), refuses=REFUSES), "codex": ok()}
    chosen = select(order(), states)
    assert chosen.provider == "codex"
    assert chosen.skipped == (Skipped(provider="claude_code", why=REFUSES),)


def test_every_candidate_refusing_the_approval_mode_is_a_422_saying_why() -> None:
    refusing = dataclasses.replace(ok(), refuses=REFUSES)
    states = {"claude_code": refusing, "codex": refusing, "opencode": refusing}
    with pytest.raises(ApprovalModeRefused, match="no candidate provider runs") as raised:
        select(order(), states)
    assert raised.value.status == 422
    assert [s.why for s in raised.value.skipped] == [REFUSES] * 3
    with pytest.raises(ApprovalModeRefused, match=f"'claude_code' cannot serve: {REFUSES}"):
        select(order("claude_code"), states)
    # One that would run it but is down: waiting may help, so a 503.
    states["codex"] = down("no codex")
    with pytest.raises(NoProviderAvailable):
        select(order(), states)


def test_a_candidate_that_has_them_but_is_down_or_disabled_is_a_503() -> None:
    no_cost = dataclasses.replace(FULL, cost=False)
    for other in (down("no codex"), DISABLED):
        states = {"claude_code": ok(no_cost), "codex": other, "opencode": ok(no_cost)}
        with pytest.raises(NoProviderAvailable):
            select(order(), states, requires=["cost"])


def test_an_unhealthy_provider_without_a_reason_is_unavailable() -> None:
    states = {"claude_code": ProviderState(enabled=True, available=False), "codex": ok()}
    assert select(order(), states).skipped == (Skipped(provider="claude_code", why="unavailable"),)


def test_an_unknown_capability_is_refused_as_invalid() -> None:
    with pytest.raises(InvalidRequest, match="unknown capabilities telepathy"):
        select(order(), {"claude_code": ok()}, requires=["telepathy"])


def test_nothing_available_raises_a_503_listing_every_candidate() -> None:
    states = {"claude_code": down("no claude"), "codex": DISABLED}
    with pytest.raises(NoProviderAvailable) as raised:
        select(order(), states)
    error = raised.value
    assert isinstance(error, ProviderUnavailable)
    assert error.status == 503
    assert error.fields["candidates"] == [
        {"provider": "claude_code", "reason": "no claude"},
        {"provider": "codex", "reason": OFF},
        {"provider": "opencode", "reason": "disabled"},
    ]
    assert "no configured provider" in error.detail


def test_an_explicit_provider_that_cannot_serve_is_a_503_not_a_substitute() -> None:
    with pytest.raises(NoProviderAvailable) as raised:
        select(order("codex"), {"codex": down("app-server does not answer"), "opencode": ok()})
    assert raised.value.detail == "provider 'codex' cannot serve: app-server does not answer"
    assert raised.value.fields["candidates"] == [
        {"provider": "codex", "reason": "app-server does not answer"}
    ]
