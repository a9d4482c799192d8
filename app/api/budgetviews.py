"""Budgets as the API takes and shows them: a session's ``budget`` (asked at creation, shown
with what is used and left) and each key's budgets on ``GET /v1/usage``
(app/runtime/budgets.py enforces them)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from app.budget_settings import Allowance, Period
from app.records import UsageTotals
from app.runtime.budgets import KeyPeriod, tokens_of


class BudgetIn(BaseModel):
    """What a session may spend in all, by cost and/or tokens (input plus output); a turn
    that would start over it is refused (402 ``budget_exceeded``), one that crosses it is
    stopped at its next usage report (``turn.failed``, kind ``budget_exceeded``)."""

    model_config = ConfigDict(extra="forbid")

    max_cost_usd: Annotated[float, Field(gt=0, le=1e9)] | None = None
    """US dollars, as the CLI reports each turn's cost (Codex reports none)."""
    max_tokens: Annotated[int, Field(gt=0, le=10**15)] | None = None

    def stored(self) -> dict[str, JsonValue] | None:
        """As the session keeps it; None when it names no maximum."""
        kept: dict[str, JsonValue] = self.model_dump(exclude_none=True)
        return kept or None


class BudgetAmounts(BaseModel):
    cost_usd: float | None
    tokens: int | None


class SessionBudgetPublic(BaseModel):
    """The session's own budget, what its ended turns used of it and what is left."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None
    used: BudgetAmounts
    """What the session's ended turns used (``cost_usd`` 0 when none reported a cost)."""
    left: BudgetAmounts
    """What is left of each maximum (never below 0); null for a measure with none."""
    reached: bool
    """No turn starts in the session any more (402 ``budget_exceeded``)."""


class KeyBudgetPublic(BaseModel):
    """One key's budget for the current calendar day or month (UTC)."""

    key: str
    period: Period
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    used: BudgetAmounts
    """What the key's turns that ended in the period used."""
    left: BudgetAmounts
    reached: bool
    """No turn of the key starts until ``resets_at`` (429 ``key_budget_exceeded``)."""
    resets_at: datetime


def _amounts(allowance: Allowance, used: UsageTotals) -> tuple[BudgetAmounts, BudgetAmounts, bool]:
    cost, tokens = used.cost_usd or 0.0, tokens_of(used)
    left_cost = None if allowance.max_cost_usd is None else max(allowance.max_cost_usd - cost, 0)
    left_tokens = None if allowance.max_tokens is None else max(allowance.max_tokens - tokens, 0)
    reached = left_cost == 0 or left_tokens == 0
    return (
        BudgetAmounts(cost_usd=round(cost, 6), tokens=tokens),
        BudgetAmounts(
            cost_usd=None if left_cost is None else round(left_cost, 6), tokens=left_tokens
        ),
        reached,
    )


def session_budget(
    budget: dict[str, JsonValue] | None, used: UsageTotals
) -> SessionBudgetPublic | None:
    """A session's ``budget`` (None: it has none of its own)."""
    if not budget:
        return None
    allowance = Allowance.model_validate(budget)
    spent, left, reached = _amounts(allowance, used)
    return SessionBudgetPublic(
        max_cost_usd=allowance.max_cost_usd,
        max_tokens=allowance.max_tokens,
        used=spent,
        left=left,
        reached=reached,
    )


def key_budget(period: KeyPeriod) -> KeyBudgetPublic:
    spent, left, reached = _amounts(period.allowance, period.used)
    return KeyBudgetPublic(
        key=period.key,
        period=period.period,
        max_cost_usd=period.allowance.max_cost_usd,
        max_tokens=period.allowance.max_tokens,
        used=spent,
        left=left,
        reached=reached,
        resets_at=period.resets_at,
    )
