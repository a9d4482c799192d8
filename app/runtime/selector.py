"""Choosing a provider for a new session: a pure function over the candidates' state.

    explicit provider ─► scenario's providers ─► default provider ─► fallback chain
        ─► the ones that can serve ─► ranked by the routing strategy ─► the best

``candidates`` lists who may serve a request, in order and with the reason each would be
chosen; ``select`` takes each candidate's state (enabled, health probe, capabilities) and
figures as data, leaves out the ones that cannot serve, and lets the routing strategy
(app/runtime/strategies.py; ``ordered`` by default: the first that can serve) rank the rest.
An explicit provider is the only candidate: when it cannot serve the answer is 503, never a
substitute. The sessions gather the state (probes are cached by the registry, figures
by the figure book) and logs the choice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import get_args

from app.errors import InvalidRequest, ProviderUnavailable
from app.events import ROUTING_STRATEGIES, ApprovalMode, RoutingStrategy, SelectionReason
from app.providers.base import Capabilities, Capability
from app.runtime.figures import ProviderFigures
from app.runtime.strategies import Ranked, rank
from app.settings import BalanceWeights, SelectionSettings

CAPABILITY_NAMES: frozenset[str] = frozenset(get_args(Capability))
"""What ``requires`` may name: the fields of ``Capabilities``."""


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A provider that may serve the request, and why it would be chosen."""

    provider: str
    reason: SelectionReason


@dataclass(frozen=True, kw_only=True)
class ProviderState:
    """What the selector needs to know about one provider, gathered by the caller."""

    enabled: bool
    available: bool
    """The (cached) health probe passed."""
    unavailable_reason: str | None = None
    capabilities: Capabilities | None = None
    """None when the provider is not built (disabled)."""
    refuses: str | None = None
    """Why it cannot run a session in the requested approval mode as configured."""


@dataclass(frozen=True, kw_only=True)
class Skipped:
    provider: str
    why: str


@dataclass(frozen=True, kw_only=True)
class Selection:
    """The chosen provider, why it was chosen, and who was passed over: under ``ordered``
    the candidates before it that cannot serve, under the other strategies every one that
    cannot."""

    provider: str
    reason: SelectionReason
    skipped: tuple[Skipped, ...] = ()
    strategy: RoutingStrategy = "ordered"
    ranking: tuple[Ranked, ...] = ()
    """Every candidate that can serve, best first (the chosen one leads)."""


class NoProviderAvailable(ProviderUnavailable):
    """No candidate can serve; ``candidates`` lists each one with its reason (503)."""

    def __init__(self, skipped: Sequence[Skipped], *, explicit: bool = False) -> None:
        if explicit and skipped:
            detail = f"provider {skipped[0].provider!r} cannot serve: {skipped[0].why}"
        else:
            detail = "no configured provider is available; see each candidate's reason"
        super().__init__(
            detail, candidates=[{"provider": s.provider, "reason": s.why} for s in skipped]
        )
        self.skipped = tuple(skipped)


class ApprovalModeRefused(InvalidRequest):
    """Every candidate would refuse the session's approval mode as configured (422: waiting
    will not help; ``candidates`` says why each refuses it)."""

    type = "approval_mode_refused"
    title = "No candidate runs this approval mode"

    def __init__(self, skipped: Sequence[Skipped]) -> None:
        if len(skipped) == 1:
            detail = f"provider {skipped[0].provider!r} cannot serve: {skipped[0].why}"
        else:
            detail = (
                "no candidate provider runs this approval mode as configured; choose another "
                "approval_mode or provider (each candidate's reason says what to change)"
            )
        super().__init__(
            detail, candidates=[{"provider": s.provider, "reason": s.why} for s in skipped]
        )
        self.skipped = tuple(skipped)


class CapabilitiesUnmet(InvalidRequest):
    """No candidate has every capability ``requires`` names, so none could serve even when
    available (422: a request that waiting will not help; ``candidates`` says what each lacks)."""

    type = "capabilities_unmet"
    title = "No candidate has the required capabilities"

    def __init__(
        self, skipped: Sequence[Skipped], requires: Sequence[str], *, detail: str | None = None
    ) -> None:
        super().__init__(
            detail
            or f"no candidate provider has every required capability ({', '.join(requires)}); "
            "drop a requirement or name a provider that has it (GET /v1/providers lists them)",
            candidates=[{"provider": s.provider, "reason": s.why} for s in skipped],
        )
        self.skipped = tuple(skipped)


def candidates(
    *,
    provider: str | None,
    scenario: str | None,
    configured: Sequence[str],
    selection: SelectionSettings,
) -> list[Candidate]:
    """The providers to try, in order, each once; raises 422 for an unknown explicit name.

    A scenario without a mapping adds nobody: the default provider and the chain still apply.
    """
    if provider is not None:
        if provider not in configured:
            raise InvalidRequest(
                f"unknown provider {provider!r}; configured: {', '.join(configured)}",
                configured=list(configured),
            )
        return [Candidate(provider=provider, reason="explicit")]
    ordered: list[Candidate] = []
    if scenario is not None:
        ordered += [
            Candidate(provider=n, reason="scenario") for n in selection.scenarios.get(scenario, [])
        ]
    ordered.append(Candidate(provider=selection.default, reason="default"))
    ordered += [Candidate(provider=n, reason="fallback") for n in selection.fallback_chain]
    seen: set[str] = set()
    unique: list[Candidate] = []
    for candidate in ordered:
        if candidate.provider not in seen:
            seen.add(candidate.provider)
            unique.append(candidate)
    return unique


