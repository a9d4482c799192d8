"""Running one turn: the hooks a provider reports through, and the turn's bookkeeping.

    turn created (queued) ─► running ─► coordinator.run(...) ─► completed | failed | interrupted

``drive_turn`` emits ``turn.started``, keeps the ``turns`` row in step with the attempts, and
returns how the turn ended; the session's host (app/runtime/host.py) records that end
(``record_end``) and tells exactly one terminal event. The attempts and retries in between are
the coordinator's (app/runtime/coordinator.py). A turn is owned by its task, never by a client
connection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from app.errors import SessionFenced, StorageUnavailable
from app.events import (
    ChangesSummary,
    EventData,
    MessageCompleted,
    MessageDelta,
    RetryScheduled,
    SessionThreadBound,
    StreamedText,
    TurnCompleted,
    TurnError,
    TurnFailed,
    TurnInterrupted,
    TurnStarted,
    Usage,
    UsageReported,
    spent,
)
from app.observability.metrics import GatewayMetrics
from app.observability.tracing import NO_SPAN, Span
from app.providers.base import (
    Answers,
    ApprovalAnswer,
    ApprovalRequest,
    QuestionRequest,
    TurnOutcome,
)
from app.records import SessionStatus, TurnRecord, json_dict
from app.runtime.budgets import Spending
from app.runtime.coalesce import encoded_size
from app.runtime.coordinator import CoordinatedTurn, TurnCoordinator
from app.runtime.eventlog import EventLog
from app.runtime.figures import FigureBook, TurnTiming
from app.runtime.history import WorkspaceHistory
from app.runtime.live import TurnContext
from app.runtime.spans import failing, traced, waited
from app.runtime.turnlimits import EventBudget, run_within
from app.store.interface import Storage

log = logging.getLogger(__name__)

FailOver = Callable[
    [TurnRecord, TurnError, int, Sequence[str]],
    Awaitable[tuple[TurnCoordinator, str] | None],
]
"""``(turn, error, attempts, tried)`` → the turn's coordinator on the next provider and its
hand-off prompt, or None when the failure stands: the host's (app/runtime/host.py), which
has moved its live session there by then."""

GATEWAY_SHUTDOWN = "gateway_shutdown: the gateway was shut down while the turn was running"
"""The stop reason of turns ended by a graceful shutdown (``TurnError.reason`` gateway_shutdown)."""
FORK_TURNS = "turns"
"""The key of a fork's ``fork_start`` kept after its thread is bound: how many turns of the
thread came before the session's own first one (app/runtime/forking.py)."""
STORAGE_RETRY_S = (0.5, 1.0, 2.0, 5.0)
"""Waits between attempts to record the end of a turn while the database refuses writes
(the last one repeats until it succeeds or the turn's task is cancelled)."""


@dataclass(frozen=True, kw_only=True)
class TurnServices:
    """What running and recording a turn uses; ``LocalSessions`` builds it once, and its
    session hosts (app/runtime/host.py) share it."""

    events: EventLog
    store: Storage
    clock: Callable[[], datetime]
    max_event_bytes: int
    """``limits.max_turn_output_bytes``: the events one turn may record."""
    forget_provider: Callable[[str], None]
    """Drop a provider's cached health (its CLI turned out to be missing)."""
    figures: FigureBook
    """Where each turn's time to first text, duration, outcome and cost are measured."""
    metrics: GatewayMetrics | None = None
    """Where an ended turn's usage is counted (tokens and cost by provider and model)."""
    history: WorkspaceHistory | None = None
    """Where each turn's workspace is recorded at its start and end."""


