"""Webhooks: the endpoints added through the API, the outbox and its deliveries.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01

``webhook_messages`` is the outbox, written in the same transaction as the event it tells of;
``webhook_deliveries`` holds each message's attempts at each endpoint, scheduled and leased by
the database's clock (seconds since the epoch) so that on several replicas each is sent by one.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.store.tables import UTCDateTime

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("secrets", sa.JSON(), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("keys", sa.JSON(), nullable=True),
        sa.Column("description", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_endpoints")),
    )
    op.create_table(
        "webhook_messages",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=True),
        sa.Column("seq", sa.Integer(), nullable=True),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("endpoint_id", sa.String(length=64), nullable=True),
        sa.Column("routed", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_messages")),
    )
    op.create_index(
        op.f("ix_webhook_messages_routed_created_at"),
        "webhook_messages",
        ["routed", "created_at"],
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("message_id", sa.String(length=64), nullable=False),
        sa.Column("endpoint_id", sa.String(length=64), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("next_attempt_s", sa.Float(), nullable=False),
        sa.Column("lease_holder", sa.String(length=64), nullable=True),
        sa.Column("lease_until_s", sa.Float(), nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("sent_by", sa.String(length=64), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["webhook_messages.id"],
            name=op.f("fk_webhook_deliveries_message_id_webhook_messages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sa.UniqueConstraint(
            "message_id", "endpoint_id", name=op.f("uq_webhook_deliveries_message_id_endpoint_id")
        ),
    )
    op.create_index(op.f("ix_webhook_deliveries_message_id"), "webhook_deliveries", ["message_id"])
    op.create_index(
        op.f("ix_webhook_deliveries_status_endpoint_id_next_attempt_s"),
        "webhook_deliveries",
        ["status", "endpoint_id", "next_attempt_s"],
    )
    op.create_index(
        op.f("ix_webhook_deliveries_endpoint_id_created_at"),
        "webhook_deliveries",
        ["endpoint_id", "created_at"],
    )
