"""The plain records of the webhook tables (app/store/webhooktables.py), as the store returns
them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

DeliveryStatus = Literal["pending", "succeeded", "failed", "cancelled"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointRecord:
    """An endpoint added through the API."""

    id: str
    url: str
    secrets: tuple[str, ...]
    events: tuple[str, ...]
    keys: tuple[str, ...] | None
    description: str
    enabled: bool
    disabled_reason: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageHead:
    """What routing needs to know of a stored message: its type and whose session it is of."""

    id: str
    type: str
    session_id: str | None
    owner: str | None
    """The key (its name) that created the session; None when it is not known."""
    endpoint_id: str | None
    """The only endpoint a test message goes to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedDelivery:
    """A delivery this replica holds the lease of, with what to send."""

    id: str
    message_id: str
    endpoint_id: str
    type: str
    payload: str
    attempts: int
    """Attempts made before this one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryRecord:
    """One message to one endpoint, as the delivery log shows it."""

    id: str
    message_id: str
    endpoint_id: str
    type: str
    session_id: str | None
    status: DeliveryStatus
    attempts: int
    next_attempt_in_s: float | None
    """How long until the next attempt (pending only; 0: due)."""
    last_status_code: int | None
    last_error: str | None
    sent_by: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
