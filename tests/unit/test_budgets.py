"""Budgets as pure values: the periods a key's budget counts in, what a turn's usage reports
add up to, when a budget is reached and told once, and the refusal a spent one makes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.errors import BudgetExceeded, KeyBudgetExceeded
from app.events import Usage
from app.runtime.budgets import Limit, Spending, period_bounds, refusal

NOW = datetime(2026, 12, 31, 22, 30, tzinfo=UTC)


def test_a_keys_periods_are_the_utc_day_and_month_now_is_in() -> None:
    assert period_bounds("daily", NOW) == (
        datetime(2026, 12, 31, tzinfo=UTC),
        datetime(2027, 1, 1, tzinfo=UTC),
    )
    assert period_bounds("monthly", NOW) == (
        datetime(2026, 12, 1, tzinfo=UTC),
        datetime(2027, 1, 1, tzinfo=UTC),
    )
    february = datetime(2028, 2, 29, 23, 59, tzinfo=UTC)
    assert period_bounds("monthly", february)[1] == datetime(2028, 3, 1, tzinfo=UTC)


def tokens(limit: float, used: float = 0) -> Limit:
    return Limit(budget="session", measure="tokens", limit=limit, used=used, key="alice")


def test_reports_during_an_attempt_are_replaced_by_its_own_and_attempts_add_up() -> None:
    spending = Spending([tokens(100, used=40)], clock=lambda: NOW)
    assert spending.progress(1, Usage(input_tokens=10, output_tokens=5)) == []
    assert spending.progress(1, Usage(input_tokens=20, output_tokens=10)) == []
    assert spending.attempt_ended(1, Usage(input_tokens=20, output_tokens=12)) == []
    assert spending.used == Usage(input_tokens=20, output_tokens=12)
    [reached] = spending.progress(2, Usage(input_tokens=20, output_tokens=8))
    assert (reached.used, reached.limit) == (100, 100)  # 40 before the turn, 32 + 28 in it
    assert spending.over.is_set()
    assert spending.progress(2, Usage(input_tokens=30, output_tokens=8)) == []  # told once
    error = spending.error("claude_code")
    assert error is not None
    assert (error.kind, error.reason, error.retryable) == ("budget_exceeded", "session", False)


def test_an_attempts_own_report_reaching_a_budget_halts_the_turn_without_stopping_it() -> None:
    cost = Limit(budget="key_daily", measure="cost_usd", limit=1.0, used=0.5, key="alice")
    spending = Spending([cost], clock=lambda: NOW)
    [reached] = spending.attempt_ended(1, Usage(cost_usd=0.5))
    assert reached.measure == "cost_usd"
    assert not spending.over.is_set()  # the attempt has ended: nothing to interrupt
    assert spending.error(None) is not None  # but no other attempt starts


def test_a_key_budget_whose_period_ended_during_the_turn_no_longer_stops_it() -> None:
    yesterday = Limit(
        budget="key_daily", measure="tokens", limit=10, used=9, key="bob", resets_at=NOW
    )
    spending = Spending([yesterday], clock=lambda: NOW)
    assert spending.progress(1, Usage(input_tokens=5)) == []
    assert spending.error(None) is None


def test_a_spent_budget_refuses_a_turn_with_what_it_is_and_when_it_resets() -> None:
    assert refusal([tokens(100, used=99)], NOW) is None
    session = refusal([tokens(100, used=99), tokens(50, used=50)], NOW)
    assert isinstance(session, BudgetExceeded)
    assert (session.status, session.fields["budget"], session.fields["resets_at"]) == (
        402,
        "session",
        None,
    )
    resets = datetime(2027, 1, 1, tzinfo=UTC)
    daily = Limit(
        budget="key_daily", measure="tokens", limit=5, used=7, key="bob", resets_at=resets
    )
    key = refusal([daily], NOW)
    assert isinstance(key, KeyBudgetExceeded)
    assert key.status == 429
    assert key.retry_after_s == pytest.approx(90 * 60)
    assert key.fields["resets_at"] == resets.isoformat()
    assert "key 'bob'" in key.detail
