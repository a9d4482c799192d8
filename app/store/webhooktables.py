"""The webhook tables: endpoints added through the API, the outbox, and its deliveries.

    webhook_messages     the outbox: one row per event an endpoint may want, written in the
                         event's own transaction (``insert_events``); ``routed`` once its
                         deliveries exist
    webhook_deliveries   one message to one endpoint: its attempts, its schedule (seconds
                         since the epoch by the database's clock, as the replicas' leases)
    webhook_endpoints    the endpoints added through the API (the configured ones are not
                         stored)

Messages and deliveries reference sessions by id only (no foreign key): the log of a delivery
outlives a session that retention forgot, until ``webhooks.retention_days``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.store.tables import Base, UTCDateTime


class WebhookEndpointRow(Base):
    """An endpoint added through the admin API; its secrets sign, so they are kept as given."""

    __tablename__ = "webhook_endpoints"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    secrets: Mapped[list[str]] = mapped_column(JSON)
    """The secret that signs first, then those being rotated out."""
    events: Mapped[list[str]] = mapped_column(JSON)
    keys: Mapped[list[str] | None] = mapped_column(JSON)
    description: Mapped[str] = mapped_column(Text, default="", server_default=text("''"))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class WebhookMessageRow(Base):
    """One message of the outbox; ``payload`` is the body exactly as it is signed and sent."""

    __tablename__ = "webhook_messages"
    __table_args__ = (Index(None, "routed", "created_at"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str | None] = mapped_column(String(64))
    seq: Mapped[int | None] = mapped_column(Integer)
    type: Mapped[str] = mapped_column(String(64))
    payload: Mapped[str] = mapped_column(Text)
    endpoint_id: Mapped[str | None] = mapped_column(String(64))
    """For a test message: the one endpoint it goes to (None: every endpoint that wants it)."""
    routed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class WebhookDeliveryRow(Base):
    """One message to one endpoint: pending until it succeeds, fails for good or is cancelled."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        UniqueConstraint("message_id", "endpoint_id"),
        Index(None, "status", "endpoint_id", "next_attempt_s"),
        Index(None, "endpoint_id", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    message_id: Mapped[str] = mapped_column(
        ForeignKey("webhook_messages.id", ondelete="CASCADE"), index=True
    )
    endpoint_id: Mapped[str] = mapped_column(String(64))
    type: Mapped[str] = mapped_column(String(64))
    session_id: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    """``pending``, ``succeeded``, ``failed`` (given up) or ``cancelled`` (endpoint disabled)."""
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    next_attempt_s: Mapped[float] = mapped_column(Float)
    lease_holder: Mapped[str | None] = mapped_column(String(64))
    lease_until_s: Mapped[float | None] = mapped_column(Float)
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    sent_by: Mapped[str | None] = mapped_column(String(64))
    """The replica that made the last attempt."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
