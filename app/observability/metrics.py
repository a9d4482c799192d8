"""Prometheus metrics, one registry per app (so two apps in one process never mix counts).

Counters and histograms are updated where things happen (the event observer, the process
runner, the streams); the gauges that describe a state — sessions by status, live processes,
subscribers — are read from their owners when ``GET /metrics`` is scraped, so they can never
drift from the truth.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from app.events import Usage
from app.records import SessionStatus

__all__ = ["CONTENT_TYPE", "DEFAULT_MODEL", "MAX_MODEL_LABELS", "OTHER_MODEL", "GatewayMetrics"]

SESSION_STATUSES: tuple[SessionStatus, ...] = (
    "idle",
    "running",
    "awaiting_approval",
    "retrying",
    "closed",
    "failed",
)
TRANSPORTS = ("sse", "ws", "runs")
TOKEN_KINDS = ("input", "output", "cached_input", "cache_creation_input")
DEFAULT_MODEL = "default"
"""The ``model`` label of a session that named no model (the CLI chose its default)."""
MAX_MODEL_LABELS = 100
"""Distinct ``model`` labels kept; a client names the model, so later ones count as
``OTHER_MODEL`` instead of growing the exposition without bound."""
OTHER_MODEL = "other"
LOOP_LAG_BUCKETS = (
    0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
)  # fmt: skip


class ProviderFiguresView(Protocol):
    """A provider's measured figures (``app.runtime.figures.ProviderFigures``)."""

    @property
    def turns(self) -> int: ...
    @property
    def first_text_p50_s(self) -> float | None: ...
    @property
    def duration_p50_s(self) -> float | None: ...
    @property
    def failure_rate(self) -> float | None: ...
    @property
    def cost_per_turn_usd(self) -> float | None: ...
    @property
    def running(self) -> int: ...


