"""The turn coordinator: one retry policy for every provider.

A turn runs as one or more attempts in the same CLI thread::

    turn ─► attempt 1 (the user's prompt)
              │ completed / interrupted ──────────────────────────────► turn ends so
              │ failed ─► retry? ── no ─────────────────────────────────► turn.failed (once)
              │             │ yes: retry.scheduled (source gateway), status ``retrying``
              │             ▼
              │           wait delays_s[n-1] ── interrupt ──────────────► turn.interrupted
              │             │                ── session deleted ────────► cancelled
              ▼             ▼
            attempt n+1 (the fixed continuation prompt, same thread) … until the delays
            are spent, then the last failure is reported once.

An attempt is retried only when all hold: the policy is enabled and has a delay left; the
failure is retryable (``TurnError.retryable``) and its kind is not in ``NEVER_RETRIED``; the
provider says the session ``can_continue`` in the same thread; no interrupt was asked for;
the turn reached none of its budgets (``AttemptReporter.halted``: it fails as
``budget_exceeded`` instead); and the wait ends before the turn's deadline. The provider
only answers those questions; this module owns the policy (``decide``, pure) and its
effects (waiting, interrupting).

The turn's overall limit (``sessions.turn_timeout_s``, attempts and waits included) stops a
running attempt through the provider's interrupt and fails the turn with kind
``idle_timeout``, not retryable, message "turn exceeded turn_timeout_s …"; a wait that would
end past the limit is not started and the last failure is reported instead.

A usage limit (kind ``usage_limit``) is not retried on the delays: when the CLI reported when
the limit resets and the policy's ``usage_limit`` is ``wait``, the turn waits until then
(``retry.scheduled`` with ``resume_at``, status ``retrying``; the wait is stored, survives a
restart and is not counted against ``turn_timeout_s``) and continues in the same thread, at
most ``MAX_USAGE_WAITS`` times; otherwise the failure is final (and a session that allows
failover moves to another provider, app/runtime/failover.py).

Events of attempt n carry ``attempt=n``; the ``retry.scheduled`` emitted after attempt n
carries envelope ``attempt=n`` and ``data.attempt=n+1`` (the attempt it schedules).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Protocol

from pydantic import JsonValue

from app.errors import InvalidRequest
from app.events import FailureKind, RetryScheduled, TurnError, Usage, spent
from app.observability.tracing import OFF, Attributes, Tracer
from app.providers.base import ProviderSession, TurnHooks, TurnOutcome
from app.runtime.spans import ended
from app.settings import RetrySettings, UsageLimitAction

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]

NEVER_RETRIED: frozenset[FailureKind] = frozenset(
    {
        "auth",
        "invalid_request",
        "interrupted",
        "context_lost",
        "cli_missing",
        "agent_error",
        "resource_limit",
        "budget_exceeded",
    }
)
USAGE_LIMIT_ACTIONS: tuple[UsageLimitAction, ...] = typing.get_args(UsageLimitAction)
USAGE_RESET_MARGIN_S = 1.0
"""Waited past a usage limit's reported reset, so the next request is not a second early."""
MAX_USAGE_WAITS = 3
"""Usage-limit waits in one turn before its failure is final (a limit that keeps moving)."""
INTERRUPT_GRACE_S = 30.0
"""How long a timed-out attempt has to end after its interrupt before it is cancelled."""


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """The snapshot taken when a turn is created; later config changes do not touch it."""

    enabled: bool
    strategy: str
    delays_s: tuple[float, ...]
    usage_limit: UsageLimitAction = "fail"
    """What a usage limit does (turns stored before this was kept: ``fail``)."""
    usage_limit_max_wait_s: float = 0.0

    @property
    def max_attempts(self) -> int:
        return 1 + len(self.delays_s) if self.enabled else 1

    def snapshot(self) -> dict[str, JsonValue]:
        """The JSON stored in ``turns.retry_policy``."""
        return {
            "enabled": self.enabled,
            "strategy": self.strategy,
            "delays_s": list(self.delays_s),
            "usage_limit": self.usage_limit,
            "usage_limit_max_wait_s": self.usage_limit_max_wait_s,
        }

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, JsonValue]) -> RetryPolicy:
        """The policy ``snapshot`` stored; raises ``ValueError`` for anything else."""
        enabled, strategy, delays = (snapshot.get(k) for k in ("enabled", "strategy", "delays_s"))
        numbers = (
            [d for d in delays if isinstance(d, int | float)] if isinstance(delays, list) else []
        )
        if not (isinstance(enabled, bool) and isinstance(strategy, str) and numbers == delays):
            raise ValueError(f"not a retry policy snapshot: {snapshot!r}")
        action = snapshot.get("usage_limit", "fail")
        max_wait = snapshot.get("usage_limit_max_wait_s", 0.0)
        if action not in USAGE_LIMIT_ACTIONS or not isinstance(max_wait, int | float):
            raise ValueError(f"not a retry policy snapshot: {snapshot!r}")
        return cls(
            enabled=enabled,
            strategy=strategy,
            delays_s=tuple(float(d) for d in numbers),
            usage_limit=action,
            usage_limit_max_wait_s=float(max_wait),
        )


