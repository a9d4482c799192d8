"""What an endpoint is to the dispatcher, whichever way it was made, and which messages it
covers."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from app.store.webhookrecords import EndpointRecord, MessageHead
from app.webhook_settings import SECRET_PREFIX, WebhookSettings

EndpointSource = Literal["config", "api"]


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """One endpoint: where its messages go, signed with which secrets, and which it wants."""

    id: str
    url: str
    secrets: tuple[str, ...]
    """The secret that signs first, then those being rotated out (all sign)."""
    events: frozenset[str]
    keys: frozenset[str] | None
    """Only sessions of these keys; None: every key's."""
    description: str
    enabled: bool
    disabled_reason: str | None
    source: EndpointSource
    created_at: datetime | None

    def covers(self, head: MessageHead) -> bool:
        """Whether the message goes to this endpoint (a test message goes to its own only)."""
        if head.endpoint_id is not None:
            return head.endpoint_id == self.id
        if not self.enabled or head.type not in self.events:
            return False
        return self.keys is None or (head.owner is not None and head.owner in self.keys)

    def masked(self) -> list[str]:
        """What no log, problem or delivery record may show: each secret, and its key."""
        return [part for s in self.secrets for part in (s, s[len(SECRET_PREFIX) :])]


def unknown_keys(settings: WebhookSettings, key_names: Collection[str]) -> str | None:
    """Why the configured endpoints cannot be served (a ``keys`` entry names no key of this
    gateway: ``server.api_keys`` and ``admin``); None when they can."""
    for entry in settings.endpoints:
        unknown = sorted(set(entry.keys or ()) - set(key_names))
        if unknown:
            return (
                f"webhooks.endpoints {entry.endpoint_id}: keys {unknown} name no key of this "
                f"gateway (it has {sorted(key_names)}: the names of server.api_keys, and admin)"
            )
    return None


def configured(settings: WebhookSettings) -> list[Endpoint]:
    """The ``[[webhooks.endpoints]]`` of the configuration (read-only, always enabled)."""
    return [
        Endpoint(
            id=entry.endpoint_id,
            url=entry.url,
            secrets=tuple(entry.signing_secrets()),
            events=frozenset(entry.events),
            keys=frozenset(entry.keys) if entry.keys is not None else None,
            description=entry.description,
            enabled=True,
            disabled_reason=None,
            source="config",
            created_at=None,
        )
        for entry in settings.endpoints
    ]


def stored(record: EndpointRecord) -> Endpoint:
    """An endpoint added through the API."""
    return Endpoint(
        id=record.id,
        url=record.url,
        secrets=record.secrets,
        events=frozenset(record.events),
        keys=frozenset(record.keys) if record.keys is not None else None,
        description=record.description,
        enabled=record.enabled,
        disabled_reason=record.disabled_reason,
        source="api",
        created_at=record.created_at,
    )


def destinations(endpoints: Iterable[Endpoint], head: MessageHead) -> list[str]:
    """The ids of the endpoints a message goes to."""
    return [endpoint.id for endpoint in endpoints if endpoint.covers(head)]


def wanted_types(endpoints: Mapping[str, Endpoint]) -> frozenset[str]:
    """Every event type some enabled endpoint wants: the events that make outbox messages."""
    return frozenset(t for e in endpoints.values() if e.enabled for t in e.events)
