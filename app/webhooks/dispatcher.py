"""The dispatcher: a task of its own that turns the outbox into deliveries and sends them, so
that no endpoint, however slow, ever holds the event path.

    every poll (or when the event log stored messages, or an attempt ended):
      endpoints ◄── the configuration and the database (kept current, and the outbox's types)
      route     ──► one delivery per endpoint that wants each new message
      claim     ──► per endpoint, as many due deliveries as it has free slots (a lease each)
      send      ──► one task per attempt; it records the outcome and wakes the loop

A delivery is tried once, then once after each of ``retry_delays_s`` (each up to a tenth
longer, at random, or longer when the endpoint says ``Retry-After``), then given up: the time
it is tried is bounded. It is at-least-once: every attempt carries the message's own
``webhook-id``, and a replica that dies mid-send leaves the delivery to whoever takes the lease
next (this gateway itself after a restart: its old leases are given back at start-up).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta

import httpx

from app.errors import StorageUnavailable
from app.masking import SecretMask
from app.observability.webhookmetrics import WebhookMetrics
from app.store.webhookrecords import ClaimedDelivery, DeliveryStatus
from app.store.webhookstore import WebhookStore
from app.webhook_settings import WebhookSettings
from app.webhooks.endpoints import Endpoint, destinations
from app.webhooks.sender import Attempt, SendPolicy, attempt, client

log = logging.getLogger(__name__)

HOUSEKEEPING_S = 60.0
"""How often the backlog gauge is refreshed and ended deliveries past retention deleted."""


def retry_delay(
    settings: WebhookSettings,
    attempts: int,
    outcome: Attempt,
    jitter: Callable[[], float] = random.random,
) -> float | None:
    """The wait before the next attempt after ``attempts`` attempts ending with ``outcome``;
    None when the delivery is given up (the schedule is spent, or trying again cannot help)."""
    delays = settings.retry_delays_s
    if outcome.final or attempts > len(delays):
        return None
    delay = delays[attempts - 1] * (1 + 0.1 * jitter())
    if outcome.retry_after_s is not None:
        delay = max(delay, outcome.retry_after_s)
    return delay


class Dispatcher:
    """Routes and sends the outbox; one per gateway (or replica), owned by ``Webhooks``."""

    def __init__(
        self,
        *,
        store: WebhookStore,
        settings: WebhookSettings,
        endpoints: Callable[[], Awaitable[Mapping[str, Endpoint]]],
        on_gone: Callable[[Endpoint], Awaitable[None]],
        holder: str,
        clustered: bool,
        metrics: WebhookMetrics,
        mask: SecretMask,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._settings = settings
        self._endpoints = endpoints
        self._on_gone = on_gone
        self._holder = holder
        self._clustered = clustered
        self._metrics = metrics
        self._mask = mask
        self._clock = clock
        self._policy = SendPolicy(
            timeout_s=settings.timeout_s,
            allow_http_hosts=settings.allow_http_hosts,
            allowed_hosts=settings.allowed_hosts,
        )
        self._wake = asyncio.Event()
        self._in_flight: dict[str, int] = {}
        self._sends: set[asyncio.Task[None]] = set()
        self._http: httpx.AsyncClient | None = None
        self._housekept = 0.0
        self._refreshed = float("-inf")
        self._known: Mapping[str, Endpoint] = {}
        self._waiting = False
        """Due deliveries were left for want of a free slot (a finished attempt wakes the
        loop then)."""

    def wake(self, *, endpoints_changed: bool = False) -> None:
        """Look for work now (messages were stored, or a slot freed; ``endpoints_changed``:
        read the endpoints again first)."""
        if endpoints_changed:
            self._refreshed = float("-inf")
        self._wake.set()

    async def run(self) -> None:
        """Give back this gateway's stale leases, then route and send until cancelled; a
        failing round is logged and the next one goes on."""
        self._http = client(self._settings.timeout_s)
        released = False
        try:
            while True:
                try:
                    if not released:  # first: before this run takes any lease of its own
                        await self._release()
                        released = True
                    await self._round()
                except StorageUnavailable as exc:
                    log.warning("webhooks: the database cannot be used now (%s)", exc)
                except Exception:
                    log.exception("webhooks: a dispatch round failed")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._settings.poll_interval_s):
                        await self._wake.wait()
                self._wake.clear()
        finally:
            await self._stop()

    async def _release(self) -> None:
        # One gateway: any lease is a killed previous run's. Replicas: only this replica's own
        # (by its id); another replica's expire with their lease.
        released = await self._store.release_leases(self._holder if self._clustered else None)
        if released:
            log.info(
                "webhooks: %d deliveries left mid-send by a previous run go out again", released
            )

    async def _stop(self) -> None:
        """Cancel the attempts in flight and give their leases back (they go out again)."""
        for task in list(self._sends):
            task.cancel()
        await asyncio.gather(*self._sends, return_exceptions=True)
        if self._http is not None:
            await self._http.aclose()
        with contextlib.suppress(Exception):
            await self._store.release_leases(self._holder)

    def _free(self, endpoint_id: str) -> int:
        """Attempts this replica may start to the endpoint now."""
        return self._settings.max_concurrency_per_endpoint - self._in_flight.get(endpoint_id, 0)

    async def _round(self) -> None:
        """Route what is new (sending at once what has a free slot), then claim what is due;
        the endpoints are read again once a poll interval (a change made here is known at
        once)."""
        if time.monotonic() - self._refreshed >= self._settings.poll_interval_s:
            self._refreshed = time.monotonic()
            self._known = await self._endpoints()
        endpoints = self._known
        self._waiting = False
        if await self._store.has_unrouted():
            leased = await self._store.route(
                lambda head: destinations(endpoints.values(), head),
                now=self._clock(),
                holder=self._holder,
                free={e.id: self._free(e.id) for e in endpoints.values() if e.enabled},
                lease_s=self._settings.lease_s,
            )
            for delivery in leased:
                self._launch(endpoints[delivery.endpoint_id], delivery)
            self._waiting = any(self._free(e) <= 0 for e in endpoints)
        for endpoint_id, due in (await self._store.due_endpoints()).items():
            endpoint = endpoints.get(endpoint_id)
            if endpoint is None or not endpoint.enabled:
                continue  # disabled (its deliveries were cancelled) or not known here
            free = self._free(endpoint_id)
            if free < due:
                self._waiting = True
            if free <= 0:
                continue
            claimed = await self._store.claim(
                endpoint_id,
                holder=self._holder,
                limit=min(free, due),
                lease_s=self._settings.lease_s,
            )
            for delivery in claimed:
                self._launch(endpoint, delivery)
        if time.monotonic() - self._housekept >= HOUSEKEEPING_S:
            self._housekept = time.monotonic()
            await self._housekeeping()

    def _launch(self, endpoint: Endpoint, delivery: ClaimedDelivery) -> None:
        self._in_flight[endpoint.id] = self._in_flight.get(endpoint.id, 0) + 1
        task = asyncio.create_task(self._send(endpoint, delivery), name=f"webhook:{delivery.id}")
        self._sends.add(task)
        task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        """An attempt ended: its slot is free, which matters when deliveries wait for one."""
        self._sends.discard(task)
        if self._waiting:
            self.wake()

    async def _send(self, endpoint: Endpoint, delivery: ClaimedDelivery) -> None:
        try:
            await self._attempt(endpoint, delivery)
        except StorageUnavailable as exc:  # the lease expires and the delivery goes out again
            log.warning("webhooks: could not record delivery %s (%s)", delivery.id, exc)
        except Exception:
            log.exception("webhooks: delivery %s failed unexpectedly", delivery.id)
        finally:
            self._in_flight[endpoint.id] -= 1

    async def _attempt(self, endpoint: Endpoint, delivery: ClaimedDelivery) -> None:
        assert self._http is not None
        started = time.monotonic()
        outcome = await attempt(self._http, endpoint, delivery, self._policy)
        self._metrics.attempts.labels(endpoint=endpoint.id, result=outcome.result).inc()
        self._metrics.attempt_seconds.labels(endpoint=endpoint.id).observe(
            time.monotonic() - started
        )
        attempts = delivery.attempts + 1
        status: DeliveryStatus
        delay: float | None = None
        if outcome.result == "success":
            status = "succeeded"
        else:
            delay = retry_delay(self._settings, attempts, outcome)
            status = "pending" if delay is not None else "failed"
        error = self._mask.text(outcome.error) if outcome.error is not None else None
        recorded = await self._store.finish_attempt(
            delivery.id,
            holder=self._holder,
            status=status,
            retry_in_s=delay,
            status_code=outcome.status_code,
            error=error,
            now=self._clock(),
        )
        if recorded and status != "pending":
            self._metrics.deliveries.labels(endpoint=endpoint.id, status=status).inc()
        if delay is not None and delay < self._settings.poll_interval_s:
            asyncio.get_running_loop().call_later(delay, self.wake)  # due before the next poll
        if status == "succeeded":
            log.info(
                "webhook %s (%s) delivered to %s", delivery.message_id, delivery.type, endpoint.id
            )
        elif status == "pending":
            log.info(
                "webhook %s to %s: attempt %d failed (%s); next in %.1f s",
                delivery.message_id, endpoint.id, attempts, error, delay,
            )  # fmt: skip
        else:
            log.warning(
                "webhook %s to %s given up after %d attempts: %s",
                delivery.message_id, endpoint.id, attempts, error,
            )  # fmt: skip
        if outcome.gone:
            await self._on_gone(endpoint)

    async def _housekeeping(self) -> None:
        unrouted, pending = await self._store.backlog()
        self._metrics.backlog.labels(kind="messages").set(unrouted)
        self._metrics.backlog.labels(kind="deliveries").set(pending)
        cutoff = self._clock() - timedelta(days=self._settings.retention_days)
        forgotten = await self._store.forget(before=cutoff)
        if forgotten:
            log.info("webhooks: %d deliveries past webhooks.retention_days deleted", forgotten)
