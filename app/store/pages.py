"""List pages bounded in bytes as well as in count, reading only the rows they return.

A page query is first run for its keys and the stored size of each row's variable columns
(their text length, with ``ITEM_OVERHEAD`` for the fixed fields of the item it becomes); the
page ends before the row that would take it past ``max_bytes`` (the first row always fits), and
only the rows kept are then read whole. A client continues from the page's last item with the
list's cursor, as after any page.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Select, Text, cast, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.store.tables import ApprovalRow, SessionRow, TurnRow

K = TypeVar("K", bound=Hashable)

ITEM_OVERHEAD = 1024
"""Bytes counted for each item besides its variable columns (ids, times, usage totals)."""


def stored_size(*columns: Any) -> ColumnElement[int]:
    """The summed text length of ``columns`` as stored (JSON columns as their JSON text)."""
    total: ColumnElement[int] = func.coalesce(func.length(cast(columns[0], Text)), 0)
    for column in columns[1:]:
        total = total + func.coalesce(func.length(cast(column, Text)), 0)
    return total


def fitting(sizes: Iterable[tuple[K, int]], max_bytes: int) -> list[K]:
    """The keys, in order, of the items that fit in ``max_bytes`` (at least the first)."""
    kept: list[K] = []
    total = 0
    for key, size in sizes:
        total += int(size or 0) + ITEM_OVERHEAD
        if kept and total > max_bytes:
            break
        kept.append(key)
    return kept


async def bounded(
    db: AsyncSession, query: Select[Any], key: Any, size: ColumnElement[int], max_bytes: int | None
) -> Sequence[Any]:
    """The ORM rows ``query`` selects (one entity, ordered and limited), cut at ``max_bytes``
    of ``size``; all of them when ``max_bytes`` is None."""
    if max_bytes is None:
        return list(await db.scalars(query))
    sized = (await db.execute(query.with_only_columns(key, size))).tuples().all()
    keys: list[Any] = fitting(sized, max_bytes)
    if not keys:
        return []
    entity = query.column_descriptions[0]["entity"]
    rows = {
        getattr(row, key.key): row for row in await db.scalars(select(entity).where(key.in_(keys)))
    }
    return [rows[k] for k in keys if k in rows]


SESSION_SIZE = stored_size(
    SessionRow.metadata_, SessionRow.selection, SessionRow.retry, SessionRow.workspace
)
TURN_SIZE = stored_size(
    TurnRow.prompt, TurnRow.final_text, TurnRow.error, TurnRow.usage, TurnRow.retry_policy
)
APPROVAL_SIZE = stored_size(
    ApprovalRow.input,
    ApprovalRow.updated_input,
    ApprovalRow.answers,
    ApprovalRow.options,
    ApprovalRow.message,
    ApprovalRow.title,
)
T = TypeVar("T")
