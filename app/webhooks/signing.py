"""The Standard Webhooks signature: ``v1,`` and the base64 HMAC-SHA256 of
``{webhook-id}.{webhook-timestamp}.{body}`` under each of the endpoint's secrets."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence

from app.webhook_settings import SECRET_PREFIX, secret_key

SECRET_BYTES = 32
"""Random bytes of a secret the gateway makes."""


def new_secret() -> str:
    """A fresh ``whsec_…`` secret."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signature(signing_secrets: Sequence[str], *, msg_id: str, timestamp: int, body: str) -> str:
    """The ``webhook-signature`` header: one ``v1,<base64>`` per secret, space separated (a
    receiver accepts the message when any of them verifies, so a secret can be rotated with
    no delivery refused)."""
    content = f"{msg_id}.{timestamp}.{body}".encode()
    return " ".join(
        "v1," + base64.b64encode(hmac.new(secret_key(s), content, hashlib.sha256).digest()).decode()
        for s in signing_secrets
    )


def webhook_headers(
    signing_secrets: Sequence[str], *, msg_id: str, timestamp: int, body: str
) -> dict[str, str]:
    """The headers of one attempt (its timestamp is the attempt's, not the event's)."""
    return {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(
            signing_secrets, msg_id=msg_id, timestamp=timestamp, body=body
        ),
    }