@dataclass(eq=False)
class Hooks:
    """``TurnHooks`` for one attempt of one turn."""

    services: TurnServices
    live: TurnContext
    turn_id: str
    attempt: int = 1
    budget: EventBudget | None = None
    spending: Spending | None = None
    """The budgets the turn runs under: its usage reports are counted against them."""
    span: Span = field(init=False, default=NO_SPAN)
    """The attempt's span (or the turn's): the one current where the hooks are made."""

    def __post_init__(self) -> None:
        self.span = self.services.events.tracer.current()

    @property
    def joins_deltas(self) -> bool:
        return self.services.events.joins_deltas

    async def emit(self, data: EventData) -> None:
        if isinstance(data, StreamedText):
            timing = self.live.timing  # the one per-delta cost of measuring: a None check
            if timing is not None and timing.first_text is None and isinstance(data, MessageDelta):
                timing.first_text = self.services.figures.monotonic()
                self.span.event("first_text")
            # Deltas are joined before they are encoded: charge the size this one adds.
            if self.budget is not None and not self.budget.charge(encoded_size(data)):
                return
            await self.services.events.stream(
                self.live.session_id,
                data,
                turn_id=self.turn_id,
                attempt=self.attempt,
                provider=self.live.provider,
            )
            return
        if isinstance(data, MessageCompleted):
            timing = self.live.timing
            if timing is not None and timing.first_text is None:
                timing.first_text = self.services.figures.monotonic()
                self.span.event("first_text")
        encoded = data.model_dump_json()  # measured here, stored as it is by the event log
        if self.budget is not None and not self.budget.charge(len(encoded)):
            return
        traced(self.span, data)
        await self.services.events.append(
            self.live.session_id,
            data,
            turn_id=self.turn_id,
            attempt=self.attempt,
            provider=self.live.provider,
            data_json=encoded,
        )
        if self.spending is not None and isinstance(data, UsageReported):
            for reached in self.spending.attempt_ended(self.attempt, data.usage):
                await self.emit(reached)

    async def report_usage(self, usage: Usage) -> None:
        if self.spending is not None:
            for reached in self.spending.progress(self.attempt, usage):
                await self.emit(reached)

    async def bind_thread(self, thread_id: str) -> None:
        await self.services.store.touch_binding(
            session_id=self.live.session_id,
            provider=self.live.provider,
            thread_id=thread_id,
            now=self.services.clock(),
        )
        start = self.live.fork_start
        if start is not None and set(start) - {FORK_TURNS}:
            # The fork's thread exists: what it started from is not needed again.
            kept = {FORK_TURNS: start[FORK_TURNS]} if FORK_TURNS in start else None
            await self.services.store.update_session(self.live.session_id, fork_start=kept)
            self.live.fork_start = kept
        if thread_id != self.live.thread_id:
            self.live.thread_id = thread_id
            await self.emit(SessionThreadBound(thread_id=thread_id))

    async def request_approval(self, request: ApprovalRequest) -> ApprovalAnswer:
        asked = self.live.approvals.request(request, turn_id=self.turn_id, emit=self.emit)
        return await waited(self.span.child("approval", {"gen_ai.tool.name": request.tool}), asked)

    async def ask_question(self, request: QuestionRequest) -> Answers:
        asked = self.live.approvals.ask(request, turn_id=self.turn_id, emit=self.emit)
        return await waited(self.span.child("question", {"gen_ai.tool.name": request.tool}), asked)


@dataclass(eq=False)
class Recorder:
    """The coordinator's ``AttemptReporter``: the turn record, the session status, the log."""

    services: TurnServices
    live: TurnContext
    turn_id: str
    set_status: Callable[[SessionStatus], Awaitable[None]]
    """Records the session's status (its host's)."""
    attempts: int = 0
    scheduled: bool = False
    """The turn row holds a ``resume_at`` (a usage-limit wait) to clear at the next attempt."""
    spending: Spending | None = None
    """The budgets the turn runs under (app/runtime/budgets.py)."""
    budget: EventBudget = field(init=False)

    def __post_init__(self) -> None:
        self.budget = EventBudget(self.services.max_event_bytes)

    def hooks(self, attempt: int) -> Hooks:
        return Hooks(
            services=self.services,
            live=self.live,
            turn_id=self.turn_id,
            attempt=attempt,
            budget=self.budget,
            spending=self.spending,
        )

    def halted(self) -> TurnError | None:
        return None if self.spending is None else self.spending.error(self.live.provider)

    async def attempt_started(self, attempt: int) -> None:
        self.attempts = attempt
        now = self.services.clock()
        values: dict[str, Any] = {"started_at": now} if attempt == 1 else {}
        if self.scheduled:  # the wait for a usage limit's reset is over
            values["resume_at"] = None
            self.scheduled = False
        await self.services.store.turn_running(
            self.turn_id, self.live.session_id, now=now, attempts=attempt, **values
        )

    async def retry_scheduled(self, failed_attempt: int, event: RetryScheduled) -> None:
        # A wait for a usage limit's reset is stored: a restarted gateway resumes it.
        self.scheduled = self.scheduled or event.resume_at is not None
        await self.services.store.update_turn(
            self.turn_id, status="retrying", resume_at=event.resume_at
        )
        await self.set_status("retrying")
        await self.hooks(failed_attempt).emit(event)