def check_approval_mode(mode: ApprovalMode, allowed: Sequence[ApprovalMode]) -> None:
    """Raise 422 when the gateway does not enable ``mode`` (``allowed``:
    ``sessions.allowed_approval_modes``)."""
    if mode not in allowed:
        raise InvalidRequest(
            f"approval_mode {mode!r} is not enabled on this gateway; "
            f"use one of {', '.join(allowed)} "
            "(operators enable more in sessions.allowed_approval_modes)",
            allowed=list(allowed),
        )


def model_unmet(unmet: CapabilitiesUnmet, model: str, requires: Sequence[str]) -> CapabilitiesUnmet:
    """``unmet`` for a session that names ``model``: what to change, said for the model."""
    return CapabilitiesUnmet(
        unmet.skipped,
        requires,
        detail=f"no candidate provider can run model {model!r} with the required "
        "capabilities: an agent without model_choice runs the model it is configured "
        "with; leave `model` unset, or name a provider whose capabilities include "
        "model_choice (GET /v1/providers)",
    )


def check_requires(requires: Sequence[str]) -> None:
    """Raise 422 when ``requires`` names something that is not a capability."""
    unknown = sorted(set(requires) - CAPABILITY_NAMES)
    if unknown:
        raise InvalidRequest(
            f"requires names unknown capabilities {', '.join(unknown)}; "
            f"known: {', '.join(sorted(CAPABILITY_NAMES))}",
            known=[name for name in sorted(CAPABILITY_NAMES)],
        )


def why_not(state: ProviderState | None, requires: Sequence[str]) -> str | None:
    """Why this provider cannot serve the request, or None when it can."""
    if state is None:
        return "disabled"
    if not state.enabled:
        return state.unavailable_reason or "disabled"
    if not state.available:
        return state.unavailable_reason or "unavailable"
    if state.capabilities is None:
        return "disabled"
    missing = [name for name in requires if not getattr(state.capabilities, name)]
    if missing:
        return f"lacks required capabilities: {', '.join(missing)}"
    return state.refuses


def _lacks(state: ProviderState | None, requires: Sequence[str]) -> bool:
    """Whether the provider is known to lack a required capability (built or not)."""
    if state is None or state.capabilities is None:
        return False
    return any(not getattr(state.capabilities, name) for name in requires)


def _unfit(state: ProviderState | None, requires: Sequence[str]) -> bool:
    """Whether the provider is known to be unable to serve the request however long one
    waits: it lacks a required capability or refuses the approval mode."""
    return _lacks(state, requires) or (state is not None and state.refuses is not None)


def resolve_strategy(
    requested: str | None, scenario: str | None, selection: SelectionSettings
) -> RoutingStrategy:
    """The request's strategy, else its scenario's (``selection.strategies``), else
    ``selection.strategy``; raises 422 naming the known ones for an unknown name."""
    if requested is not None:
        for known in ROUTING_STRATEGIES:
            if requested == known:
                return known
        raise InvalidRequest(
            f"unknown routing strategy {requested!r}; known: {', '.join(ROUTING_STRATEGIES)}",
            known=list(ROUTING_STRATEGIES),
        )
    if scenario is not None and scenario in selection.strategies:
        return selection.strategies[scenario]
    return selection.strategy


def select(
    ordered: Sequence[Candidate],
    states: Mapping[str, ProviderState],
    *,
    requires: Sequence[str] = (),
    strategy: RoutingStrategy = "ordered",
    figures: Mapping[str, ProviderFigures] | None = None,
    weights: BalanceWeights | None = None,
    min_turns: int = 0,
    rotation: int = 0,
) -> Selection:
    """The best candidate that can serve by ``strategy`` (``ordered``: the first); raises
    ``CapabilitiesUnmet`` (422) when none has the required capabilities,
    ``ApprovalModeRefused`` (422) when none could serve it in its approval mode, else
    ``NoProviderAvailable`` (503) listing them all."""
    check_requires(requires)
    skipped: list[Skipped] = []
    eligible: list[Candidate] = []
    for candidate in ordered:
        why = why_not(states.get(candidate.provider), requires)
        if why is None:
            eligible.append(candidate)
        else:
            skipped.append(Skipped(provider=candidate.provider, why=why))
    if not eligible:
        if requires and all(_lacks(states.get(c.provider), requires) for c in ordered):
            raise CapabilitiesUnmet(skipped, requires)
        if all(_unfit(states.get(c.provider), requires) for c in ordered):
            raise ApprovalModeRefused(skipped)
        explicit = len(ordered) == 1 and ordered[0].reason == "explicit"
        raise NoProviderAvailable(skipped, explicit=explicit)
    ranking = rank(
        strategy,
        [c.provider for c in eligible],
        figures or {},
        weights=weights,
        min_turns=min_turns,
        rotation=rotation,
    )
    best = next(c for c in eligible if c.provider == ranking[0].provider)
    if strategy == "ordered":  # as before strategies: only those passed over before it
        position = [c.provider for c in ordered].index(best.provider)
        before = {c.provider for c in ordered[:position]}
        skipped = [s for s in skipped if s.provider in before]
    return Selection(
        provider=best.provider,
        reason=best.reason,
        skipped=tuple(skipped),
        strategy=strategy,
        ranking=tuple(ranking),
    )
