"""Each provider's measured figures: what a turn's end adds, what is left out, the window."""

from __future__ import annotations

import pytest

from app.events import TurnError
from app.runtime.figures import FigureBook, TurnSample, summarize


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def turn(
    book: FigureBook,
    clock: Clock,
    *,
    first_text_after: float | None,
    lasting: float,
    status: str = "completed",
    error: TurnError | None = None,
    cost: float | None = None,
    provider: str = "codex",
) -> None:
    timing = book.turn_started(provider)
    start = clock.now
    if first_text_after is not None:
        timing.first_text = start + first_text_after
    clock.now = start + lasting
    book.turn_ended(timing, status=status, error=error, cost_usd=cost)


def test_a_completed_turn_gives_its_time_to_first_text_duration_and_cost() -> None:
    clock = Clock()
    book = FigureBook(window_turns=10, monotonic=clock)
    turn(book, clock, first_text_after=0.5, lasting=2.0, cost=0.01)
    figures = book.figures("codex")
    assert figures.turns == 1
    assert figures.first_text_p50_s == pytest.approx(0.5)
    assert figures.duration_p50_s == pytest.approx(2.0)
    assert figures.failure_rate == 0.0
    assert figures.cost_per_turn_usd == pytest.approx(0.01)
    assert figures.running == 0


def test_running_turns_are_counted_until_they_end() -> None:
    clock = Clock()
    book = FigureBook(window_turns=10, monotonic=clock)
    first = book.turn_started("claude_code")
    book.turn_started("claude_code")
    assert book.figures("claude_code").running == 2
    assert book.figures("claude_code").turns == 0
    book.turn_ended(first, status="completed")
    assert book.figures("claude_code").running == 1


def test_failures_count_in_the_rate_but_not_in_the_duration() -> None:
    clock = Clock()
    book = FigureBook(window_turns=10, monotonic=clock)
    turn(book, clock, first_text_after=1.0, lasting=3.0)
    failed = TurnError(kind="server_error", message="500")
    turn(book, clock, first_text_after=None, lasting=0.1, status="failed", error=failed)
    figures = book.figures("codex")
    assert figures.turns == 2
    assert figures.failure_rate == 0.5
    assert figures.duration_p50_s == pytest.approx(3.0)  # a quick failure is not a fast turn
    assert figures.first_text_p50_s == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        ("interrupted", TurnError(kind="interrupted", message="stopped by the client")),
        ("failed", TurnError(kind="invalid_request", message="prompt too long")),
        ("failed", TurnError(kind="resource_limit", message="too much", reason="output_limit")),
        ("failed", TurnError(kind="unknown", message="disk", reason="storage_unavailable")),
    ],
)
def test_turns_that_say_nothing_about_the_provider_are_not_measured(
    status: str, error: TurnError
) -> None:
    clock = Clock()
    book = FigureBook(window_turns=10, monotonic=clock)
    turn(book, clock, first_text_after=0.2, lasting=1.0, status=status, error=error)
    assert book.figures("codex").turns == 0
    assert book.figures("codex").running == 0


def test_the_window_keeps_the_last_turns_only() -> None:
    clock = Clock()
    book = FigureBook(window_turns=3, monotonic=clock)
    for _ in range(5):
        turn(book, clock, first_text_after=9.0, lasting=10.0)
    for _ in range(3):
        turn(book, clock, first_text_after=1.0, lasting=2.0)
    figures = book.figures("codex")
    assert figures.turns == 3
    assert figures.first_text_p50_s == pytest.approx(1.0)


def test_medians_shrug_off_one_stuck_turn_and_cost_averages_the_turns_that_report_it() -> None:
    samples = [
        TurnSample(first_text_s=1.0, duration_s=2.0, failed=False, cost_usd=0.02),
        TurnSample(first_text_s=1.2, duration_s=2.2, failed=False, cost_usd=None),
        TurnSample(first_text_s=60.0, duration_s=90.0, failed=False, cost_usd=0.04),
    ]
    figures = summarize(samples)
    assert figures.first_text_p50_s == pytest.approx(1.2)
    assert figures.duration_p50_s == pytest.approx(2.2)
    assert figures.cost_per_turn_usd == pytest.approx(0.03)


def test_a_provider_never_measured_has_no_figures() -> None:
    figures = FigureBook(window_turns=5).figures("opencode")
    assert (figures.turns, figures.running) == (0, 0)
    assert figures.first_text_p50_s is None
    assert figures.failure_rate is None
    assert figures.cost_per_turn_usd is None
