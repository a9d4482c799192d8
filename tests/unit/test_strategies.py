"""Routing strategies over injected figures: every strategy, ties, missing figures, exploration,
and the selector's exclusions around them."""

from __future__ import annotations

import pytest

from app.errors import InvalidRequest
from app.events import ROUTING_STRATEGIES
from app.providers.base import Capabilities
from app.runtime.figures import ProviderFigures
from app.runtime.selector import (
    Candidate,
    NoProviderAvailable,
    ProviderState,
    resolve_strategy,
    select,
)
from app.runtime.strategies import Ranked, rank
from app.settings import BalanceWeights, SelectionSettings

ABC = ["a", "b", "c"]


def measured(
    latency: float | None = None,
    *,
    cost: float | None = None,
    failures: float = 0.0,
    turns: int = 10,
    running: int = 0,
) -> ProviderFigures:
    return ProviderFigures(
        turns=turns,
        first_text_p50_s=latency,
        duration_p50_s=latency,
        failure_rate=failures,
        cost_per_turn_usd=cost,
        running=running,
    )


def order_of(ranking: list[Ranked]) -> list[str]:
    return [r.provider for r in ranking]


def test_ordered_keeps_the_selector_order_and_scores_nobody() -> None:
    figures = {"a": measured(9.0), "b": measured(1.0), "c": measured(5.0)}
    ranking = rank("ordered", ABC, figures)
    assert order_of(ranking) == ABC
    assert [r.score for r in ranking] == [None, None, None]
    assert [r.turns for r in ranking] == [10, 10, 10]


def test_lowest_latency_ranks_by_median_time_to_first_text() -> None:
    figures = {"a": measured(9.0), "b": measured(1.0), "c": measured(5.0)}
    ranking = rank("lowest_latency", ABC, figures, min_turns=3)
    assert order_of(ranking) == ["b", "c", "a"]
    assert [r.score for r in ranking] == [1.0, 5.0, 9.0]
    assert not any(r.exploring for r in ranking)


def test_a_provider_with_too_few_turns_is_explored_before_the_measured_ones() -> None:
    figures = {"a": measured(1.0), "b": measured(9.0, turns=2), "c": measured(5.0)}
    ranking = rank("lowest_latency", ABC, figures, min_turns=3)
    assert order_of(ranking) == ["b", "a", "c"]
    assert ranking[0].exploring
    assert ranking[0].score is None


def test_the_least_tried_explorer_goes_first_counting_its_running_turns() -> None:
    figures = {
        "a": ProviderFigures(turns=1),
        "b": ProviderFigures(turns=0, running=2),  # two tries already under way
        "c": ProviderFigures(turns=0),
    }
    ranking = rank("lowest_latency", ABC, figures, min_turns=3)
    assert order_of(ranking) == ["c", "a", "b"]
    assert all(r.exploring for r in ranking)


def test_untried_providers_with_no_figures_at_all_are_explored_in_selector_order() -> None:
    assert order_of(rank("lowest_cost", ABC, {}, min_turns=1)) == ABC


def test_with_min_turns_zero_nobody_is_explored() -> None:
    figures = {"a": measured(9.0, turns=0), "b": measured(1.0, turns=0)}
    assert order_of(rank("lowest_latency", ["a", "b"], figures, min_turns=0)) == ["b", "a"]


def test_equal_scores_keep_the_selector_order() -> None:
    figures = {"a": measured(2.0), "b": measured(1.0), "c": measured(1.0)}
    assert order_of(rank("lowest_latency", ABC, figures)) == ["b", "c", "a"]
    figures = {"a": measured(cost=0.5), "b": measured(cost=0.5), "c": measured(cost=0.5)}
    assert order_of(rank("lowest_cost", ["c", "a", "b"], figures)) == ["c", "a", "b"]


def test_lowest_cost_scores_a_provider_that_reports_no_cost_by_the_others_mean() -> None:
    figures = {"a": measured(cost=0.30), "b": measured(cost=None), "c": measured(cost=0.10)}
    ranking = rank("lowest_cost", ABC, figures)
    assert order_of(ranking) == ["c", "b", "a"]
    assert ranking[1].score == pytest.approx(0.20)


def test_when_nobody_reports_the_figure_everyone_ties_in_selector_order() -> None:
    figures = {name: measured(cost=None) for name in ABC}
    ranking = rank("lowest_cost", ABC, figures)
    assert order_of(ranking) == ABC
    assert [r.score for r in ranking] == [None, None, None]


def test_least_loaded_picks_the_fewest_running_turns_and_needs_no_exploration() -> None:
    figures = {
        "a": ProviderFigures(running=3),
        "b": ProviderFigures(running=1),
        "c": ProviderFigures(running=1),
    }
    ranking = rank("least_loaded", ABC, figures, min_turns=5)
    assert order_of(ranking) == ["b", "c", "a"]
    assert [r.score for r in ranking] == [1.0, 1.0, 3.0]


def test_round_robin_rotates_through_the_candidates() -> None:
    chosen = [rank("round_robin", ABC, {}, rotation=n)[0].provider for n in range(5)]
    assert chosen == ["a", "b", "c", "a", "b"]
    assert order_of(rank("round_robin", ABC, {}, rotation=1)) == ["b", "c", "a"]