def resolve_policy(
    turn: dict[str, JsonValue] | None,
    session: dict[str, JsonValue] | None,
    settings: RetrySettings,
) -> RetryPolicy:
    """Turn override, else the session's policy, else the settings; 422 for an unknown
    strategy, and for a usage-limit wait in ``turn`` (the request) longer than the operator's
    ``retry.usage_limit_max_wait_s``, which bounds every wait."""
    turn, session = turn or {}, session or {}

    def pick(key: str) -> JsonValue:
        return turn.get(key) if turn.get(key) is not None else session.get(key)

    enabled = pick("enabled")
    strategy = pick("strategy")
    name = strategy if isinstance(strategy, str) else "default"
    chosen = settings.strategies.get(name)
    if chosen is None:
        raise InvalidRequest(
            f"unknown retry strategy {name!r}; this gateway defines: "
            f"{', '.join(sorted(settings.strategies))}",
            strategies=[name for name in sorted(settings.strategies)],
        )
    action = pick("usage_limit")
    if action is not None and action not in USAGE_LIMIT_ACTIONS:
        raise InvalidRequest(
            f"unknown usage_limit action {action!r}; use one of {', '.join(USAGE_LIMIT_ACTIONS)}"
        )
    ceiling = settings.usage_limit_max_wait_s
    asked = turn.get("usage_limit_max_wait_s")
    if isinstance(asked, int | float) and asked > ceiling:
        raise InvalidRequest(
            f"retry.usage_limit_max_wait_s {asked:g} s is more than this gateway allows: ask "
            f"for at most {ceiling:g} s (retry.usage_limit_max_wait_s in its configuration)",
            ceiling_s=ceiling,
        )
    max_wait = pick("usage_limit_max_wait_s")
    return RetryPolicy(
        enabled=enabled if isinstance(enabled, bool) else settings.enabled,
        strategy=name,
        delays_s=tuple(chosen.delays_s),
        usage_limit=action or settings.usage_limit,
        # A session's own wait, asked for under an earlier, higher ceiling, is cut to this one.
        usage_limit_max_wait_s=min(float(max_wait), ceiling)
        if isinstance(max_wait, int | float)
        else ceiling,
    )


def decide(
    error: TurnError, *, attempt: int, policy: RetryPolicy, can_continue: bool
) -> float | None:
    """The delay before attempt ``attempt + 1``, or None when the failure is final."""
    if not policy.enabled or attempt > len(policy.delays_s):
        return None
    if not error.retryable or error.kind in NEVER_RETRIED or not can_continue:
        return None
    return policy.delays_s[attempt - 1]


def usage_wait(
    error: TurnError, policy: RetryPolicy, *, now: datetime, can_continue: bool
) -> float | None:
    """Seconds to wait for a usage limit's reset before continuing in the same thread, or
    None when the policy does not wait for this one (not ``wait``, no reset time reported,
    a reset later than ``usage_limit_max_wait_s``, or a thread that cannot continue)."""
    if not policy.enabled or policy.usage_limit != "wait" or error.kind != "usage_limit":
        return None
    if error.resets_at is None or not can_continue:
        return None
    wait = max(0.0, (error.resets_at - now).total_seconds()) + USAGE_RESET_MARGIN_S
    return wait if wait <= policy.usage_limit_max_wait_s else None


class AttemptReporter(Protocol):
    """Where the coordinator records what it does (store and event log in the gateway)."""

    def hooks(self, attempt: int) -> TurnHooks:
        """The hooks the provider reports through during ``attempt``."""

    async def attempt_started(self, attempt: int) -> None:
        """Attempt ``attempt`` begins: count it, show the turn and session as running."""

    async def retry_scheduled(self, failed_attempt: int, event: RetryScheduled) -> None:
        """Show the turn and session as retrying and publish ``event``."""

    def halted(self) -> TurnError | None:
        """Why the turn may start no other attempt (a budget it reached), or None."""


