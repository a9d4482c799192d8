"""The webhook metrics, on the app's registry (``GatewayMetrics.registry``), named
``agent_gateway_webhook_*``.

The ``endpoint`` label is an endpoint's id: endpoints are the operator's (configuration and the
admin API), so their number stays small.
"""

from __future__ import annotations

from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

AttemptResult = Literal["success", "http_error", "timeout", "network", "redirect", "refused"]
"""How one attempt ended: a 2xx, another status, no answer in time, a connection that failed,
a 3xx (never followed), or a URL the gateway no longer allows."""

ATTEMPT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class WebhookMetrics:
    """Messages stored, attempts and their time, deliveries ended, and the backlog."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.messages = Counter(
            "agent_gateway_webhook_messages",
            "Webhook messages written to the outbox (with their events), by event type",
            ["type"],
            registry=registry,
        )
        self.attempts = Counter(
            "agent_gateway_webhook_attempts",
            "Delivery attempts, by endpoint and result",
            ["endpoint", "result"],
            registry=registry,
        )
        self.attempt_seconds = Histogram(
            "agent_gateway_webhook_attempt_seconds",
            "Time of one delivery attempt, from connecting to the endpoint's answer",
            ["endpoint"],
            buckets=ATTEMPT_BUCKETS,
            registry=registry,
        )
        self.deliveries = Counter(
            "agent_gateway_webhook_deliveries",
            "Deliveries ended, by endpoint and status (succeeded, failed for good, cancelled)",
            ["endpoint", "status"],
            registry=registry,
        )
        self.backlog = Gauge(
            "agent_gateway_webhook_backlog",
            "Webhook work stored and not done: unrouted messages and pending deliveries",
            ["kind"],
            registry=registry,
        )
        for kind in ("messages", "deliveries"):
            self.backlog.labels(kind=kind).set(0)