@dataclass(frozen=True, kw_only=True)
class Driven:
    """How a turn ended, for its host to record: the outcome and the attempt it is told
    under."""

    outcome: TurnOutcome
    attempt: int


async def drive_turn(
    services: TurnServices,
    live: TurnContext,
    turn: TurnRecord,
    coordinator: TurnCoordinator,
    *,
    fail_over: FailOver | None = None,
    resumed: bool = False,
) -> Driven:
    """Drive ``turn`` through its attempts (and failover: ``fail_over`` moves ``live`` to the
    next provider) and return how it ended; raises only cancellation (its host records a
    stopped turn then).

    When the store refuses a write (disk full, I/O error), the CLI is stopped at once, since
    nothing it prints could be recorded, and the turn fails. A ``resumed`` turn (its stored
    wait for a usage limit's reset, after a restart) has already told ``turn.started``.
    """
    hooks = Hooks(services=services, live=live, turn_id=turn.id, attempt=max(turn.attempts, 1))
    live.timing = services.figures.turn_started(live.provider)
    try:
        # The session is marked running with the turn's insert, the turn with its first
        # attempt (Recorder.attempt_started): nothing to write before the event.
        prompt = turn.prompt
        if not resumed:
            await hooks.emit(TurnStarted(prompt=turn.prompt))
            prompt = await _record_start(services, live, turn, hooks)
        preface = live.preface  # a fork's hand-off, told before the first prompt
        if preface is not None:
            prompt = f"{preface}\nUser: {prompt}"
        result = await _within_limits(coordinator, prompt, live)
        outcome = result.outcome
        tried = [live.provider]
        while outcome.status == "failed" and outcome.error is not None and fail_over:
            failed_on, timing = live.provider, live.timing
            with services.events.tracer.span("failover", failing(failed_on, outcome.error)) as span:
                moved = await fail_over(turn, outcome.error, result.attempts, tried)
                span.set({"gateway.failover.to": None if moved is None else live.provider})
            if moved is None:
                break
            coordinator, prompt = moved  # the same turn goes on with the hand-off
            tried.append(live.provider)
            _measure(services, failed_on, timing, outcome)
            live.timing = services.figures.turn_started(live.provider)
            before = outcome.usage
            result = await _within_limits(coordinator, prompt, live)
            outcome = replace(result.outcome, usage=spent(before, result.outcome.usage))
        if live.thread_id is not None:  # every use of the thread refreshes its binding
            await hooks.bind_thread(live.thread_id)
        return Driven(outcome=outcome, attempt=max(result.attempts, 1))
    except SessionFenced:
        raise  # another replica runs the session now: its host stops the CLI, writes nothing
    except StorageUnavailable:
        log.error(
            "turn %s of session %s: storage unavailable; stopping the CLI", turn.id, live.session_id
        )
        await stop_cli(live)
        error = TurnError(
            kind="unknown",
            message="the gateway could not record the turn's events (storage unavailable); "
            "the CLI was stopped",
            provider=live.provider,
            reason="storage_unavailable",
        )
    except Exception:
        log.exception("turn %s of session %s failed inside the gateway", turn.id, live.session_id)
        error = TurnError(
            kind="unknown", message="internal error while running the turn", provider=live.provider
        )
    return Driven(outcome=TurnOutcome(status="failed", error=error), attempt=hooks.attempt)


async def _record_start(
    services: TurnServices, live: TurnContext, turn: TurnRecord, hooks: Hooks
) -> str:
    """Record the workspace as the turn starts (a warning when it cannot be); the prompt
    the agent gets: the turn's, after what a revert left to tell it."""
    history = services.history
    if history is None or live.workspace is None:
        return turn.prompt
    warning = await history.turn_started(live.session_id, live.workspace, turn.id)
    if warning is not None:
        await hooks.emit(warning)
    notes = history.take_notes(live.session_id)
    return turn.prompt if notes is None else f"{notes}\n\n{turn.prompt}"


