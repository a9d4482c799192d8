"""Budgets: what a session may spend in all, and its key per calendar day and month (UTC).

    a turn is asked for ─► allowances    every budget that applies, with what the ended turns
                                          counted in it used (one aggregate query each)
                        ─► refusal        one is reached: 402 ``budget_exceeded`` (the
                                          session's, which never resets), 429
                                          ``key_budget_exceeded`` (the key's; Retry-After: the
                                          next UTC day or month)
                        ─► Spending       the turn runs under them and counts each usage report:
           a report during an attempt reaches one ─► ``budget.reached``; the turn is stopped
                                                     and fails as ``budget_exceeded``
           an attempt's own report reaches one    ─► ``budget.reached``; the turn ends as that
                                                     attempt ended, never retried nor moved

What ended turns used is read when the turn starts (``SessionRecord.budget``, the
``[budgets]`` settings): a turn of another session of the same key that ends meanwhile is
counted from the next turn on. Tokens are input plus output tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from app.budget_settings import PERIODS, Allowance, Period
from app.errors import BudgetExceeded, GatewayError, KeyBudgetExceeded
from app.events import BudgetMeasure, BudgetReached, BudgetScope, TurnError, Usage, spent
from app.records import SessionRecord, UsageTotals
from app.runtime.commands import GATEWAY
from app.settings import Settings
from app.store.interface import Storage

MEASURES: tuple[tuple[BudgetMeasure, str], ...] = (
    ("cost_usd", "max_cost_usd"),
    ("tokens", "max_tokens"),
)
"""Each measure, and the field of a budget that bounds it."""
_SCOPES: dict[Period, BudgetScope] = {"daily": "key_daily", "monthly": "key_monthly"}


@dataclass(frozen=True, kw_only=True)
class Limit:
    """One budget that applies to a turn: its maximum, and what was used against it."""

    budget: BudgetScope
    measure: BudgetMeasure
    limit: float
    used: float
    key: str
    """The key the session belongs to."""
    resets_at: datetime | None = None
    """When a key's period ends (None: a session's budget never resets)."""

    @property
    def reached(self) -> bool:
        return self.used >= self.limit

    def describe(self) -> str:
        whose = "this session's" if self.budget == "session" else f"key {self.key!r}'s"
        period = {"key_daily": " for today (UTC)", "key_monthly": " for this month (UTC)"}
        amount = f"{self.limit:g} USD" if self.measure == "cost_usd" else f"{self.limit:g} tokens"
        used = f"{self.used:.6g}"
        return f"{whose} budget of {amount}{period.get(self.budget, '')} is spent ({used} used)"


def tokens_of(usage: Usage | UsageTotals) -> int:
    """What a budget's ``max_tokens`` counts: input plus output tokens."""
    return usage.input_tokens + usage.output_tokens


def measured(usage: Usage | UsageTotals, measure: BudgetMeasure) -> float:
    if measure == "tokens":
        return float(tokens_of(usage))
    return usage.cost_usd or 0.0


def period_bounds(period: Period, now: datetime) -> tuple[datetime, datetime]:
    """The calendar day or month (UTC) ``now`` is in: ``[start, end)``."""
    now = now.astimezone(UTC)
    if period == "daily":
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return start, start + timedelta(days=1)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (start + timedelta(days=32)).replace(day=1)
    return start, following


def key_of(owner: str | None) -> str:
    """The key a session's budget is counted under (sessions stored without an owner are the
    admin key's)."""
    return owner or GATEWAY.name


def _limits(
    allowance: Allowance | None,
    *,
    budget: BudgetScope,
    key: str,
    used: UsageTotals,
    resets_at: datetime | None,
) -> list[Limit]:
    if allowance is None:
        return []
    found = []
    for measure, field in MEASURES:
        maximum = getattr(allowance, field)
        if maximum is not None:
            found.append(
                Limit(
                    budget=budget,
                    measure=measure,
                    limit=float(maximum),
                    used=measured(used, measure),
                    key=key,
                    resets_at=resets_at,
                )
            )
    return found


async def key_limits(
    store: Storage, settings: Settings, owner: str | None, now: datetime
) -> list[Limit]:
    """The key's budgets for the current day and month, with what its ended turns used."""
    found: list[Limit] = []
    for period in await _periods(store, settings, key_of(owner), now):
        found += _limits(
            period.allowance,
            budget=_SCOPES[period.period],
            key=period.key,
            used=period.used,
            resets_at=period.resets_at,
        )
    return found


async def session_limits(store: Storage, session: SessionRecord) -> list[Limit]:
    """The session's own budget, with what its ended turns used."""
    if not session.budget:
        return []
    allowance = Allowance.model_validate(session.budget)
    used = (await store.session_usage([session.id])).get(session.id, UsageTotals())
    return _limits(
        allowance, budget="session", key=key_of(session.owner), used=used, resets_at=None
    )


@dataclass(frozen=True, kw_only=True)
class KeyPeriod:
    """One key's budget for the current day or month, with what its ended turns used."""

    key: str
    period: Period
    allowance: Allowance
    used: UsageTotals
    resets_at: datetime


