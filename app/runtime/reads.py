"""What the API reads about sessions, through the runtime: ownership checked, records back.

The routes never reach storage themselves; each read here checks that the session exists and
is the caller's (``owner``: None for an admin key) before it reads anything of it. Every list
is a page bounded in bytes (``limits.max_page_bytes``, app/store/pages.py) as well as in count.
"""

from __future__ import annotations

from datetime import datetime

from app.cluster.redis import ping
from app.errors import NotFound
from app.records import (
    ApprovalRecord,
    ApprovalStatus,
    SessionRecord,
    SessionStatus,
    StoredEvent,
    TurnRecord,
    UsageGroup,
    UsageTotals,
)
from app.runtime.clustered import ClusteredSessions
from app.runtime.sessions import Sessions


async def list_sessions(
    manager: Sessions,
    *,
    owner: str | None,
    status: SessionStatus | None,
    limit: int,
    before: datetime | None,
    provider: str | None = None,
    search: str | None = None,
) -> list[SessionRecord]:
    """Newest first."""
    return await manager.store.list_sessions(
        owner=owner,
        status=status,
        limit=limit,
        before=before,
        max_bytes=_page_bytes(manager),
        provider=provider,
        search=search,
    )


def _page_bytes(manager: Sessions) -> int:
    return manager.settings.limits.max_page_bytes


async def event_page_length(manager: Sessions, session_id: str, *, after: int, limit: int) -> int:
    """How many events after ``after`` the next JSON page holds: ``limit``, or fewer where
    they would pass ``limits.max_page_bytes`` (never none when there is one)."""
    return await manager.store.events_within(
        session_id, after=after, limit=limit, max_bytes=_page_bytes(manager)
    )


async def list_turns(
    manager: Sessions,
    session_id: str,
    *,
    owner: str | None,
    limit: int,
    before: int | None = None,
) -> list[TurnRecord]:
    """Newest first, numbered below ``before``."""
    await manager.get(session_id, owner=owner)
    return await manager.store.list_turns(
        session_id, limit=limit, before=before, max_bytes=_page_bytes(manager)
    )


async def get_turn(
    manager: Sessions, session_id: str, turn_id: str, *, owner: str | None
) -> TurnRecord:
    await manager.get(session_id, owner=owner)
    turn = await manager.store.get_turn(session_id, turn_id)
    if turn is None:
        raise NotFound(f"turn {turn_id} does not exist in session {session_id}")
    return turn


async def list_approvals(
    manager: Sessions,
    session_id: str,
    *,
    owner: str | None,
    status: ApprovalStatus | None,
    limit: int,
    before: datetime | None = None,
) -> list[ApprovalRecord]:
    """Newest first, created before ``before``."""
    await manager.get(session_id, owner=owner)
    return await manager.store.list_approvals(
        session_id, status=status, limit=limit, before=before, max_bytes=_page_bytes(manager)
    )


TURN_ENDS = ("turn.completed", "turn.failed", "turn.interrupted")
END_PAGE = 50


async def turn_end(manager: Sessions, session_id: str, turn_id: str) -> StoredEvent | None:
    """The event that ended ``turn_id`` (the caller has read the turn: it is the caller's),
    or None when the log no longer holds it (retention) or the turn has not ended."""
    before = await manager.store.last_event_seq(session_id) + 1
    while True:
        ends = await manager.store.events_before(
            session_id, before=before, types=TURN_ENDS, limit=END_PAGE
        )
        for end in ends:
            if end.turn_id == turn_id:
                return end
        if len(ends) < END_PAGE:
            return None
        before = ends[-1].seq


async def turn_started_at(manager: Sessions, session_id: str, *, at_or_before: int) -> int | None:
    """The seq of the last ``turn.started`` of the session at or before ``at_or_before``."""
    started = await manager.store.events_before(
        session_id, before=at_or_before + 1, types=("turn.started",), limit=1
    )
    return started[0].seq if started else None


async def session_usage(manager: Sessions, sessions: list[SessionRecord]) -> dict[str, UsageTotals]:
    """The usage of each of ``sessions`` (already read, so the caller's), in one query; a
    session with no ended turn gets zero totals."""
    totals = await manager.store.session_usage([row.id for row in sessions])
    return {row.id: totals.get(row.id) or UsageTotals() for row in sessions}


async def usage_report(manager: Sessions, *, since: datetime, until: datetime) -> list[UsageGroup]:
    """Usage by key, provider and model of the turns that ended in ``[since, until)``; every
    key's, so only for an admin key (the route checks)."""
    return await manager.store.usage_report(since=since, until=until)


async def list_questions(
    manager: Sessions,
    session_id: str,
    *,
    owner: str | None,
    status: ApprovalStatus | None,
    limit: int,
    before: datetime | None = None,
) -> list[ApprovalRecord]:
    """The agent's questions, newest first, asked before ``before``."""
    await manager.get(session_id, owner=owner)
    return await manager.store.list_approvals(
        session_id,
        status=status,
        limit=limit,
        kind="question",
        before=before,
        max_bytes=_page_bytes(manager),
    )


async def count_open_sessions(manager: Sessions, owner: str) -> int:
    """Sessions of ``owner`` that are not closed or failed (its open-session quota)."""
    return await manager.store.count_open_sessions(owner)


async def session_status_counts(manager: Sessions) -> dict[str, int]:
    return await manager.store.session_status_counts()


async def storage_answers(manager: Sessions) -> None:
    """Return once the database answers; raise what it raised otherwise."""
    await manager.store.ping()


async def cluster_answers(manager: Sessions, *, timeout_s: float) -> bool:
    """False on a single gateway (no ``cluster.redis_url``); True once this replica's Redis
    answers a PING within ``timeout_s``; ``ClusterUnavailable`` (caused by what failed)
    otherwise."""
    if not isinstance(manager, ClusteredSessions):
        return False
    await ping(manager.cluster.redis, timeout_s=timeout_s)
    return True