class GatewayMetrics:
    """Every metric the gateway exports, named ``agent_gateway_*``."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self.sessions = Gauge(
            "agent_gateway_sessions",
            "Sessions in the database, by status",
            ["status"],
            registry=registry,
        )
        self.live_processes = Gauge(
            "agent_gateway_live_processes",
            "CLI processes running now, by provider",
            ["provider"],
            registry=registry,
        )
        self.subscribers = Gauge(
            "agent_gateway_event_subscribers",
            "Open event streams, by transport",
            ["transport"],
            registry=registry,
        )
        self.turns = Counter(
            "agent_gateway_turns",
            "Turns that ended, by provider and outcome (completed, failed, interrupted)",
            ["provider", "outcome"],
            registry=registry,
        )
        self.turn_duration = Histogram(
            "agent_gateway_turn_duration_seconds",
            "Time from a turn's start to its end, by provider and outcome",
            ["provider", "outcome"],
            buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
            registry=registry,
        )
        self.turn_failures = Counter(
            "agent_gateway_turn_failures",
            "Failed turns, by provider and failure kind",
            ["provider", "kind"],
            registry=registry,
        )
        self.retries = Counter(
            "agent_gateway_retries",
            "Retries scheduled, by provider, source (cli or gateway) and failure kind",
            ["provider", "source", "kind"],
            registry=registry,
        )
        self.fallbacks = Counter(
            "agent_gateway_fallbacks",
            "Switches to the next provider of a fallback chain",
            ["from_provider", "to_provider"],
            registry=registry,
        )
        self.cluster_refused = Counter(
            "agent_gateway_cluster_refused",
            "Commands and answers between replicas refused and not acted on (unsigned, bad "
            "signature, malformed, misdirected, stale, replayed), by reason",
            ["reason"],
            registry=registry,
        )
        self.background_failures = Counter(
            "agent_gateway_background_failures",
            "Failures of background loops and tasks (each logged; a loop goes on or is started "
            "again), by loop",
            ["loop"],
            registry=registry,
        )
        self.cluster_held = Gauge(
            "agent_gateway_cluster_sessions_held",
            "Sessions this replica holds (runs their CLI) now",
            registry=registry,
        )
        self.cluster_adoptions = Counter(
            "agent_gateway_cluster_adoptions",
            "Sessions adopted from a replica that stopped sending heartbeats",
            registry=registry,
        )
        self.cluster_fenced = Counter(
            "agent_gateway_cluster_fenced_writes",
            "Writes refused because another replica had claimed their session since; each "
            "stops that session here",
            registry=registry,
        )
        self.cluster_forwarded = Counter(
            "agent_gateway_cluster_forwarded",
            "Commands forwarded to the replica holding their session, by command and outcome "
            "(answered, error, owner_gone, not_run, unconfirmed)",
            ["op", "outcome"],
            registry=registry,
        )
        self.cluster_forward_seconds = Histogram(
            "agent_gateway_cluster_forward_seconds",
            "Time from forwarding a command to another replica to its answer, by command",
            ["op"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=registry,
        )
        self.approvals = Counter(
            "agent_gateway_approvals",
            "Approvals resolved, by provider, decision and who decided (client, policy, gateway)",
            ["provider", "decision", "by"],
            registry=registry,
        )
        self.approval_wait = Histogram(
            "agent_gateway_approval_wait_seconds",
            "Time an approval waited for its decision, by provider",
            ["provider"],
            buckets=(0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600),
            registry=registry,
        )
        self.events = Counter(
            "agent_gateway_events",
            "Events appended to the event log, by type",
            ["type"],
            registry=registry,
        )
        self.delivery_lag = Histogram(
            "agent_gateway_event_delivery_lag_seconds",
            "Time from an event's append to its hand-over to a live stream, by transport "
            "(per hand-over: its oldest event)",
            ["transport"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=registry,
        )
        self.loop_lag = Histogram(
            "agent_gateway_event_loop_lag_seconds",
            "How late the event loop ran a timer, sampled every server.loop_lag_probe_s",
            buckets=LOOP_LAG_BUCKETS,
            registry=registry,
        )
        self.process_starts = Counter(
            "agent_gateway_process_starts",
            "CLI processes started, by provider",
            ["provider"],
            registry=registry,
        )
        self.process_exits = Counter(
            "agent_gateway_process_exits",
            "CLI processes ended, by provider and outcome (exited, failed, signalled, limit)",
            ["provider", "outcome"],
            registry=registry,
        )
        self.process_peak_rss = Histogram(
            "agent_gateway_process_peak_rss_bytes",
            "Largest sampled memory (RSS) of a CLI process tree over its life, by provider",
            ["provider"],
            buckets=tuple(mib * 1024 * 1024 for mib in (32, 64, 128, 256, 512, 1024, 2048, 4096)),
            registry=registry,
        )
        self.figures = {
            name: Gauge(
                f"agent_gateway_provider_{name}", help_text, ["provider"], registry=registry
            )
            for name, help_text in (
                ("measured_turns", "Turns in the provider's measured window (routing figures)"),
                ("first_text_p50_seconds", "Median time from turn start to first text, measured"),
                ("turn_duration_p50_seconds", "Median duration of a completed turn, measured"),
                ("failure_rate", "Failed turns over measured turns"),
                ("cost_per_turn_usd", "Mean cost of a measured turn whose CLI reported one"),
                ("running_turns", "Turns of the provider running on this replica now"),
            )
        }
        self.tokens = Counter(
            "agent_gateway_tokens",
            "Tokens of ended turns as their CLIs reported them, by provider, model (the "
            "session's; default when it named none) and kind (input, output, cached_input, "
            "cache_creation_input)",
            ["provider", "model", "kind"],
            registry=registry,
        )
        self.cost = Counter(
            "agent_gateway_cost_usd",
            "Cost in US dollars of ended turns whose CLI reported one, by provider and model",
            ["provider", "model"],
            registry=registry,
        )
        self._models: set[str] = set()
        for status in SESSION_STATUSES:
            self.sessions.labels(status=status).set(0)
        for transport in TRANSPORTS:
            self.subscribers.labels(transport=transport).set(0)

    def set_states(
        self,
        *,
        sessions: Mapping[str, int],
        processes: Iterable[str],
        subscribers: Mapping[str, int],
    ) -> None:
        """Refresh the state gauges (called on scrape)."""
        for status in {*SESSION_STATUSES, *sessions}:
            self.sessions.labels(status=status).set(sessions.get(status, 0))
        counts: dict[str, int] = {}
        for provider in processes:
            counts[provider] = counts.get(provider, 0) + 1
        self.live_processes.clear()
        for provider, count in counts.items():
            self.live_processes.labels(provider=provider).set(count)
        for transport in {*TRANSPORTS, *subscribers}:
            self.subscribers.labels(transport=transport).set(subscribers.get(transport, 0))

    def set_figures(self, figures: Mapping[str, ProviderFiguresView]) -> None:
        """Refresh the routing figures (called on scrape); a figure not measured yet is
        left out rather than reported as 0."""
        for gauge in self.figures.values():
            gauge.clear()
        for provider, f in figures.items():
            values = {
                "measured_turns": f.turns,
                "first_text_p50_seconds": f.first_text_p50_s,
                "turn_duration_p50_seconds": f.duration_p50_s,
                "failure_rate": f.failure_rate,
                "cost_per_turn_usd": f.cost_per_turn_usd,
                "running_turns": f.running,
            }
            for name, value in values.items():
                if value is not None:
                    self.figures[name].labels(provider=provider).set(value)

    def count_usage(self, *, provider: str, model: str | None, usage: Usage) -> None:
        """Add one ended turn's usage to the token and cost counters."""
        label = model or DEFAULT_MODEL
        if label not in self._models:
            if len(self._models) >= MAX_MODEL_LABELS:
                label = OTHER_MODEL
            else:
                self._models.add(label)
        counts = (
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_input_tokens,
            usage.cache_creation_input_tokens,
        )
        for kind, count in zip(TOKEN_KINDS, counts, strict=True):
            if count > 0:
                self.tokens.labels(provider=provider, model=label, kind=kind).inc(count)
        if usage.cost_usd is not None and usage.cost_usd > 0:
            self.cost.labels(provider=provider, model=label).inc(usage.cost_usd)

    def render(self) -> bytes:
        return generate_latest(self.registry)
