"""Request and response bodies of ``/v1/webhooks`` (admin keys only)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from app.api.schemas import _In
from app.webhook_settings import WebhookEventType

KeyName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
DeliveryStatus = Literal["pending", "succeeded", "failed", "cancelled"]


class WebhookEndpointCreate(_In):
    url: str = Field(
        min_length=1,
        max_length=2048,
        description="Where deliveries are POSTed: `https://…`, or `http://` to a host of "
        "`webhooks.allow_http_hosts` (with `webhooks.allowed_hosts` set, on one of them); "
        "no user info, no fragment",
    )
    events: list[WebhookEventType] = Field(min_length=1, max_length=32)
    keys: list[KeyName] | None = Field(
        default=None,
        max_length=256,
        description="Only sessions created by these keys (their names); unset: every key's",
    )
    description: str = Field(default="", max_length=500)
    secret: str | None = Field(
        default=None,
        max_length=200,
        description="`whsec_` and the base64 of 24 to 64 random bytes; unset: the gateway "
        "makes one and returns it in this response only",
    )


class WebhookSecretRotate(_In):
    secret: str | None = Field(
        default=None,
        max_length=200,
        description="The new secret (`whsec_` and the base64 of 24 to 64 random bytes); "
        "unset: the gateway makes one and returns it in this response only",
    )
    keep_previous: bool = Field(
        default=True,
        description="Keep signing with the secrets the endpoint had (the newest two) until "
        "the receiver has the new one; a later rotation with `false` drops them",
    )


class WebhookSecretRotated(BaseModel):
    id: str
    secret: str | None
    """The secret the gateway made (shown this once); null when the request gave one."""
    signing_secrets: int
    """How many secrets sign each delivery now (one signature each)."""


class WebhookEndpointPublic(BaseModel):
    """An endpoint; its secrets are never shown (but once, made by the gateway)."""

    id: str
    url: str
    events: list[WebhookEventType]
    keys: list[str] | None
    description: str
    enabled: bool
    disabled_reason: str | None
    source: Literal["config", "api"]
    """``config``: from ``[[webhooks.endpoints]]``, read-only here."""
    created_at: datetime | None


class WebhookEndpointCreated(WebhookEndpointPublic):
    secret: str | None
    """The secret the gateway made (shown this once); null when the request gave one."""


class WebhookEndpointList(BaseModel):
    endpoints: list[WebhookEndpointPublic]


class WebhookTestAccepted(BaseModel):
    message_id: str
    """The ``webhook-id`` of the test message; its delivery is in the endpoint's log."""


class WebhookDeliveryPublic(BaseModel):
    """One message to one endpoint: its attempts so far and how they went."""

    id: str
    message_id: str
    """The ``webhook-id`` every attempt carries."""
    endpoint_id: str
    type: str
    session_id: str | None
    status: DeliveryStatus
    attempts: int
    next_attempt_in_s: float | None
    """Pending only: seconds until the next attempt (0: due now)."""
    last_status_code: int | None
    last_error: str | None
    sent_by: str | None
    """The replica that made the last attempt."""
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


class WebhookDeliveryList(BaseModel):
    deliveries: list[WebhookDeliveryPublic]
