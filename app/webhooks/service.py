"""``Webhooks``: the endpoints (configured and stored), the outbox the event log writes into, the
dispatcher's task, and what the admin API asks of them.

Built from the settings by ``create_app``; ``start`` reads the stored endpoints and starts the
dispatcher, ``aclose`` stops it (the attempts in flight go out again later: at-least-once).
Every endpoint's secrets join the gateway's ``SecretMask`` when they become known, so no log
line, problem or delivery record shows them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import secrets
from collections.abc import Callable, Collection
from datetime import datetime

from app.errors import Conflict, InvalidRequest, NotFound
from app.events import stored_time
from app.masking import SecretMask
from app.observability.webhookmetrics import WebhookMetrics
from app.settings import ConfigError
from app.store.outbox import OutboxMessage
from app.store.webhookrecords import DeliveryRecord, DeliveryStatus, EndpointRecord
from app.store.webhookstore import WebhookStore
from app.webhook_settings import TEST_EVENT_TYPE, WebhookSettings, secret_key, url_refusal
from app.webhooks.dispatcher import Dispatcher
from app.webhooks.endpoints import Endpoint, configured, stored, unknown_keys, wanted_types
from app.webhooks.outbox import WebhookOutbox, body, message_id
from app.webhooks.signing import new_secret

log = logging.getLogger(__name__)

MAX_PREVIOUS_SECRETS = 2
"""Secrets a rotation keeps signing besides the new one."""


class Webhooks:
    """The webhook side of one gateway (or replica)."""

    def __init__(
        self,
        settings: WebhookSettings,
        *,
        store: WebhookStore,
        metrics: WebhookMetrics,
        mask: SecretMask,
        clock: Callable[[], datetime],
        holder: str,
        clustered: bool,
        key_names: Collection[str],
    ) -> None:
        self.settings = settings
        self._store = store
        self._mask = mask
        self._clock = clock
        self._key_names = frozenset(key_names)
        self._configured = {endpoint.id: endpoint for endpoint in configured(settings)}
        self._stored: dict[str, Endpoint] = {}
        self._masked: set[str] = set()
        self._dispatcher = Dispatcher(
            store=store,
            settings=settings,
            endpoints=self._refresh,
            on_gone=self._gone,
            holder=holder,
            clustered=clustered,
            metrics=metrics,
            mask=mask,
            clock=clock,
        )
        self.outbox = WebhookOutbox(wake=self._dispatcher.wake, metrics=metrics)
        """What the event log stores with each batch (None of it while webhooks are off)."""
        self._task: asyncio.Task[None] | None = None
        refusal = unknown_keys(settings, self._key_names)
        if refusal is not None:
            raise ConfigError(refusal)
        self._learn(self._configured.values())

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    async def start(self) -> None:
        """Read the stored endpoints and start the dispatcher (webhooks on)."""
        if not self.enabled:
            return
        await self._refresh()
        self._task = asyncio.create_task(self._dispatcher.run(), name="webhook-dispatcher")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # --- the endpoints --------------------------------------------------------------------------

    def endpoints(self) -> dict[str, Endpoint]:
        """Every endpoint by id (a configured one over a stored one of the same id)."""
        return {**self._stored, **self._configured}

    async def _refresh(self) -> dict[str, Endpoint]:
        """Read the stored endpoints again (another replica may have changed them)."""
        records = await self._store.list_endpoints()
        self._stored = {r.id: stored(r) for r in records if r.id not in self._configured}
        self._learn(self._stored.values())
        endpoints = self.endpoints()
        self.outbox.wanted = wanted_types(endpoints)
        return endpoints

    def _learn(self, endpoints: Collection[Endpoint]) -> None:
        """Mask the secrets not masked yet."""
        new = [s for e in endpoints for s in e.masked() if s not in self._masked]
        if new:
            self._mask.add(new)
            self._masked.update(new)

    def _check_keys(self, keys: Collection[str] | None) -> None:
        unknown = sorted(set(keys or ()) - self._key_names)
        if unknown:
            raise InvalidRequest(
                f"keys {unknown} name no key of this gateway (it has {sorted(self._key_names)})",
                unknown_keys=list(unknown),
            )

    async def list_endpoints(self) -> list[Endpoint]:
        self._require()
        return sorted((await self._refresh()).values(), key=lambda e: (e.source, e.id))

    async def get(self, endpoint_id: str) -> Endpoint:
        self._require()
        endpoint = (await self._refresh()).get(endpoint_id)
        if endpoint is None:
            raise NotFound(f"no webhook endpoint {endpoint_id}")
        return endpoint

    async def add(
        self,
        *,
        url: str,
        events: list[str],
        keys: list[str] | None,
        description: str,
        secret: str | None,
    ) -> tuple[Endpoint, str | None]:
        """Store a new endpoint; returns it, and its secret when the gateway made it (shown
        this once)."""
        self._require()
        refusal = url_refusal(
            url,
            allow_http_hosts=self.settings.allow_http_hosts,
            allowed_hosts=self.settings.allowed_hosts,
        )
        if refusal is not None:
            raise InvalidRequest(f"url: {refusal}", field="url")
        self._check_keys(keys)
        made = secret is None
        secret = self._secret(secret)
        now = self._clock()
        record = EndpointRecord(
            id="wh_" + secrets.token_hex(12),
            url=url,
            secrets=(secret,),
            events=tuple(dict.fromkeys(events)),
            keys=tuple(dict.fromkeys(keys)) if keys is not None else None,
            description=description,
            enabled=True,
            disabled_reason=None,
            created_at=now,
            updated_at=now,
        )
        endpoint = stored(record)
        self._learn([endpoint])
        await self._store.add_endpoint(record)
        await self._refresh()
        self._dispatcher.wake(endpoints_changed=True)
        log.info("webhook endpoint %s added for %s", record.id, ", ".join(record.events))
        return endpoint, secret if made else None

    async def set_enabled(self, endpoint_id: str, *, enabled: bool) -> Endpoint:
        """Enable or disable an endpoint added through the API (a configured one is changed
        in the configuration only: 409)."""
        endpoint = await self.get(endpoint_id)
        if endpoint.source == "config":
            raise Conflict(
                f"webhook endpoint {endpoint_id} comes from the configuration "
                "([[webhooks.endpoints]]): change it there",
                endpoint_id=endpoint_id,
            )
        reason = None if enabled else "disabled through the API"
        record = await self._store.set_enabled(
            endpoint_id, enabled=enabled, reason=reason, now=self._clock()
        )
        if record is None:
            raise NotFound(f"no webhook endpoint {endpoint_id}")
        await self._refresh()
        self._dispatcher.wake(endpoints_changed=True)
        log.info("webhook endpoint %s %s", endpoint_id, "enabled" if enabled else "disabled")
        return stored(record)

    async def rotate(
        self, endpoint_id: str, *, secret: str | None, keep_previous: bool
    ) -> tuple[Endpoint, str | None]:
        """Give an endpoint added through the API a new secret that signs from now on; with
        ``keep_previous`` the ones it had sign too (at most ``MAX_PREVIOUS_SECRETS``), until a
        rotation without it. Returns the endpoint, and the secret when the gateway made it."""
        endpoint = await self.get(endpoint_id)
        if endpoint.source == "config":
            raise Conflict(
                f"webhook endpoint {endpoint_id} comes from the configuration: rotate its "
                "secret there (secret, previous_secrets)",
                endpoint_id=endpoint_id,
            )
        new = self._secret(secret)
        kept = list(endpoint.secrets[:MAX_PREVIOUS_SECRETS]) if keep_previous else []
        signing = [new, *(s for s in kept if s != new)]
        self._learn([dataclasses.replace(endpoint, secrets=tuple(signing))])
        record = await self._store.set_secrets(endpoint_id, signing, now=self._clock())
        if record is None:
            raise NotFound(f"no webhook endpoint {endpoint_id}")
        await self._refresh()
        self._dispatcher.wake(endpoints_changed=True)
        log.info("webhook endpoint %s: secret rotated (%d sign now)", endpoint_id, len(signing))
        return stored(record), new if secret is None else None

    @staticmethod
    def _secret(secret: str | None) -> str:
        """``secret`` checked, or a new one."""
        if secret is None:
            return new_secret()
        try:
            secret_key(secret)
        except ValueError as exc:
            raise InvalidRequest(f"secret: {exc}", field="secret") from None
        return secret

    async def _gone(self, endpoint: Endpoint) -> None:
        """The endpoint answered 410 Gone: a stored one is disabled; a configured one keeps
        nothing pending (remove it from the configuration)."""
        why = "the endpoint answered 410 Gone"
        if endpoint.source == "api":
            await self._store.set_enabled(endpoint.id, enabled=False, reason=why, now=self._clock())
            self._dispatcher.wake(endpoints_changed=True)
        else:
            await self._store.cancel_pending(endpoint.id, why=why, now=self._clock())
            log.warning(
                "webhook endpoint %s answered 410 Gone: remove it from the configuration",
                endpoint.id,
            )

    # --- test messages and the delivery log -----------------------------------------------------

    async def test(self, endpoint_id: str) -> str:
        """Queue a ``webhook.test`` message to this endpoint alone; returns its message id."""
        endpoint = await self.get(endpoint_id)
        if not endpoint.enabled:
            raise Conflict(f"webhook endpoint {endpoint_id} is disabled", endpoint_id=endpoint_id)
        now = self._clock()
        data = json.dumps({"endpoint_id": endpoint_id}, separators=(",", ":"))
        at = stored_time(now)
        message = OutboxMessage(
            id=message_id(),
            session_id=None,
            seq=None,
            type=TEST_EVENT_TYPE,
            payload=body(TEST_EVENT_TYPE, at, data),
            created_at=at,
            endpoint_id=endpoint_id,
        )
        await self._store.enqueue(message, now=now)
        self._dispatcher.wake()
        return message.id

    async def deliveries(
        self,
        endpoint_id: str,
        *,
        status: DeliveryStatus | None,
        limit: int,
        before: datetime | None,
    ) -> list[DeliveryRecord]:
        await self.get(endpoint_id)
        return await self._store.deliveries(endpoint_id, status=status, limit=limit, before=before)

    def _require(self) -> None:
        if not self.enabled:
            raise Conflict(
                "webhooks are off on this gateway (webhooks.enabled = false)", webhooks="off"
            )
