"""The ``[webhooks]`` section of the configuration: signed webhooks to the operator's endpoints
(docs/concepts/webhooks.md).

Endpoints come from the file (``[[webhooks.endpoints]]``, read-only) and from the admin API
(stored in the database). Each names the event types it wants (``WEBHOOK_EVENT_TYPES``) and,
optionally, the keys whose sessions it covers. A delivery follows the Standard Webhooks
specification: signed with HMAC-SHA256 under a ``whsec_…`` secret (and, while a secret is being
rotated, under the previous ones too), sent only to ``https`` URLs or to the hosts named in
``allow_http_hosts``, never following a redirect.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
from typing import Literal, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

WebhookEventType = Literal[
    "session.idle",
    "session.closed",
    "turn.completed",
    "turn.failed",
    "turn.interrupted",
    "approval.requested",
    "approval.resolved",
    "question.asked",
    "question.resolved",
    "provider.switched",
    "budget.reached",
]
"""What an endpoint may subscribe to. ``session.idle`` is derived (a turn ended and nothing
runs); the others are the session events of the same type."""
WEBHOOK_EVENT_TYPES: tuple[WebhookEventType, ...] = get_args(WebhookEventType)
TEST_EVENT_TYPE = "webhook.test"
"""The type of the message ``POST /v1/webhooks/{id}/test`` sends (to that endpoint only)."""

SECRET_PREFIX = "whsec_"  # noqa: S105 - the prefix of a secret, not one
MIN_SECRET_BYTES = 24
MAX_SECRET_BYTES = 64
ENDPOINT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
HOW_TO_MAKE_ONE = (
    'make one with `echo "whsec_$(openssl rand -base64 32)"` and give the receiver the same value'
)


def secret_key(secret: str) -> bytes:
    """The key bytes of a Standard Webhooks secret (``whsec_`` + base64); ValueError saying
    what is wrong otherwise."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"a webhook secret starts with {SECRET_PREFIX!r}; {HOW_TO_MAKE_ONE}")
    encoded = secret[len(SECRET_PREFIX) :]
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            f"a webhook secret is {SECRET_PREFIX!r} then base64; {HOW_TO_MAKE_ONE}"
        ) from None
    if not MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES:
        raise ValueError(
            f"a webhook secret holds {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} random bytes "
            f"(this one {len(key)}); {HOW_TO_MAKE_ONE}"
        )
    return key


def url_refusal(
    url: str, *, allow_http_hosts: list[str], allowed_hosts: list[str] | None = None
) -> str | None:
    """Why an endpoint may not be ``url`` (None: it may): only ``https``, or ``http`` to a host
    of ``allow_http_hosts``; with ``allowed_hosts``, only those hosts; no user info."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port  # a port that is not a number raises here
    except ValueError:
        return "the URL cannot be parsed"
    if parts.scheme not in ("https", "http") or not host:
        return "an endpoint URL is https://host/… (or http:// to a host of allow_http_hosts)"
    if parts.username is not None or parts.password is not None:
        return "an endpoint URL carries no user or password (sign with the secret instead)"
    if parts.fragment:
        return "an endpoint URL has no #fragment"
    if allowed_hosts is not None and not _host_in(host, allowed_hosts):
        return f"host {host} is not in webhooks.allowed_hosts"
    if parts.scheme == "http" and not _host_in(host, allow_http_hosts):
        return (
            f"plain http to {host} is refused: use https, or add {host!r} to "
            "webhooks.allow_http_hosts"
        )
    return None


def _host_in(host: str, hosts: list[str]) -> bool:
    host = host.lower().rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host in {h.lower().rstrip(".") for h in hosts}
    for entry in hosts:
        try:
            if ipaddress.ip_address(entry.strip("[]")) == address:
                return True
        except ValueError:
            continue
    return False


class WebhookEndpointSettings(BaseModel):
    """One ``[[webhooks.endpoints]]`` entry: read-only through the API."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(default=None, pattern=ENDPOINT_ID_PATTERN)
    """Its name in the API, metrics and the delivery log (default: ``config-`` and a hash of
    the URL)."""
    url: str = Field(min_length=1, max_length=2048)
    """Where deliveries are POSTed: ``https``, or ``http`` to a host of
    ``webhooks.allow_http_hosts``; no user or password in it; never redirected."""
    secret: SecretStr
    """``whsec_`` + base64 of 24 to 64 random bytes: every delivery is signed with it."""
    previous_secrets: list[SecretStr] = []
    """Secrets being rotated out: deliveries carry a signature under each of them too, until
    they are removed (the receiver moves to ``secret`` meanwhile)."""
    events: list[WebhookEventType] = Field(min_length=1)
    """The event types sent to it (docs/concepts/webhooks.md lists them)."""
    keys: list[str] | None = None
    """Only sessions created by these keys (their names); unset: every key's."""
    description: str = Field(default="", max_length=500)
    """A note for operators, shown by the API."""

    @field_validator("secret")
    @classmethod
    def _secret(cls, secret: SecretStr) -> SecretStr:
        secret_key(secret.get_secret_value())
        return secret

    @field_validator("previous_secrets")
    @classmethod
    def _previous(cls, secrets: list[SecretStr]) -> list[SecretStr]:
        for secret in secrets:
            secret_key(secret.get_secret_value())
        return secrets

    @property
    def endpoint_id(self) -> str:
        """``id``, or one derived from the URL (stable across restarts and replicas)."""
        if self.id is not None:
            return self.id
        return "config-" + hashlib.sha256(self.url.encode()).hexdigest()[:12]

    def signing_secrets(self) -> list[str]:
        return [s.get_secret_value() for s in (self.secret, *self.previous_secrets)]