async def record_changes(
    services: TurnServices, live: TurnContext, turn: TurnRecord, attempt: int
) -> ChangesSummary | None:
    """Record the workspace as the turn ends (a warning when it cannot be); what the turn
    changed in it."""
    history = services.history
    if history is None or live.workspace is None:
        return None
    ended = await history.turn_ended(live.session_id, live.workspace, turn.id)
    if ended.warning is not None:
        hooks = Hooks(services=services, live=live, turn_id=turn.id, attempt=attempt)
        await hooks.emit(ended.warning)
    return ended.changes


async def _within_limits(
    coordinator: TurnCoordinator, prompt: str, live: TurnContext
) -> CoordinatedTurn:
    """Run the turn under its recorder's limits: its events' bytes and its budgets."""
    recorder = coordinator.reporter
    if not isinstance(recorder, Recorder):
        return await coordinator.run(prompt)
    return await run_within(
        coordinator, prompt, live, output=recorder.budget, spending=recorder.spending
    )


def _measure(
    services: TurnServices, provider: str, timing: TurnTiming | None, outcome: TurnOutcome
) -> None:
    """Count ``provider``'s part of the turn in its figures, and forget the cached health
    of a provider whose CLI turned out to be missing."""
    if outcome.error is not None and outcome.error.kind == "cli_missing":
        services.forget_provider(provider)  # the next selection probes it again
    if timing is not None:
        cost = outcome.usage.cost_usd if outcome.usage is not None else None
        services.figures.turn_ended(
            timing, status=outcome.status, error=outcome.error, cost_usd=cost
        )


async def stop_cli(live: TurnContext) -> None:
    """Stop what the CLI is doing for this session; its next turn starts it again."""
    try:
        await live.handle.interrupt()
        await live.handle.suspend()
    except Exception:
        log.exception("could not stop the CLI of session %s", live.session_id)


def stopped(reason: str) -> TurnOutcome:
    """How a turn whose task was cancelled for ``reason`` ended."""
    if reason == GATEWAY_SHUTDOWN:
        error = TurnError(kind="interrupted", message=reason, reason="gateway_shutdown")
    else:
        error = TurnError(kind="interrupted", message=f"the turn was stopped: {reason}")
    return TurnOutcome(status="interrupted", error=error)


async def record_end(
    services: TurnServices,
    live: TurnContext,
    turn: TurnRecord,
    outcome: TurnOutcome,
    changes: ChangesSummary | None = None,
) -> EventData:
    """Keep how the turn ended in its row (and its usage in the metrics); the terminal event
    for its host to tell once the session is idle."""
    timing, live.timing = live.timing, None  # measured once, however often this is tried
    _measure(services, live.provider, timing, outcome)
    usage = json_dict(outcome.usage) if outcome.usage is not None else None
    # What the turn row keeps is masked like its events: a CLI may quote a secret.
    mask = services.events.mask
    error = mask.values(json_dict(outcome.error)) if outcome.error is not None else None
    terminal: EventData
    if outcome.status == "completed":
        terminal = TurnCompleted(
            final_text=outcome.final_text,
            usage=outcome.usage,
            stop_reason=outcome.stop_reason,
            changes=changes,
        )
    elif outcome.status == "interrupted":
        reason = outcome.error.message if outcome.error else "interrupted by the client"
        terminal = TurnInterrupted(reason=reason)
    else:
        assert outcome.error is not None
        terminal = TurnFailed(error=outcome.error)
    await services.store.update_turn(
        turn.id,
        status=outcome.status,
        final_text=mask.text(outcome.final_text) if outcome.final_text else None,
        usage=usage,
        error=error,
        finished_at=services.clock(),
        resume_at=None,
    )
    if outcome.usage is not None and services.metrics is not None:
        # Counted once the row keeps it: the counters and GET /v1/usage sum the same turns.
        services.metrics.count_usage(provider=live.provider, model=live.model, usage=outcome.usage)
    return terminal
