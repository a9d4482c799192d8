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
and the wait ends before the turn's deadline. The provider only answers those questions;
this module owns the policy (``decide``, pure) and its effects (waiting, interrupting).

The turn's overall limit (``sessions.turn_timeout_s``, attempts and waits included) stops a
running attempt through the provider's interrupt and fails the turn with kind
``idle_timeout``, not retryable, message "turn exceeded turn_timeout_s …"; a wait that would
end past the limit is not started and the last failure is reported instead.

Events of attempt n carry ``attempt=n``; the ``retry.scheduled`` emitted after attempt n
carries envelope ``attempt=n`` and ``data.attempt=n+1`` (the attempt it schedules).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from pydantic import JsonValue

from app.errors import InvalidRequest
from app.events import FailureKind, RetryScheduled, TurnError
from app.providers.base import ProviderSession, TurnHooks, TurnOutcome
from app.settings import RetrySettings

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
    }
)
INTERRUPT_GRACE_S = 30.0
"""How long a timed-out attempt has to end after its interrupt before it is cancelled."""


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """The snapshot taken when a turn is created; later config changes do not touch it."""

    enabled: bool
    strategy: str
    delays_s: tuple[float, ...]

    @property
    def max_attempts(self) -> int:
        return 1 + len(self.delays_s) if self.enabled else 1

    def snapshot(self) -> dict[str, JsonValue]:
        """The JSON stored in ``turns.retry_policy``."""
        return {"enabled": self.enabled, "strategy": self.strategy, "delays_s": list(self.delays_s)}

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, JsonValue]) -> RetryPolicy:
        """The policy ``snapshot`` stored; raises ``ValueError`` for anything else."""
        enabled, strategy, delays = (snapshot.get(k) for k in ("enabled", "strategy", "delays_s"))
        numbers = (
            [d for d in delays if isinstance(d, int | float)] if isinstance(delays, list) else []
        )
        if not (isinstance(enabled, bool) and isinstance(strategy, str) and numbers == delays):
            raise ValueError(f"not a retry policy snapshot: {snapshot!r}")
        return cls(enabled=enabled, strategy=strategy, delays_s=tuple(float(d) for d in numbers))


def resolve_policy(
    turn: dict[str, JsonValue] | None,
    session: dict[str, JsonValue] | None,
    settings: RetrySettings,
) -> RetryPolicy:
    """Turn override, else the session's policy, else the settings; 422 for unknown strategy."""
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
    return RetryPolicy(
        enabled=enabled if isinstance(enabled, bool) else settings.enabled,
        strategy=name,
        delays_s=tuple(chosen.delays_s),
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


class AttemptReporter(Protocol):
    """Where the coordinator records what it does (store and event log in the gateway)."""

    def hooks(self, attempt: int) -> TurnHooks:
        """The hooks the provider reports through during ``attempt``."""

    async def attempt_started(self, attempt: int) -> None:
        """Attempt ``attempt`` begins: count it, show the turn and session as running."""

    async def retry_scheduled(self, failed_attempt: int, event: RetryScheduled) -> None:
        """Show the turn and session as retrying and publish ``event``."""


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
        interrupt_grace_s: float = INTERRUPT_GRACE_S,
    ) -> None:
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

    async def interrupt(self) -> None:
        """Stop the turn: interrupt the running attempt, or end a pending wait at once."""
        self._interrupted.set()
        if self._attempt_running:
            await self.handle.interrupt()

    async def run(self, prompt: str) -> CoordinatedTurn:
        """Run attempts until one completes, the failure is final, or the turn is stopped."""
        deadline = self._monotonic() + self.turn_timeout_s
        attempt = 0
        while True:
            attempt += 1
            if self._interrupted.is_set():
                return CoordinatedTurn(
                    outcome=_interrupted("before the attempt"), attempts=attempt - 1
                )
            await self.reporter.attempt_started(attempt)
            text = prompt if attempt == 1 else self.continuation_prompt
            outcome = await self._attempt(text, attempt, deadline)
            if outcome.status != "failed" or outcome.error is None:
                return CoordinatedTurn(outcome=outcome, attempts=attempt)
            if self._interrupted.is_set():
                return CoordinatedTurn(outcome=_interrupted("by the client"), attempts=attempt)
            error = outcome.error
            delay = decide(
                error,
                attempt=attempt,
                policy=self.policy,
                can_continue=self.handle.can_continue(error),
            )
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
            if not await self._wait(delay):
                return CoordinatedTurn(
                    outcome=_interrupted("while waiting to retry"), attempts=attempt
                )

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
        """One attempt, stopped through the provider's interrupt at the turn's deadline."""
        task = asyncio.ensure_future(self.handle.run_turn(text, self.reporter.hooks(attempt)))
        self._attempt_running = True
        try:
            done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - self._monotonic()))
            if done:
                return task.result()
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
