"""Routing strategies: ranking the candidates that can serve, from their measured figures.

A pure function over data: ``rank`` takes the eligible candidates (enabled, healthy, with the
required capabilities, in the selector's order) and each one's ``ProviderFigures``, and returns
them best first with the score each got (lower is better). Ties keep the selector's order.

* ``ordered``: the selector's order (explicit → scenario → default → fallback chain).
* ``round_robin``: the selector's order rotated by ``rotation`` (how many round-robin choices
  were made before among these candidates).
* ``least_loaded``: fewest running turns.
* ``lowest_latency``: lowest median time to first text.
* ``lowest_cost``: lowest mean cost per turn.
* ``balanced``: ``weights.latency * latency / max latency + weights.cost * cost / max cost +
  weights.failure_rate * failure rate``, each figure taken over the measured candidates.

The last three learn: a candidate with fewer than ``min_turns`` measured turns is *explored*,
ranked before every measured one (the least tried, counting its running turns, first), so an
untried provider gets its turns and a latency strategy can find the faster one. A measured
candidate missing a figure (its CLI reports no cost, no turn printed text) is scored with the
mean of the other measured candidates' figure; when none has it, that figure ties everyone.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import assert_never

from app.events import RoutingStrategy
from app.runtime.figures import ProviderFigures
from app.settings import BalanceWeights

Figure = Callable[[ProviderFigures], float | None]


def _latency(figures: ProviderFigures) -> float | None:
    return figures.first_text_p50_s


def _cost(figures: ProviderFigures) -> float | None:
    return figures.cost_per_turn_usd


def _failures(figures: ProviderFigures) -> float | None:
    return figures.failure_rate


@dataclass(frozen=True, kw_only=True)
class Ranked:
    """One eligible candidate, where the strategy put it and why."""

    provider: str
    score: float | None
    """Lower is better; None under ``ordered`` and ``round_robin``, and while exploring."""
    turns: int
    exploring: bool = False


def rank(
    strategy: RoutingStrategy,
    eligible: Sequence[str],
    figures: Mapping[str, ProviderFigures],
    *,
    weights: BalanceWeights | None = None,
    min_turns: int = 0,
    rotation: int = 0,
) -> list[Ranked]:
    """The eligible candidates, best first, each with its score."""
    of = {name: figures.get(name) or ProviderFigures() for name in eligible}
    match strategy:
        case "ordered":
            return [Ranked(provider=n, score=None, turns=of[n].turns) for n in eligible]
        case "round_robin":
            start = rotation % len(eligible) if eligible else 0
            rotated = [*eligible[start:], *eligible[:start]]
            return [Ranked(provider=n, score=None, turns=of[n].turns) for n in rotated]
        case "least_loaded":
            scored = {n: float(of[n].running) for n in eligible}
            return _sorted(eligible, scored, of)
        case "lowest_latency":
            return _learning(eligible, of, min_turns, lambda m: _filled(m, of, _latency))
        case "lowest_cost":
            return _learning(eligible, of, min_turns, lambda m: _filled(m, of, _cost))
        case "balanced":
            chosen = weights or BalanceWeights()
            return _learning(eligible, of, min_turns, lambda m: _balanced(m, of, chosen))
        case _:
            assert_never(strategy)


def _sorted(
    order: Sequence[str], scores: Mapping[str, float | None], of: Mapping[str, ProviderFigures]
) -> list[Ranked]:
    """``order`` sorted by score, stable (a score is None only when no candidate has the
    figure, so they all tie)."""
    ranked = sorted(order, key=lambda n: _key(scores[n]))
    return [Ranked(provider=n, score=scores[n], turns=of[n].turns) for n in ranked]


def _key(score: float | None) -> float:
    return 0.0 if score is None else score


def _learning(
    eligible: Sequence[str],
    of: Mapping[str, ProviderFigures],
    min_turns: int,
    score: Callable[[Sequence[str]], Mapping[str, float | None]],
) -> list[Ranked]:
    """Explored candidates first (least tried first), then the measured ones by ``score``."""
    exploring = [n for n in eligible if of[n].turns < min_turns]
    measured = [n for n in eligible if of[n].turns >= min_turns]
    explored = sorted(exploring, key=lambda n: of[n].turns + of[n].running)
    first = [Ranked(provider=n, score=None, turns=of[n].turns, exploring=True) for n in explored]
    return first + _sorted(measured, score(measured), of) if measured else first


def _filled(
    measured: Sequence[str], of: Mapping[str, ProviderFigures], figure: Figure
) -> dict[str, float | None]:
    """Each measured candidate's figure; a missing one is the mean of the others'."""
    known = {n: value for n in measured if (value := figure(of[n])) is not None}
    mean = statistics.fmean(known.values()) if known else None
    return {n: known.get(n, mean) for n in measured}


def _balanced(
    measured: Sequence[str], of: Mapping[str, ProviderFigures], weights: BalanceWeights
) -> Mapping[str, float | None]:
    """The weighted sum of latency and cost (each over its largest) and the failure rate."""
    parts = (
        (weights.latency, _filled(measured, of, _latency), True),
        (weights.cost, _filled(measured, of, _cost), True),
        (weights.failure_rate, _filled(measured, of, _failures), False),
    )
    scores = dict.fromkeys(measured, 0.0)
    for weight, values, relative in parts:
        largest = max((v for v in values.values() if v is not None), default=None)
        for name in measured:
            value = values[name]
            if value is None or weight == 0:
                continue
            if relative:
                value = value / largest if largest else 0.0
            scores[name] += weight * value
    return scores