@dataclass(frozen=True, kw_only=True)
class CoordinatedTurn:
    """How the whole turn ended, and after how many attempts."""

    outcome: TurnOutcome
    attempts: int


class TurnCoordinator:
    """Runs one turn's attempts on ``handle`` under ``policy``; one instance per turn."""

    def __init__(
        self,
        *,
        handle: ProviderSession,
        policy: RetryPolicy,
        continuation_prompt: str,
        turn_timeout_s: float,
        reporter: AttemptReporter,
        sleep: Sleep = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        interrupt_grace_s: float = INTERRUPT_GRACE_S,
        first_attempt: int = 1,
        resume_at: datetime | None = None,
        tracer: Tracer = OFF,
        traced: Attributes | None = None,
    ) -> None:
        """``first_attempt`` numbers the first attempt this coordinator runs (a turn moved to
        another provider goes on counting); ``resume_at`` resumes a stored wait for a usage
        limit's reset, after which the continuation prompt runs. Each attempt and each wait
        is a span of ``tracer`` (``traced``: more attributes of every attempt's)."""
        self._tracer = tracer
        self._traced = traced or {}
        self.resume_at = resume_at
        """While the turn waits for a usage limit's reset: when the wait ends. A turn stopped
        by a shutdown during the wait keeps it (stored) and resumes after the restart."""
        self._first_attempt = first_attempt
        self._clock = clock
        self.handle = handle
        self.policy = policy
        self.continuation_prompt = continuation_prompt
        self.turn_timeout_s = turn_timeout_s
        self.reporter = reporter
        self._sleep = sleep
        self._monotonic = monotonic
        self._grace_s = interrupt_grace_s
        self._interrupted = asyncio.Event()
        self._attempt_running = False
        self._spent: Usage | None = None
        """What the attempts so far used together."""

    @property
    def interrupted(self) -> bool:
        """A client asked to stop the turn."""
        return self._interrupted.is_set()

    async def interrupt(self) -> None:
        """Stop the turn: interrupt the running attempt, or end a pending wait at once."""
        self._interrupted.set()
        if self._attempt_running:
            await self.handle.interrupt()

    async def run(self, prompt: str) -> CoordinatedTurn:
        """Run attempts until one completes, the failure is final, or the turn is stopped;
        the outcome's usage is what every attempt used together."""
        self._spent = None
        result = await self._run(prompt)
        usage = spent(self._spent)
        if usage is None or usage == result.outcome.usage:
            return result
        return replace(result, outcome=replace(result.outcome, usage=usage))

    async def _run(self, prompt: str) -> CoordinatedTurn:
        deadline = self._monotonic() + self.turn_timeout_s
        attempt = self._first_attempt - 1
        retries = usage_waits = 0
        fresh = self.resume_at is None  # a resumed wait continues the conversation
        if self.resume_at is not None:
            waited = await self._wait_for_reset(self.resume_at)
            if waited is None:
                return CoordinatedTurn(
                    outcome=_interrupted("while waiting for the usage limit to reset"),
                    attempts=attempt,
                )
            deadline += waited
        while True:
            attempt += 1
            if self._interrupted.is_set():
                return CoordinatedTurn(
                    outcome=_interrupted("before the attempt"), attempts=attempt - 1
                )
            if (halt := self.reporter.halted()) is not None:
                outcome = TurnOutcome(status="failed", error=halt)
                return CoordinatedTurn(outcome=outcome, attempts=attempt - 1)
            await self.reporter.attempt_started(attempt)
            first = fresh and attempt == self._first_attempt
            text = prompt if first else self.continuation_prompt
            outcome = await self._attempt(text, attempt, deadline)
            if outcome.status != "failed" or outcome.error is None:
                return CoordinatedTurn(outcome=outcome, attempts=attempt)
            if self._interrupted.is_set():
                return CoordinatedTurn(outcome=_interrupted("by the client"), attempts=attempt)
            if (halt := self.reporter.halted()) is not None:  # never retried over a budget
                return CoordinatedTurn(outcome=replace(outcome, error=halt), attempts=attempt)
            error = outcome.error
            can_continue = self.handle.can_continue(error)
            if error.kind == "usage_limit":
                wait = usage_wait(error, self.policy, now=self._clock(), can_continue=can_continue)
                if wait is None or usage_waits == MAX_USAGE_WAITS:
                    return CoordinatedTurn(outcome=outcome, attempts=attempt)
                usage_waits += 1
                resume_at = self._clock() + timedelta(seconds=wait)
                await self.reporter.retry_scheduled(
                    attempt,
                    RetryScheduled(
                        source="gateway",
                        attempt=attempt + 1,
                        max_attempts=None,
                        delay_s=round(wait, 3),
                        kind="usage_limit",
                        message=error.message,
                        resume_at=resume_at,
                    ),
                )
                log.info(
                    "usage limit: continuing attempt %d at %s",
                    attempt,
                    resume_at.isoformat(),
                    extra={"attempt": attempt, "kind": error.kind, "delay_s": wait},
                )
                waited = await self._wait_for_reset(resume_at)
                if waited is None:
                    return CoordinatedTurn(
                        outcome=_interrupted("while waiting for the usage limit to reset"),
                        attempts=attempt,
                    )
                deadline += waited  # the wait is not the agent's time
                continue
            retries += 1
            delay = decide(error, attempt=retries, policy=self.policy, can_continue=can_continue)
            if delay is None or self._monotonic() + delay >= deadline:
                return CoordinatedTurn(outcome=outcome, attempts=attempt)
            await self.reporter.retry_scheduled(
                attempt,
                RetryScheduled(
                    source="gateway",
                    attempt=attempt + 1,
                    max_attempts=self.policy.max_attempts,
                    delay_s=delay,
                    kind=error.kind,
                    message=error.message,
                ),
            )
            log.info(
                "retrying attempt %d after %s in %.1f s",
                attempt,
                error.kind,
                delay,
                extra={"attempt": attempt, "kind": error.kind, "delay_s": delay},
            )
            waiting = {"gateway.attempt": attempt + 1, "gateway.retry.kind": error.kind}
            with self._tracer.span("retry.wait", {**waiting, "gateway.retry.delay_s": delay}):
                if not await self._wait(delay):
                    return CoordinatedTurn(
                        outcome=_interrupted("while waiting to retry"), attempts=attempt
                    )

    async def _wait_for_reset(self, resume_at: datetime) -> float | None:
        """Wait until ``resume_at`` (kept in ``self.resume_at`` meanwhile); the seconds waited,
        or None when an interrupt ended the wait first. A cancellation (shutdown) leaves
        ``resume_at`` set: the stored schedule outlives this process."""
        self.resume_at = resume_at
        delay = max(0.0, (resume_at - self._clock()).total_seconds())
        with self._tracer.span("usage_limit.wait", {"gateway.retry.delay_s": round(delay, 3)}):
            waited = await self._wait(delay)
        if not waited:
            self.resume_at = None
            return None
        self.resume_at = None
        return delay

    async def _wait(self, delay: float) -> bool:
        """Sleep ``delay``; False when an interrupt ended the wait first."""
        sleeper = asyncio.ensure_future(self._sleep(delay))
        stopper = asyncio.ensure_future(self._interrupted.wait())
        try:
            await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, stopper):
                task.cancel()
            for task in (sleeper, stopper):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        return not self._interrupted.is_set()

    async def _attempt(self, text: str, attempt: int, deadline: float) -> TurnOutcome:
        """One attempt as a span, current in the task that runs it (the provider's)."""
        with self._tracer.span("attempt", {**self._traced, "gateway.attempt": attempt}) as span:
            outcome = await self._try(text, attempt, deadline)
            ended(span, outcome.status, outcome.error, outcome.usage)
            return outcome

    async def _try(self, text: str, attempt: int, deadline: float) -> TurnOutcome:
        """One attempt, stopped through the provider's interrupt at the turn's deadline."""
        task = asyncio.ensure_future(self.handle.run_turn(text, self.reporter.hooks(attempt)))
        self._attempt_running = True
        try:
            done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - self._monotonic()))
            if done:
                outcome = task.result()
                self._spent = spent(self._spent, outcome.usage)
                return outcome
            await self.handle.interrupt()
            done, _ = await asyncio.wait({task}, timeout=self._grace_s)
            if not done:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            return TurnOutcome(
                status="failed",
                error=TurnError(
                    kind="idle_timeout",
                    message=f"turn exceeded turn_timeout_s ({self.turn_timeout_s:g} s)",
                    retryable=False,
                ),
            )
        finally:
            self._attempt_running = False
            if not task.done():  # the turn itself was cancelled (session deleted, shutdown)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


def _interrupted(when: str) -> TurnOutcome:
    return TurnOutcome(
        status="interrupted",
        error=TurnError(kind="interrupted", message=f"interrupted {when}"),
    )