class WebhookSettings(BaseModel):
    """Where events are sent, and how hard the gateway tries."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Record and send webhooks (off: no outbox rows, no dispatcher, ``/v1/webhooks`` answers
    409)."""
    endpoints: list[WebhookEndpointSettings] = []
    """``[[webhooks.endpoints]]`` tables, one per endpoint; read-only through the API."""
    allow_http_hosts: list[str] = []
    """Hosts an endpoint may reach over plain ``http`` (e.g. ``["127.0.0.1"]``); every other
    endpoint must be ``https``."""
    allowed_hosts: list[str] | None = None
    """When set, the only hosts an endpoint may be on (the others are refused)."""
    timeout_s: float = Field(default=15.0, gt=0, le=120)
    """How long one delivery attempt may take (connect, send, answer)."""
    retry_delays_s: list[float] = Field(
        default=[5.0, 30.0, 120.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0],
        min_length=0,
        max_length=20,
    )
    """The waits between attempts: a delivery is tried once, then once after each wait (each
    up to a tenth longer, at random; longer when a 429, 502, 503 or 504 says ``Retry-After``),
    then given up: the bound on the time it is tried."""
    max_concurrency_per_endpoint: int = Field(default=4, ge=1, le=64)
    """Deliveries in flight to one endpoint at once (per replica)."""
    lease_s: float = Field(default=60.0, ge=1, le=3600)
    """How long a replica holds a delivery it is sending; one that dies mid-send leaves it to
    another replica after this. Longer than ``timeout_s``."""
    poll_interval_s: float = Field(default=1.0, gt=0, le=60)
    """How often the dispatcher looks for work that another replica stored or that came due."""
    retention_days: float = Field(default=7.0, gt=0)
    """Deliveries (and their messages) ended this long ago are deleted."""

    @field_validator("retry_delays_s")
    @classmethod
    def _delays(cls, delays: list[float]) -> list[float]:
        if any(d < 0 or d > 86400 for d in delays):
            raise ValueError("each retry delay is 0 to 86400 seconds")
        return delays

    @model_validator(mode="after")
    def _consistent(self) -> WebhookSettings:
        if self.lease_s <= self.timeout_s:
            raise ValueError(
                f"webhooks.lease_s ({self.lease_s}) must be longer than webhooks.timeout_s "
                f"({self.timeout_s}): a delivery is held for the whole attempt"
            )
        seen: set[str] = set()
        for endpoint in self.endpoints:
            refusal = url_refusal(
                endpoint.url,
                allow_http_hosts=self.allow_http_hosts,
                allowed_hosts=self.allowed_hosts,
            )
            if refusal is not None:
                raise ValueError(f"webhooks.endpoints: {endpoint.url}: {refusal}")
            if endpoint.endpoint_id in seen:
                raise ValueError(
                    f"webhooks.endpoints: two endpoints are named {endpoint.endpoint_id!r}; "
                    "give each its own id"
                )
            seen.add(endpoint.endpoint_id)
        return self

    def secrets(self) -> list[str]:
        """What logs, problems and events must never show: every configured secret, and the
        key inside it."""
        found: list[str] = []
        for endpoint in self.endpoints:
            for secret in endpoint.signing_secrets():
                found += [secret, secret[len(SECRET_PREFIX) :]]
        return found
