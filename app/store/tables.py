"""The database schema: one declarative ``Base`` and the tables the gateway persists.

Contracts every table shares:

- Timestamps are ``UTCDateTime``: aware UTC in Python, naive UTC in the database. They have no
  database or Python defaults; callers pass their (injectable) clock's ``now``.
- JSON columns are plain ``sqlalchemy.JSON``: reassign the value to persist a change, in-place
  mutation of a loaded dict is not tracked.
- Child rows reference ``sessions.id`` with ``ON DELETE CASCADE``; SQLite enforces it only on
  connections made by ``app.store.db.create_engine`` (which turns ``foreign_keys`` on).

The schema itself is owned by Alembic (``migrations/``); a change here needs a new revision.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import JsonValue
from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.events import ApprovalDecision, EventType
from app.records import ApprovalStatus, IdempotencyState, RequestKind, SessionStatus, TurnStatus

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is aware UTC in Python and naive UTC in the database.

    SQLite keeps no time zone, so the zone is normalised on the way in and restored on the way
    out. Naive datetimes are refused rather than guessed at.
    """

    impl = DateTime(timezone=False)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r}: pass an aware datetime (UTC)")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class SessionRow(Base):
    """A gateway session; ``last_seq`` is the ``seq`` of its newest event (0 before any)."""

    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str | None] = mapped_column(String(64), default=None)
    provider: Mapped[str] = mapped_column(String(64))
    workspace: Mapped[str] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(String(200))
    approval_mode: Mapped[str] = mapped_column(String(32))
    status: Mapped[SessionStatus] = mapped_column(String(32), index=True)
    retry: Mapped[dict[str, JsonValue] | None] = mapped_column(JSON)
    metadata_: Mapped[dict[str, JsonValue] | None] = mapped_column("metadata", JSON)
    selection: Mapped[dict[str, JsonValue] | None] = mapped_column(JSON)
    last_seq: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    fence: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    """The fencing token of the newest replica claim of the session (0: none); events
    written under an older token are refused (``app.store.ownership``)."""
    holder: Mapped[str | None] = mapped_column(String(64), index=True, default=None)
    """The replica that runs the session's CLI now (None: nobody); every write a session's
    owner makes checks it (``app.store.ownership``)."""
    repository: Mapped[str | None] = mapped_column(Text, default=None)
    """For a session on a Git worktree (``workspace``): the repository it belongs to."""
    branch: Mapped[str | None] = mapped_column(Text, default=None)
    base: Mapped[str | None] = mapped_column(String(64), default=None)
    git_dir: Mapped[str | None] = mapped_column(Text, default=None)
    forked_from: Mapped[str | None] = mapped_column(String(64), default=None)
    """For a fork: the session it was forked from (not a foreign key: either may be
    forgotten by retention first)."""
    forked_at: Mapped[str | None] = mapped_column(String(64), default=None)
    fork_start: Mapped[dict[str, JsonValue] | None] = mapped_column(JSON, default=None)
    """What a fork's first thread starts from, until one is bound (``SessionRecord``)."""
    budget: Mapped[dict[str, JsonValue] | None] = mapped_column(JSON, default=None)
    """What the session may spend in all (``SessionRecord``); None: no budget of its own."""
    title: Mapped[str | None] = mapped_column(Text, default=None)
    """``metadata.title``, else the start of the first prompt (``SessionRecord``)."""


class ReplicaRow(Base):
    """A replica of a cluster and its last heartbeat (seconds since the epoch, by the
    database's clock, so the replicas' own clocks never matter)."""

    __tablename__ = "replicas"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    seen_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float] = mapped_column(Float)


