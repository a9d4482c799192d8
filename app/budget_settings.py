"""The ``[budgets]`` section of the configuration: what each key may spend per day and per
month (app/runtime/budgets.py enforces them, with the budget a session names at creation).

    [budgets.keys.alice]
    daily = { max_cost_usd = 5.0 }
    monthly = { max_cost_usd = 50.0, max_tokens = 20_000_000 }

    [budgets.default]            # every key without an entry of its own, the admin key included
    daily = { max_tokens = 5_000_000 }

Periods are calendar days and months in UTC. A turn is counted in the period it ended in;
tokens are its input plus output tokens as the CLI reported them (cache reads and writes are
in its cost). ``keys.<name> = {}`` exempts a key from ``default``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Period = Literal["daily", "monthly"]
PERIODS: tuple[Period, ...] = ("daily", "monthly")


class Allowance(BaseModel):
    """What may be spent in one period (or by one session): a cost, tokens, or both."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_cost_usd: float | None = Field(default=None, gt=0, le=1e9)
    """US dollars, as the CLIs report each turn's cost (Codex reports none)."""
    max_tokens: int | None = Field(default=None, gt=0, le=10**15)
    """Input plus output tokens."""


class KeyBudget(BaseModel):
    """One key's allowances per calendar day and per calendar month (UTC)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    daily: Allowance | None = None
    """What the key may spend per calendar day (UTC): ``{max_cost_usd?, max_tokens?}``."""
    monthly: Allowance | None = None
    """What the key may spend per calendar month (UTC): ``{max_cost_usd?, max_tokens?}``."""

    def of(self, period: Period) -> Allowance | None:
        return self.daily if period == "daily" else self.monthly


class BudgetSettings(BaseModel):
    """What each key may spend; no budget applies unless one is configured here."""

    model_config = ConfigDict(extra="forbid")

    keys: dict[str, KeyBudget] = {}
    """Key name (``admin`` for ``server.token``, else an ``api_keys`` name) → its budgets; a
    name the gateway does not have stops the start, and ``{}`` exempts a key from
    ``default``."""
    default: KeyBudget | None = None
    """The budgets of every key that has no entry in ``keys``, the admin key included."""

    def for_key(self, name: str) -> KeyBudget | None:
        """The budgets of the key called ``name`` (None: it may spend without limit)."""
        return self.keys.get(name, self.default)


def budget_keys_refusal(budgets: BudgetSettings, key_names: set[str]) -> str | None:
    """Why the gateway may not start with these budgets: names under ``budgets.keys`` that
    name no key of it (a typo would leave the key meant without its budget); else None."""
    unknown = sorted(set(budgets.keys) - key_names)
    if not unknown:
        return None
    return (
        f"budgets.keys names keys this gateway does not have: {', '.join(unknown)} (name a "
        "server.api_keys entry, or admin for server.token)"
    )
