"""Choosing a provider: the candidates' state gathered for the pure selector.

``Chooser`` reads the health probes (cached by the registry), what each built provider can do
and the measured figures, lets ``select`` (app/runtime/selector.py) rank them under the
routing strategy, keeps the round-robin turns, and logs the choice. New sessions choose with
it, and so does a session failing over (``next_for``), with the providers it tried left out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from app.events import ApprovalMode, RoutingStrategy
from app.providers.base import Provider
from app.providers.registry import ProviderRegistry
from app.runtime.figures import FigureBook
from app.runtime.selector import (
    NoProviderAvailable,
    ProviderState,
    Selection,
    Skipped,
    candidates,
    check_requires,
    resolve_strategy,
    select,
)
from app.settings import Settings

log = logging.getLogger(__name__)


class Chooser:
    """Chooses providers for one ``LocalSessions`` (its figures, its round-robin turns)."""

    def __init__(
        self,
        *,
        settings: Settings,
        registry: ProviderRegistry,
        providers: Mapping[str, Provider],
        figures: FigureBook,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.providers = providers
        self.figures = figures
        self.rotations: dict[tuple[str, ...], int] = {}
        """Round-robin choices made so far, by the candidates they were made among."""

    async def choose(
        self,
        provider: str | None,
        scenario: str | None,
        requires: Sequence[str],
        *,
        strategy: RoutingStrategy = "ordered",
        exclude: Sequence[str] = (),
        approval_mode: ApprovalMode | None = None,
    ) -> Selection:
        """Gather the candidates' state (cached probes) and figures, and let the pure
        selector choose (among the candidates not in ``exclude`` that run ``approval_mode``)."""
        check_requires(requires)
        ordered = candidates(
            provider=provider,
            scenario=scenario,
            configured=list(self.settings.providers),
            selection=self.settings.selection,
        )
        ordered = [c for c in ordered if c.provider not in exclude]
        if not ordered:
            raise NoProviderAvailable(
                [Skipped(provider=name, why="already tried") for name in exclude]
            )
        healths = await asyncio.gather(*(self.registry.health(c.provider) for c in ordered))
        states: dict[str, ProviderState] = {}
        for candidate, health in zip(ordered, healths, strict=True):
            built = self.providers.get(candidate.provider)
            states[candidate.provider] = ProviderState(
                enabled=self.settings.providers[candidate.provider].enabled,
                available=health.available,
                unavailable_reason=health.reason,
                capabilities=built.capabilities if built else None,
                refuses=built.refuses(approval_mode) if built and approval_mode else None,
            )
        names = tuple(c.provider for c in ordered)
        try:
            chosen = select(
                ordered,
                states,
                requires=requires,
                strategy=strategy,
                figures=self.figures.all(names),
                weights=self.settings.selection.weights,
                min_turns=self.settings.selection.min_turns,
                rotation=self.rotations.get(names, 0),
            )
        except NoProviderAvailable as exc:
            log.warning(
                "no provider available",
                extra={"candidates": [(s.provider, s.why) for s in exc.skipped]},
            )
            raise
        if strategy == "round_robin":
            self.rotations[names] = self.rotations.get(names, 0) + 1
        log.info(
            "provider %s selected (%s, %s)",
            chosen.provider,
            chosen.reason,
            strategy,
            extra={
                "provider": chosen.provider,
                "reason": chosen.reason,
                "strategy": strategy,
                "scores": [(r.provider, r.score) for r in chosen.ranking],
                "skipped": [(s.provider, s.why) for s in chosen.skipped],
                "requires": list(requires),
            },
        )
        return chosen

    async def next_for(
        self,
        scenario: str | None,
        requires: Sequence[str],
        strategy: str,
        exclude: Sequence[str],
        approval_mode: ApprovalMode,
    ) -> Selection:
        """The provider a failing-over session moves to (raises when nobody can serve)."""
        ranking = resolve_strategy(strategy, None, self.settings.selection)
        return await self.choose(
            None, scenario, requires, strategy=ranking, exclude=exclude, approval_mode=approval_mode
        )
