"""Session → thread bindings: recorded on every bind and every use.

A binding's ``updated_at`` is its last use; ``app.store.retention`` deletes bindings unused for
longer than the retention period, so every turn that talks to a thread must touch its binding.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Insert
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from app.store.tables import BindingRow


async def touch_binding(
    session: AsyncSession, *, session_id: str, provider: str, thread_id: str, now: datetime
) -> None:
    """Insert the binding, or point it at ``thread_id`` and mark it used at ``now``.

    ``created_at`` keeps its first value. Does not commit: the caller owns the transaction.
    """
    row = {
        "session_id": session_id,
        "provider": provider,
        "thread_id": thread_id,
        "created_at": now,
        "updated_at": now,
    }
    await session.execute(_upsert(session.get_bind().dialect.name).values(row))


def _upsert(dialect: str) -> Insert:
    key = [BindingRow.session_id, BindingRow.provider]
    if dialect == "sqlite":
        lite = sqlite.insert(BindingRow)
        return lite.on_conflict_do_update(
            index_elements=key,
            set_={"thread_id": lite.excluded.thread_id, "updated_at": lite.excluded.updated_at},
        )
    if dialect == "postgresql":
        pg = postgresql.insert(BindingRow)
        return pg.on_conflict_do_update(
            index_elements=key,
            set_={"thread_id": pg.excluded.thread_id, "updated_at": pg.excluded.updated_at},
        )
    raise NotImplementedError(f"no binding upsert for the {dialect!r} dialect")
