"""Turns every stored event of interest into a log line and metric updates.

The event log calls the observer with each batch of events it stored, so logs and metrics
describe exactly what clients can read back: a provider selected, skipped or switched, a turn
started and finished (with its duration), a retry, an approval asked and answered (with the
wait), a question asked and resolved. Every line carries the event's session, turn and
provider ids, and an ``event`` name a log query can select on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from prometheus_client import Counter

from app.observability.metrics import GatewayMetrics
from app.records import EventRecord

log = logging.getLogger("app.events")

MAX_TRACKED = 10_000
"""Started turns and pending approvals remembered for their durations (oldest dropped)."""

_COUNTED_ONLY = frozenset({"message.delta", "reasoning.delta", "tool.output"})
"""Streamed events: counted, never logged (thousands a turn)."""
_TURN_ENDS = {
    "turn.completed": "completed",
    "turn.failed": "failed",
    "turn.interrupted": "interrupted",
}


class EventObserver:
    """Logs and counts the events of interest; never raises into the event log."""

    def __init__(self, metrics: GatewayMetrics) -> None:
        self.metrics = metrics
        self._turn_started: dict[str, datetime] = {}
        self._approval_asked: dict[str, datetime] = {}
        self._counters: dict[str, Counter] = {}

    def __call__(self, records: Sequence[EventRecord]) -> None:
        kinds: dict[str, int] = {}
        for record in records:
            kinds[record.type] = kinds.get(record.type, 0) + 1
            if record.type in _COUNTED_ONLY:
                continue
            try:
                self._observe(record)
            except Exception:
                log.exception(
                    "could not observe event %s of session %s", record.seq, record.session_id
                )
        for kind, count in kinds.items():  # one update per type and batch, not per event
            counter = self._counters.get(kind)
            if counter is None:
                counter = self._counters[kind] = self.metrics.events.labels(type=kind)
            counter.inc(count)

    def _observe(self, record: EventRecord) -> None:
        data = record.data
        provider = record.provider or str(data.get("provider") or "unknown")
        ids: dict[str, Any] = {"session_id": record.session_id, "provider": provider}
        if record.turn_id is not None:
            ids["turn_id"] = record.turn_id
        kind = record.type
        if kind == "session.provider_selected":
            self._selected(record, ids)
        elif kind == "provider.switched":
            self.metrics.fallbacks.labels(
                from_provider=data["from_provider"], to_provider=data["to_provider"]
            ).inc()
            handoff = data.get("handoff") or {}
            log.warning(
                "provider %s failed for good; %s takes over: %s",
                data["from_provider"],
                data["to_provider"],
                data["reason"],
                extra={
                    **ids,
                    "event": "provider.switched",
                    **_pick(data, "from_provider", "to_provider", "reason"),
                    "handoff_turns": handoff.get("turns"),
                    "handoff_chars": handoff.get("chars"),
                },
            )
        elif kind == "turn.started":
            _remember(self._turn_started, record.turn_id, record.at)
            log.info(
                "turn started (attempt %s)",
                record.attempt or 1,
                extra={**ids, "event": "turn.started", "attempt": record.attempt or 1},
            )
        elif kind in _TURN_ENDS:
            self._turn_ended(record, ids, _TURN_ENDS[kind])
        elif kind == "retry.scheduled":
            self.metrics.retries.labels(
                provider=provider, source=data["source"], kind=data["kind"]
            ).inc()
            log.warning(
                "%s retry %s scheduled after %s: %s",
                data["source"],
                data["attempt"],
                data["kind"],
                data.get("message") or "",
                extra={
                    **ids,
                    "event": "retry.scheduled",
                    **_pick(data, "source", "attempt", "max_attempts", "delay_s", "kind"),
                },
            )
        elif kind == "approval.requested":
            _remember(self._approval_asked, data["approval_id"], record.at)
            log.info(
                "approval requested for %s",
                data["tool"],
                extra={**ids, "event": "approval.requested", **_pick(data, "approval_id", "tool")},
            )
        elif kind == "approval.resolved":
            self._approval_resolved(record, ids, provider)
        elif kind == "question.asked":
            log.info(
                "question asked (%d question(s))",
                len(data["questions"]),
                extra={**ids, "event": "question.asked", "question_id": data["question_id"]},
            )
        elif kind == "question.resolved":
            # The answers are the user's words: they stay in the event log, not in log lines.
            log.info(
                "question %s by %s",
                data["reason"],
                data["by"],
                extra={
                    **ids,
                    "event": "question.resolved",
                    **_pick(data, "question_id", "by", "reason", "answered_by"),
                },
            )
        elif kind == "session.closed":
            log.info(
                "session closed: %s",
                data["reason"],
                extra={**ids, "event": "session.closed", "reason": data["reason"]},
            )

    def _selected(self, record: EventRecord, ids: dict[str, Any]) -> None:
        data = record.data
        ids["provider"] = data["provider"]
        for skipped in data.get("skipped") or []:
            log.warning(
                "provider %s skipped: %s",
                skipped["provider"],
                skipped["reason"],
                extra={
                    **ids,
                    "event": "provider.skipped",
                    "skipped_provider": skipped["provider"],
                    "reason": skipped["reason"],
                },
            )
        strategy = data.get("strategy") or "ordered"
        log.info(
            "provider %s selected (%s, %s)",
            data["provider"],
            data["reason"],
            strategy,
            extra={
                **ids,
                "event": "provider.selected",
                "reason": data["reason"],
                "strategy": strategy,
                "scores": {s["provider"]: s["score"] for s in data.get("scores") or []},
            },
        )

    def _turn_ended(self, record: EventRecord, ids: dict[str, Any], outcome: str) -> None:
        provider = ids["provider"]
        started = self._turn_started.pop(record.turn_id or "", None)
        duration_s = (record.at - started).total_seconds() if started is not None else None
        self.metrics.turns.labels(provider=provider, outcome=outcome).inc()
        if duration_s is not None:
            self.metrics.turn_duration.labels(provider=provider, outcome=outcome).observe(
                duration_s
            )
        fields: dict[str, Any] = {**ids, "event": "turn.finished", "outcome": outcome}
        if duration_s is not None:
            fields["duration_ms"] = round(duration_s * 1000)
        data = record.data
        if outcome == "failed":
            error = data["error"]
            self.metrics.turn_failures.labels(provider=provider, kind=error["kind"]).inc()
            fields.update(
                event="provider.failed",
                kind=error["kind"],
                retryable=error.get("retryable"),
                reason=error.get("reason"),
            )
            log.warning("turn failed: %s: %s", error["kind"], error["message"], extra=fields)
        elif outcome == "interrupted":
            log.info(
                "turn interrupted: %s", data["reason"], extra={**fields, "reason": data["reason"]}
            )
        else:
            usage = data.get("usage")
            if usage:
                fields["usage"] = usage
            log.info("turn completed", extra=fields)

    def _approval_resolved(self, record: EventRecord, ids: dict[str, Any], provider: str) -> None:
        data = record.data
        asked = self._approval_asked.pop(data["approval_id"], None)
        self.metrics.approvals.labels(
            provider=provider, decision=data["decision"], by=data["by"]
        ).inc()
        fields: dict[str, Any] = {
            **ids,
            "event": "approval.resolved",
            **_pick(data, "approval_id", "decision", "by", "reason"),
        }
        if asked is not None:
            wait_s = (record.at - asked).total_seconds()
            self.metrics.approval_wait.labels(provider=provider).observe(wait_s)
            fields["wait_ms"] = round(wait_s * 1000)
        edited = data.get("updated_input") is not None
        if edited:
            fields |= {"input_edited": True, "updated_by": data.get("updated_by")}
        log.info(
            "approval %s by %s (%s)%s",
            data["decision"],
            data["by"],
            data["reason"],
            f"; the input was edited by {data.get('updated_by')}" if edited else "",
            extra=fields,
        )


def _pick(data: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: data.get(name) for name in names}


def _remember(table: dict[str, datetime], key: str | None, at: datetime) -> None:
    if key is None:
        return
    table[key] = at
    while len(table) > MAX_TRACKED:
        table.pop(next(iter(table)))