class BindingRow(Base):
    """Session → CLI thread for one provider; ``updated_at`` is the last use (see retention)."""

    __tablename__ = "session_thread_bindings"

    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    )
    provider: Mapped[str] = mapped_column(String(64), primary_key=True)
    thread_id: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class TurnRow(Base):
    """One turn; ``seq_no`` numbers a session's turns 1, 2, 3, …"""

    __tablename__ = "turns"
    # The unique index leads with session_id, so it also serves lookups by session.
    __table_args__ = (UniqueConstraint("session_id", "seq_no"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    seq_no: Mapped[int] = mapped_column(Integer)
    prompt: Mapped[str] = mapped_column(Text)
    status: Mapped[TurnStatus] = mapped_column(String(32), index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    retry_policy: Mapped[dict[str, JsonValue] | None] = mapped_column(JSON)
    provider: Mapped[str] = mapped_column(String(64))
    usage: Mapped[dict[str, JsonValue] | None] = mapped_column(JSON)
    error: Mapped[dict[str, JsonValue] | None] = mapped_column(JSON)
    final_text: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Indexed for usage reports over a time range (app/store/usage.py).
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, index=True)
    resume_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """When a turn waiting for a usage limit's reset continues (None: no such wait)."""


class ApprovalRow(Base):
    """A tool call awaiting (or past) a client's decision; pending rows survive a restart."""

    __tablename__ = "approvals"
    __table_args__ = (Index(None, "status", "expires_at"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), index=True
    )
    # Indexed so that the cascade from a deleted turn does not scan the table.
    turn_id: Mapped[str | None] = mapped_column(
        ForeignKey("turns.id", ondelete="CASCADE"), index=True
    )
    provider_request_id: Mapped[str] = mapped_column(String(200))
    tool: Mapped[str] = mapped_column(String(200))
    input: Mapped[dict[str, JsonValue]] = mapped_column(JSON)
    options: Mapped[list[JsonValue]] = mapped_column(JSON)
    title: Mapped[str | None] = mapped_column(Text)
    tool_id: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[ApprovalStatus] = mapped_column(String(32))
    decision: Mapped[ApprovalDecision | None] = mapped_column(String(32))
    message: Mapped[str | None] = mapped_column(Text)
    decided_by: Mapped[str | None] = mapped_column(String(32))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_input: Mapped[dict[str, JsonValue] | None] = mapped_column(JSON)
    """The input the tool ran with when the client edited it; ``input`` is what was asked."""
    updated_by: Mapped[str | None] = mapped_column(String(64))
    """The key (its name) that edited the input (or answered a question)."""
    kind: Mapped[RequestKind] = mapped_column(
        String(16), default="tool", server_default=text("'tool'")
    )
    """``tool`` (a tool call to allow or deny) or ``question`` (the agent asks the user)."""
    answers: Mapped[list[JsonValue] | None] = mapped_column(JSON)


class EventRow(Base):
    """One event of a session's log; ``turn_id`` is a plain reference, not a foreign key."""

    __tablename__ = "events"

    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    turn_id: Mapped[str | None] = mapped_column(String(64))
    attempt: Mapped[int | None] = mapped_column(Integer)
    provider: Mapped[str | None] = mapped_column(String(64))
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    type: Mapped[EventType] = mapped_column(String(64))
    data: Mapped[dict[str, JsonValue]] = mapped_column(JSON)


class IdempotencyRow(Base):
    """A request sent with an ``Idempotency-Key`` and, once answered, its answer; the primary
    key (key name, idempotency key) is what decides, on every replica, which request runs."""

    __tablename__ = "idempotency_keys"

    owner: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column("idempotency_key", String(255), primary_key=True)
    request: Mapped[str] = mapped_column(String(300))
    fingerprint: Mapped[str] = mapped_column(String(64))
    state: Mapped[IdempotencyState] = mapped_column(String(16))
    holder: Mapped[str] = mapped_column(String(64))
    status: Mapped[int | None] = mapped_column(Integer)
    headers: Mapped[dict[str, JsonValue] | None] = mapped_column(JSON)
    body: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Indexed for retention, which deletes the expired ones.
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


# The webhook tables are on the same metadata (the migrations' and the schema check's).
from app.store import webhooktables as webhooktables  # noqa: E402, PLC0414 - registers them