def test_balanced_weighs_latency_cost_and_failures() -> None:
    fast_but_failing = measured(1.0, cost=0.10, failures=0.5)
    slow_but_sound = measured(4.0, cost=0.10, failures=0.0)
    figures = {"a": fast_but_failing, "b": slow_but_sound}
    # latency a 0.25 + cost 1 + failures 0.5 = 1.75 against b 1 + 1 + 0 = 2
    ranking = rank("balanced", ["a", "b"], figures, weights=BalanceWeights())
    assert order_of(ranking) == ["a", "b"]
    assert [r.score for r in ranking] == [pytest.approx(1.75), pytest.approx(2.0)]
    careful = BalanceWeights(latency=1.0, cost=0.0, failure_rate=4.0)
    assert order_of(rank("balanced", ["a", "b"], figures, weights=careful)) == ["b", "a"]
    hasty = BalanceWeights(latency=1.0, cost=0.0, failure_rate=0.0)
    assert order_of(rank("balanced", ["a", "b"], figures, weights=hasty)) == ["a", "b"]


def test_balanced_fills_a_missing_cost_with_the_others_mean() -> None:
    figures = {"a": measured(2.0, cost=None), "b": measured(2.0, cost=0.2)}
    ranking = rank("balanced", ["a", "b"], figures, weights=BalanceWeights())
    assert ranking[0].score == ranking[1].score == pytest.approx(2.0)
    assert order_of(ranking) == ["a", "b"]


def test_balanced_explores_too() -> None:
    figures = {"a": measured(1.0), "b": ProviderFigures()}
    assert order_of(rank("balanced", ["a", "b"], figures, min_turns=1)) == ["b", "a"]


# --- the selector around the strategies ---------------------------------------------------

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
NO_APPROVALS = Capabilities(**{**vars(FULL), "approvals": False})
OK = ProviderState(enabled=True, available=True, capabilities=FULL)
DOWN = ProviderState(enabled=True, available=False, unavailable_reason="probe failed")
CHAIN = [
    Candidate(provider="a", reason="default"),
    Candidate(provider="b", reason="fallback"),
    Candidate(provider="c", reason="fallback"),
]
FAST_C = {"a": measured(5.0), "b": measured(3.0), "c": measured(1.0)}


def test_the_fastest_provider_that_can_serve_is_chosen_with_its_own_reason() -> None:
    chosen = select(CHAIN, {"a": OK, "b": OK, "c": OK}, strategy="lowest_latency", figures=FAST_C)
    assert (chosen.provider, chosen.reason, chosen.strategy) == ("c", "fallback", "lowest_latency")
    assert [(r.provider, r.score) for r in chosen.ranking] == [("c", 1.0), ("b", 3.0), ("a", 5.0)]
    assert chosen.skipped == ()


def test_an_unhealthy_or_incapable_provider_is_never_scored() -> None:
    states = {"a": OK, "b": OK, "c": DOWN}
    chosen = select(CHAIN, states, strategy="lowest_latency", figures=FAST_C)
    assert chosen.provider == "b"
    assert [r.provider for r in chosen.ranking] == ["b", "a"]
    assert [(s.provider, s.why) for s in chosen.skipped] == [("c", "probe failed")]
    weak = ProviderState(enabled=True, available=True, capabilities=NO_APPROVALS)
    chosen = select(
        CHAIN,
        {"a": OK, "b": weak, "c": weak},
        requires=["approvals"],
        strategy="lowest_latency",
        figures=FAST_C,
    )
    assert chosen.provider == "a"
    assert [s.provider for s in chosen.skipped] == ["b", "c"]


def test_under_ordered_only_the_candidates_before_the_chosen_one_are_skipped() -> None:
    chosen = select(CHAIN, {"a": DOWN, "b": OK, "c": DOWN}, figures=FAST_C)
    assert chosen.provider == "b"
    assert [s.provider for s in chosen.skipped] == ["a"]
    assert [r.provider for r in chosen.ranking] == ["b"]


def test_an_explicit_provider_is_never_substituted_by_a_faster_one() -> None:
    explicit = [Candidate(provider="a", reason="explicit")]
    chosen = select(explicit, {"a": OK, "c": OK}, strategy="lowest_latency", figures=FAST_C)
    assert (chosen.provider, chosen.reason) == ("a", "explicit")
    with pytest.raises(NoProviderAvailable, match="provider 'a' cannot serve"):
        select(explicit, {"a": DOWN, "c": OK}, strategy="lowest_latency", figures=FAST_C)


def test_the_strategy_comes_from_the_request_then_the_scenario_then_the_default() -> None:
    settings = SelectionSettings(strategy="least_loaded", strategies={"debugging": "lowest_cost"})
    assert resolve_strategy("balanced", "debugging", settings) == "balanced"
    assert resolve_strategy(None, "debugging", settings) == "lowest_cost"
    assert resolve_strategy(None, "refactoring", settings) == "least_loaded"
    assert resolve_strategy(None, None, SelectionSettings()) == "ordered"


def test_an_unknown_strategy_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(InvalidRequest, match="unknown routing strategy 'fastest'") as caught:
        resolve_strategy("fastest", None, SelectionSettings())
    assert caught.value.fields["known"] == list(ROUTING_STRATEGIES)
