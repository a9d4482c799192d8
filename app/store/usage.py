"""Usage summed on read: one aggregate query over the turns table, on SQLite and PostgreSQL.

A turn row keeps the usage its final attempt reported as JSON (``turns.usage``); nothing else
holds a count, so a total can never drift from the turns it sums. The JSON fields are read
with SQLAlchemy's JSON index operators, which compile to ``json_extract`` on SQLite and
``->>`` on PostgreSQL. Only ended turns count (``finished_at`` set), each once.

Cost, measured with 100,000 ended turns in 2,000 sessions (SQLite file / PostgreSQL): one
session's totals 6 / 2 ms, a list page of 100 sessions 17 / 38 ms, a report over all of them
190 / 220 ms and over one day's 7 / 23 ms: cheap enough that running totals, and the
migration and drift they would bring, are not worth it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, func, select

from app.records import UsageGroup, UsageTotals
from app.store.tables import SessionRow, TurnRow

__all__ = [
    "key_totals_query",
    "report_query",
    "session_totals_query",
    "totals_of",
    "usage_groups",
]

_TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cache_creation_input_tokens",
)


def _sums() -> list[ColumnElement[Any]]:
    usage = TurnRow.usage
    columns: list[ColumnElement[Any]] = [
        func.coalesce(func.sum(usage[name].as_integer()), 0).label(name) for name in _TOKEN_FIELDS
    ]
    # SUM over nothing but NULLs is NULL: no turn reported a cost.
    columns.append(func.sum(usage["cost_usd"].as_float()).label("cost_usd"))
    columns.append(func.count(TurnRow.id).label("turns"))
    return columns


def session_totals_query(session_ids: Sequence[str]) -> Select[Any]:
    """One row per session of ``session_ids`` that has an ended turn: its id, then the sums."""
    return (
        select(TurnRow.session_id, *_sums())
        .where(TurnRow.session_id.in_(session_ids), TurnRow.finished_at.is_not(None))
        .group_by(TurnRow.session_id)
    )


def key_totals_query(owner: str, *, since: datetime, until: datetime) -> Select[Any]:
    """One row: the sums over the turns of ``owner``'s sessions that ended in ``[since,
    until)`` (what a key's budget for a day or a month counts)."""
    return (
        select(*_sums())
        .join(SessionRow, SessionRow.id == TurnRow.session_id)
        .where(SessionRow.owner == owner, TurnRow.finished_at >= since, TurnRow.finished_at < until)
    )


def report_query(*, since: datetime, until: datetime) -> Select[Any]:
    """One row per key (the session's owner), provider and model of the turns that ended in
    ``[since, until)``: those three, then the sums; biggest spenders of tokens first."""
    tokens = func.coalesce(func.sum(TurnRow.usage["input_tokens"].as_integer()), 0) + func.coalesce(
        func.sum(TurnRow.usage["output_tokens"].as_integer()), 0
    )
    return (
        select(SessionRow.owner, TurnRow.provider, SessionRow.model, *_sums())
        .join(SessionRow, SessionRow.id == TurnRow.session_id)
        .where(TurnRow.finished_at >= since, TurnRow.finished_at < until)
        .group_by(SessionRow.owner, TurnRow.provider, SessionRow.model)
        .order_by(tokens.desc(), SessionRow.owner, TurnRow.provider, SessionRow.model)
    )


def totals_of(row: Sequence[Any]) -> UsageTotals:
    """The totals of a row whose last six columns are ``_sums()``."""
    inputs, outputs, cached, created, cost, turns = row[-6:]
    return UsageTotals(
        input_tokens=int(inputs),
        output_tokens=int(outputs),
        cached_input_tokens=int(cached),
        cache_creation_input_tokens=int(created),
        cost_usd=float(cost) if cost is not None else None,
        turns=int(turns),
    )


def usage_groups(rows: Sequence[Sequence[Any]]) -> list[UsageGroup]:
    return [
        UsageGroup(key=row[0], provider=row[1], model=row[2], totals=totals_of(row)) for row in rows
    ]