async def key_periods(store: Storage, settings: Settings, now: datetime) -> list[KeyPeriod]:
    """Every key's budgets now: each key named in ``budgets.keys``, and with
    ``budgets.default`` every other key of this gateway."""
    names = set(settings.budgets.keys)
    if settings.budgets.default is not None:
        names |= {GATEWAY.name, *(key.name for key in settings.server.api_keys)}
    found = []
    for key in sorted(names):
        found += await _periods(store, settings, key, now)
    return found


async def _periods(store: Storage, settings: Settings, key: str, now: datetime) -> list[KeyPeriod]:
    budget = settings.budgets.for_key(key)
    found = []
    for period in PERIODS:
        allowance = None if budget is None else budget.of(period)
        if allowance is None or (allowance.max_cost_usd is None and allowance.max_tokens is None):
            continue
        start, end = period_bounds(period, now)
        used = await store.key_usage(key, since=start, until=end)
        found.append(
            KeyPeriod(key=key, period=period, allowance=allowance, used=used, resets_at=end)
        )
    return found


def refusal(limits: list[Limit], now: datetime) -> GatewayError | None:
    """Why no turn may start under ``limits`` (the first one reached), or None."""
    for limit in limits:
        if not limit.reached:
            continue
        error: GatewayError
        if limit.resets_at is None:
            error = BudgetExceeded(
                f"{limit.describe()}: no turn starts in it. A session's budget does not "
                "reset: create a new session for more work"
            )
        else:
            error = KeyBudgetExceeded(
                f"{limit.describe()}: no turn starts for this key until it resets at "
                f"{limit.resets_at.isoformat()}",
                retry_after_s=max(1.0, (limit.resets_at - now).total_seconds()),
            )
        error.fields.update(
            budget=limit.budget,
            measure=limit.measure,
            limit=limit.limit,
            used=round(limit.used, 6),
            resets_at=limit.resets_at.isoformat() if limit.resets_at else None,
        )
        return error
    return None


async def admit_run(store: Storage, settings: Settings, owner: str | None, now: datetime) -> None:
    """Refuse a run (before its session is made) when its key's budget is spent."""
    refused = refusal(await key_limits(store, settings, owner, now), now)
    if refused is not None:
        raise refused


async def admit_turn(
    store: Storage,
    settings: Settings,
    session: SessionRecord,
    clock: Callable[[], datetime],
    *,
    refuse: bool = True,
) -> Spending | None:
    """The budgets a turn of ``session`` runs under (None: none applies); with ``refuse``
    (a new turn) raises the refusal when one is spent already, else (a turn resuming) the
    turn fails as ``budget_exceeded`` before its next attempt."""
    now = clock()
    limits = await session_limits(store, session) + await key_limits(
        store, settings, session.owner, now
    )
    refused = refusal(limits, now)
    if refused is not None and refuse:
        raise refused
    return Spending(limits, clock=clock) if limits else None


class Spending:
    """The budgets one turn runs under, and what its attempts have reported since it began.

    Each attempt's usage counts once: a report during an attempt is what the attempt used so
    far, and the attempt's own report at its end replaces it."""

    def __init__(self, limits: list[Limit], *, clock: Callable[[], datetime]) -> None:
        self._limits = limits
        self._clock = clock
        self._attempts: dict[int, Usage] = {}
        self._told: set[tuple[BudgetScope, BudgetMeasure]] = set()
        self.over = asyncio.Event()
        """A report during an attempt reached a budget: the turn is to be stopped."""
        self.reached: Limit | None = next((limit for limit in limits if limit.reached), None)
        """The first budget the turn reached, with what was used then."""

    @property
    def used(self) -> Usage:
        """What the turn's attempts reported together."""
        return spent(*self._attempts.values()) or Usage()

    def progress(self, attempt: int, usage: Usage) -> list[BudgetReached]:
        """Attempt ``attempt`` has used ``usage`` so far; the budgets this reached (the turn
        is then to be stopped: ``over``)."""
        reached = self._count(attempt, usage)
        if self.reached is not None:
            self.over.set()
        return reached

    def attempt_ended(self, attempt: int, usage: Usage) -> list[BudgetReached]:
        """Attempt ``attempt`` ended having used ``usage``; the budgets this reached."""
        return self._count(attempt, usage)

    def _count(self, attempt: int, usage: Usage) -> list[BudgetReached]:
        self._attempts[attempt] = usage
        total, now = self.used, self._clock()
        told = []
        for limit in self._limits:
            if limit.resets_at is not None and now >= limit.resets_at:
                continue  # a new period began: the next turn counts in it
            if (limit.budget, limit.measure) in self._told:
                continue
            now_used = replace(limit, used=limit.used + measured(total, limit.measure))
            if not now_used.reached:
                continue
            self._told.add((limit.budget, limit.measure))
            self.reached = self.reached or now_used
            told.append(
                BudgetReached(
                    budget=limit.budget,
                    measure=limit.measure,
                    limit=limit.limit,
                    used=round(now_used.used, 6),
                    key=limit.key,
                    resets_at=limit.resets_at,
                )
            )
        return told

    def error(self, provider: str | None) -> TurnError | None:
        """How the turn fails for its budget (None: no budget was reached)."""
        if self.reached is None:
            return None
        return TurnError(
            kind="budget_exceeded",
            message=f"{self.reached.describe()}: the turn was stopped",
            provider=provider,
            reason=self.reached.budget,
        )
