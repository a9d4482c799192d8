"""The turn coordinator with a scripted fake provider session, a fake clock and sleep."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import JsonValue

from app.errors import InvalidRequest
from app.events import EventData, FailureKind, RetryScheduled, TurnError, Usage, spent
from app.providers.base import (
    Answers,
    ApprovalAnswer,
    ApprovalRequest,
    ProcessInfo,
    ProviderSession,
    QuestionRequest,
    TurnHooks,
    TurnOutcome,
)
from app.runtime.coordinator import (
    MAX_USAGE_WAITS,
    NEVER_RETRIED,
    USAGE_RESET_MARGIN_S,
    CoordinatedTurn,
    RetryPolicy,
    TurnCoordinator,
    decide,
    resolve_policy,
    usage_wait,
)
from app.settings import RetrySettings, RetryStrategy

CONTINUE = "continue please"
DONE = TurnOutcome(status="completed", final_text="done")


def failure(kind: FailureKind = "overloaded", *, retryable: bool = True) -> TurnOutcome:
    return TurnOutcome(
        status="failed", error=TurnError(kind=kind, message=kind, retryable=retryable)
    )


HANG = "hang"
"""A scripted step that runs until interrupted (then ends as interrupted)."""


class ScriptedSession(ProviderSession):
    """Plays one scripted outcome per attempt and records the prompts it was sent."""

    def __init__(self, script: Sequence[TurnOutcome | str], *, thread_id: str | None = "t1"):
        self.script = list(script)
        self.prompts: list[str] = []
        self.interrupts = 0
        self._thread_id = thread_id
        self._stop = asyncio.Event()
        self.prompted = asyncio.Event()

    @property
    def thread_id(self) -> str | None:
        return self._thread_id

    @property
    def process(self) -> ProcessInfo | None:
        return None

    async def run_turn(self, prompt: str, hooks: TurnHooks) -> TurnOutcome:
        self.prompts.append(prompt)
        self.prompted.set()
        step = self.script.pop(0)
        if step == HANG:
            self._stop.clear()
            await self._stop.wait()
            return TurnOutcome(
                status="interrupted", error=TurnError(kind="interrupted", message="stopped")
            )
        assert isinstance(step, TurnOutcome)
        return step

    async def interrupt(self) -> None:
        self.interrupts += 1
        self._stop.set()

    async def suspend(self) -> None:
        pass

    async def close(self, *, at_once: bool = False) -> None:
        pass


class NoHooks:
    joins_deltas = False

    async def emit(self, data: EventData) -> None:
        pass

    async def bind_thread(self, thread_id: str) -> None:
        pass

    async def report_usage(self, usage: Usage) -> None:
        pass

    async def request_approval(self, request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(decision="deny")

    async def ask_question(self, request: QuestionRequest) -> Answers:
        return None


@dataclass
class Recorder:
    started: list[int] = field(default_factory=list)
    scheduled: list[tuple[int, RetryScheduled]] = field(default_factory=list)
    waiting: asyncio.Event = field(default_factory=asyncio.Event)
    halt: TurnError | None = None  # a budget the first attempt reached: no other starts

    def hooks(self, attempt: int) -> TurnHooks:
        return NoHooks()

    def halted(self) -> TurnError | None:
        return self.halt if self.started else None

    async def attempt_started(self, attempt: int) -> None:
        self.started.append(attempt)

    async def retry_scheduled(self, failed_attempt: int, event: RetryScheduled) -> None:
        self.scheduled.append((failed_attempt, event))
        self.waiting.set()


@dataclass
class FakeTime:
    """A monotonic clock that only the injected sleep advances."""

    now: float = 1000.0
    slept: list[float] = field(default_factory=list)
    block: bool = False

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> datetime:
        """The wall clock, moving with the monotonic one."""
        return EPOCH + timedelta(seconds=self.now)

    async def sleep(self, delay: float) -> None:
        self.slept.append(delay)
        if self.block:
            await asyncio.Event().wait()
        self.now += delay
        await asyncio.sleep(0)


EPOCH = datetime(2026, 11, 26, tzinfo=UTC)
POLICY = RetryPolicy(
    enabled=True,
    strategy="default",
    delays_s=(10.0, 20.0, 60.0),
    usage_limit="wait",
    usage_limit_max_wait_s=3600.0,
)


def coordinator(
    session: ScriptedSession,
    *,
    policy: RetryPolicy = POLICY,
    time: FakeTime | None = None,
    timeout_s: float = 3600.0,
    **extra: Any,
) -> tuple[TurnCoordinator, Recorder, FakeTime]:
    clock, recorder = time or FakeTime(), Recorder()
    return (
        TurnCoordinator(
            handle=session,
            policy=policy,
            continuation_prompt=CONTINUE,
            turn_timeout_s=timeout_s,
            reporter=recorder,
            sleep=clock.sleep,
            monotonic=clock.monotonic,
            clock=clock.wall,
            interrupt_grace_s=0.5,
            **extra,
        ),
        recorder,
        clock,
    )


async def test_a_first_attempt_success_sends_the_prompt_once() -> None:
    session = ScriptedSession([DONE])
    turn, recorder, clock = coordinator(session)
    assert await turn.run("hello") == CoordinatedTurn(outcome=DONE, attempts=1)
    assert session.prompts == ["hello"]
    assert recorder.started == [1]
    assert recorder.scheduled == []
    assert clock.slept == []


async def test_retryable_failures_wait_on_the_schedule_and_continue_in_the_thread() -> None:
    session = ScriptedSession([failure("overloaded"), failure("network"), DONE])
    turn, recorder, clock = coordinator(session)
    result = await turn.run("hello")
    assert result == CoordinatedTurn(outcome=DONE, attempts=3)
    assert session.prompts == ["hello", CONTINUE, CONTINUE]
    assert clock.slept == [10.0, 20.0]
    assert recorder.started == [1, 2, 3]
    assert [
        (n, e.attempt, e.max_attempts, e.delay_s, e.kind, e.source) for n, e in recorder.scheduled
    ] == [
        (1, 2, 4, 10.0, "overloaded", "gateway"),
        (2, 3, 4, 20.0, "network", "gateway"),
    ]


async def test_the_last_failure_is_returned_once_the_schedule_is_spent() -> None:
    last = failure("server_error")
    session = ScriptedSession([failure(), failure(), failure(), last])
    turn, recorder, clock = coordinator(session)
    assert await turn.run("hello") == CoordinatedTurn(outcome=last, attempts=4)
    assert clock.slept == [10.0, 20.0, 60.0]
    assert len(recorder.scheduled) == 3


@pytest.mark.parametrize("kind", sorted(NEVER_RETRIED))
async def test_kinds_that_are_never_retried_fail_at_once(kind: FailureKind) -> None:
    outcome = failure(kind, retryable=True)  # even if a provider called it retryable
    turn, recorder, clock = coordinator(ScriptedSession([outcome]))
    assert await turn.run("hello") == CoordinatedTurn(outcome=outcome, attempts=1)
    assert recorder.scheduled == []
    assert clock.slept == []


async def test_a_turn_that_reached_a_budget_is_not_retried_and_fails_for_it() -> None:
    overloaded = failure("overloaded")
    turn, recorder, clock = coordinator(ScriptedSession([overloaded, DONE]))
    recorder.halt = TurnError(kind="budget_exceeded", message="spent", reason="session")
    result = await turn.run("hello")
    assert result == CoordinatedTurn(outcome=replace(overloaded, error=recorder.halt), attempts=1)
    assert (recorder.scheduled, clock.slept) == ([], [])


async def test_a_failure_the_provider_calls_final_is_not_retried() -> None:
    outcome = failure("unknown", retryable=False)
    turn, recorder, _ = coordinator(ScriptedSession([outcome]))
    assert (await turn.run("hello")).attempts == 1
    assert recorder.scheduled == []


async def test_no_retry_when_the_thread_cannot_continue() -> None:
    outcome = failure("cli_crashed")
    turn, recorder, _ = coordinator(ScriptedSession([outcome, DONE], thread_id=None))
    assert await turn.run("hello") == CoordinatedTurn(outcome=outcome, attempts=1)
    assert recorder.scheduled == []


async def test_a_disabled_policy_never_retries() -> None:
    outcome = failure()
    policy = RetryPolicy(enabled=False, strategy="default", delays_s=(1.0,))
    turn, _recorder, _ = coordinator(ScriptedSession([outcome, DONE]), policy=policy)
    assert await turn.run("hello") == CoordinatedTurn(outcome=outcome, attempts=1)
    assert policy.max_attempts == 1


async def test_an_interrupt_during_a_wait_ends_the_turn_at_once() -> None:
    session = ScriptedSession([failure(), DONE])
    turn, recorder, _clock = coordinator(session, time=FakeTime(block=True))
    running = asyncio.create_task(turn.run("hello"))
    await recorder.waiting.wait()
    await turn.interrupt()
    result = await asyncio.wait_for(running, 1.0)
    assert result.outcome.status == "interrupted"
    assert result.attempts == 1
    assert session.prompts == ["hello"]
    assert session.interrupts == 0  # nothing was running in the CLI


async def test_an_interrupt_during_an_attempt_goes_to_the_provider_and_is_not_retried() -> None:
    session = ScriptedSession([HANG, DONE])
    turn, recorder, _ = coordinator(session)
    running = asyncio.create_task(turn.run("hello"))
    await session.prompted.wait()
    await turn.interrupt()
    result = await asyncio.wait_for(running, 1.0)
    assert result.outcome.status == "interrupted"
    assert session.interrupts == 1
    assert recorder.scheduled == []


async def test_a_failure_racing_an_interrupt_is_reported_as_interrupted() -> None:
    turn, recorder, _ = coordinator(ScriptedSession([failure()]))
    await turn.interrupt()
    result = await turn.run("hello")
    assert result.outcome.status == "interrupted"
    assert result.attempts == 0
    assert recorder.started == []


async def test_cancelling_the_turn_during_a_wait_cancels_it_at_once() -> None:
    turn, recorder, _ = coordinator(ScriptedSession([failure(), DONE]), time=FakeTime(block=True))
    running = asyncio.create_task(turn.run("hello"))
    await recorder.waiting.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(running, 1.0)


async def test_a_wait_past_the_turn_deadline_is_not_started() -> None:
    outcome = failure()
    turn, recorder, clock = coordinator(ScriptedSession([outcome, DONE]), timeout_s=5.0)
    assert await turn.run("hello") == CoordinatedTurn(outcome=outcome, attempts=1)
    assert recorder.scheduled == []
    assert clock.slept == []


async def test_an_attempt_past_the_turn_deadline_is_interrupted_and_fails() -> None:
    session = ScriptedSession([HANG])
    turn, _, _ = coordinator(session, timeout_s=0.05)
    result = await asyncio.wait_for(turn.run("hello"), 2.0)
    assert session.interrupts == 1
    assert result.outcome.status == "failed"
    assert result.outcome.error is not None
    assert result.outcome.error.kind == "idle_timeout"
    assert result.outcome.error.retryable is False
    assert "turn_timeout_s" in result.outcome.error.message


def test_decide_follows_the_schedule_and_stops_when_it_is_spent() -> None:
    error = TurnError(kind="rate_limited", message="429", retryable=True)
    delays = [decide(error, attempt=n, policy=POLICY, can_continue=True) for n in (1, 2, 3, 4)]
    assert delays == [10.0, 20.0, 60.0, None]
    assert decide(error, attempt=1, policy=POLICY, can_continue=False) is None


SETTINGS = RetrySettings(
    strategies={
        "default": RetryStrategy(delays_s=[10.0, 20.0, 60.0]),
        "quick": RetryStrategy(delays_s=[0.5]),
    }
)


def resolved(**values: Any) -> RetryPolicy:
    """A policy as ``resolve_policy`` builds it: the usage-limit settings' defaults unless
    ``values`` says otherwise."""
    defaults = {
        "usage_limit": SETTINGS.usage_limit,
        "usage_limit_max_wait_s": SETTINGS.usage_limit_max_wait_s,
    }
    return RetryPolicy(**(defaults | values))


def test_an_unknown_usage_limit_action_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="usage_limit"):
        resolve_policy({"usage_limit": "later"}, None, SETTINGS)


def test_a_snapshot_keeps_the_usage_limit_policy_and_reads_older_ones_as_fail() -> None:
    policy = resolved(enabled=True, strategy="default", delays_s=(1.0,))
    assert RetryPolicy.from_snapshot(policy.snapshot()) == policy
    older: dict[str, JsonValue] = {"enabled": True, "strategy": "default", "delays_s": [1.0]}
    assert RetryPolicy.from_snapshot(older).usage_limit == "fail"


@pytest.mark.parametrize(
    ("turn", "session", "expected"),
    [
        (None, None, resolved(enabled=True, strategy="default", delays_s=(10.0, 20.0, 60.0))),
        (None, {"strategy": "quick"}, resolved(enabled=True, strategy="quick", delays_s=(0.5,))),
        (
            {"enabled": True},
            {"enabled": False, "strategy": "quick"},
            resolved(enabled=True, strategy="quick", delays_s=(0.5,)),
        ),
        (
            {"enabled": False, "strategy": "default"},
            {"strategy": "quick"},
            resolved(enabled=False, strategy="default", delays_s=(10.0, 20.0, 60.0)),
        ),
        (
            {"usage_limit": "fail"},
            {"usage_limit": "fallback", "usage_limit_max_wait_s": 60},
            resolved(
                enabled=True,
                strategy="default",
                delays_s=(10.0, 20.0, 60.0),
                usage_limit="fail",
                usage_limit_max_wait_s=60.0,
            ),
        ),
    ],
)
def test_the_policy_is_the_turn_override_then_the_session_then_the_settings(
    turn: dict[str, JsonValue] | None,
    session: dict[str, JsonValue] | None,
    expected: RetryPolicy,
) -> None:
    assert resolve_policy(turn, session, SETTINGS) == expected


def test_the_settings_decide_whether_retry_is_on_by_default() -> None:
    off = RetrySettings(enabled=False)
    assert resolve_policy(None, None, off).enabled is False


def test_an_unknown_strategy_is_refused_as_invalid() -> None:
    with pytest.raises(InvalidRequest, match="unknown retry strategy 'eager'") as raised:
        resolve_policy({"strategy": "eager"}, None, SETTINGS)
    assert raised.value.fields["strategies"] == ["default", "quick"]


def test_the_snapshot_records_the_resolved_delays() -> None:
    assert POLICY.snapshot() == {
        "enabled": True,
        "strategy": "default",
        "delays_s": [10.0, 20.0, 60.0],
        "usage_limit": "wait",
        "usage_limit_max_wait_s": 3600.0,
    }


def test_a_policy_snapshot_reads_back_as_the_same_policy() -> None:
    assert RetryPolicy.from_snapshot(POLICY.snapshot()) == POLICY
    assert RetryPolicy.from_snapshot({"enabled": True, "strategy": "x", "delays_s": [1]}) == (
        RetryPolicy(enabled=True, strategy="x", delays_s=(1.0,))
    )


@pytest.mark.parametrize(
    "snapshot",
    [
        {},
        {"enabled": "yes", "strategy": "default", "delays_s": [1.0]},
        {"enabled": True, "strategy": None, "delays_s": [1.0]},
        {"enabled": True, "strategy": "default", "delays_s": ["1"]},
        {"enabled": True, "strategy": "default", "delays_s": 1.0},
    ],
)
def test_anything_else_is_not_a_policy_snapshot(snapshot: dict[str, JsonValue]) -> None:
    with pytest.raises(ValueError, match="not a retry policy snapshot"):
        RetryPolicy.from_snapshot(snapshot)


# --- usage limits ---------------------------------------------------------------------------


def usage_limit(clock: FakeTime | None, in_s: float | None) -> TurnOutcome:
    """A usage-limit failure whose limit resets ``in_s`` seconds after ``clock``'s now."""
    resets_at = None if clock is None or in_s is None else clock.wall() + timedelta(seconds=in_s)
    error = TurnError(kind="usage_limit", message="limit reached", resets_at=resets_at)
    return TurnOutcome(status="failed", error=error)


NOW = datetime(2026, 11, 26, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("policy", "resets_in_s", "can_continue", "expected"),
    [
        (POLICY, 5.0, True, 5.0 + USAGE_RESET_MARGIN_S),
        (POLICY, -30.0, True, USAGE_RESET_MARGIN_S),  # already reset: go on at once
        (POLICY, None, True, None),  # no reset time reported
        (POLICY, 4000.0, True, None),  # later than usage_limit_max_wait_s
        (POLICY, 5.0, False, None),  # the thread cannot continue
        (
            resolved(enabled=True, strategy="d", delays_s=(1.0,), usage_limit="fail"),
            5.0,
            True,
            None,
        ),
        (
            resolved(enabled=True, strategy="d", delays_s=(1.0,), usage_limit="fallback"),
            5.0,
            True,
            None,
        ),
        (resolved(enabled=False, strategy="d", delays_s=(1.0,)), 5.0, True, None),
    ],
)
def test_usage_wait_is_the_time_to_the_reported_reset_within_the_policy(
    policy: RetryPolicy, resets_in_s: float | None, can_continue: bool, expected: float | None
) -> None:
    resets_at = None if resets_in_s is None else NOW + timedelta(seconds=resets_in_s)
    error = TurnError(kind="usage_limit", message="limit", resets_at=resets_at)
    assert usage_wait(error, policy, now=NOW, can_continue=can_continue) == expected


def test_usage_wait_is_only_for_usage_limits() -> None:
    error = TurnError(kind="rate_limited", message="slow down", resets_at=NOW, retryable=True)
    assert usage_wait(error, POLICY, now=NOW, can_continue=True) is None


async def test_a_usage_limit_waits_for_its_reset_and_continues_in_the_thread() -> None:
    clock = FakeTime()
    session = ScriptedSession([usage_limit(clock, 5.0), failure("overloaded"), DONE])
    turn, recorder, _ = coordinator(session, time=clock)

    result = await turn.run("hello")

    assert result == CoordinatedTurn(outcome=DONE, attempts=3)
    assert session.prompts == ["hello", CONTINUE, CONTINUE]
    wait = 5.0 + USAGE_RESET_MARGIN_S
    # The wait for the reset does not spend the retry schedule: the next failure gets 10 s.
    assert clock.slept == [wait, 10.0]
    (failed, event), _ = recorder.scheduled
    assert (failed, event.kind, event.attempt, event.max_attempts) == (1, "usage_limit", 2, None)
    assert event.delay_s == wait
    assert event.resume_at == EPOCH + timedelta(seconds=1000.0 + wait)
    assert turn.resume_at is None


async def test_the_wait_for_a_reset_does_not_count_against_the_turn_timeout() -> None:
    clock = FakeTime()
    session = ScriptedSession([usage_limit(clock, 100.0), DONE])
    turn, _, _ = coordinator(session, time=clock, timeout_s=30.0)
    assert await turn.run("hello") == CoordinatedTurn(outcome=DONE, attempts=2)


@pytest.mark.parametrize("resets_in_s", [None, 7200.0])
async def test_a_usage_limit_that_cannot_be_waited_for_is_final(resets_in_s: float | None) -> None:
    clock = FakeTime()
    limited = usage_limit(clock, resets_in_s)
    turn, recorder, _ = coordinator(ScriptedSession([limited, DONE]), time=clock)
    assert await turn.run("hello") == CoordinatedTurn(outcome=limited, attempts=1)
    assert recorder.scheduled == []


async def test_a_limit_that_keeps_moving_is_waited_for_a_bounded_number_of_times() -> None:
    clock = FakeTime()
    limits = [usage_limit(clock, 5.0) for _ in range(MAX_USAGE_WAITS + 1)]
    turn, recorder, _ = coordinator(ScriptedSession([*limits, DONE]), time=clock)
    result = await turn.run("hello")
    assert result.outcome.error is not None
    assert result.outcome.error.kind == "usage_limit"
    assert result.attempts == MAX_USAGE_WAITS + 1
    assert len(recorder.scheduled) == MAX_USAGE_WAITS


async def test_an_interrupt_ends_the_wait_for_a_reset() -> None:
    clock = FakeTime(block=True)
    turn, recorder, _ = coordinator(ScriptedSession([usage_limit(clock, 60.0), DONE]), time=clock)
    running = asyncio.create_task(turn.run("hello"))
    await asyncio.wait_for(recorder.waiting.wait(), 5)
    assert turn.resume_at is not None
    await turn.interrupt()
    result = await asyncio.wait_for(running, 5)
    assert result.outcome.status == "interrupted"
    assert result.attempts == 1
    assert turn.resume_at is None


async def test_a_cancelled_wait_keeps_its_resume_time_for_the_next_start() -> None:
    clock = FakeTime(block=True)
    turn, recorder, _ = coordinator(ScriptedSession([usage_limit(clock, 60.0)]), time=clock)
    running = asyncio.create_task(turn.run("hello"))
    await asyncio.wait_for(recorder.waiting.wait(), 5)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert turn.resume_at == EPOCH + timedelta(seconds=1000.0 + 60.0 + USAGE_RESET_MARGIN_S)


async def test_a_resumed_wait_goes_on_with_the_continuation_and_counts_on() -> None:
    clock = FakeTime()
    session = ScriptedSession([DONE])
    resume_at = clock.wall() + timedelta(seconds=4.0)
    turn, recorder, _ = coordinator(session, time=clock, first_attempt=3, resume_at=resume_at)

    assert await turn.run("hello") == CoordinatedTurn(outcome=DONE, attempts=3)
    assert clock.slept == [4.0]
    assert session.prompts == [CONTINUE]
    assert recorder.started == [3]


async def test_the_turn_uses_what_every_attempt_used_together() -> None:
    first = TurnOutcome(
        status="failed",
        error=TurnError(kind="overloaded", message="busy", retryable=True),
        usage=Usage(input_tokens=10, output_tokens=2, cost_usd=0.5),
    )
    last = TurnOutcome(status="completed", final_text="done", usage=Usage(input_tokens=7))
    turn, _, _ = coordinator(ScriptedSession([first, last]))
    result = await turn.run("hello")
    assert result.outcome.usage == Usage(input_tokens=17, output_tokens=2, cost_usd=0.5)
    assert result.outcome.final_text == "done"


def test_usage_adds_up_and_a_cost_is_known_when_either_is() -> None:
    assert spent(None, None) is None
    assert spent(Usage(input_tokens=1), None) == Usage(input_tokens=1)
    assert Usage(cached_input_tokens=1, cost_usd=None) + Usage(
        cache_creation_input_tokens=2, cost_usd=0.25
    ) == Usage(cached_input_tokens=1, cache_creation_input_tokens=2, cost_usd=0.25)
    assert (Usage() + Usage()).cost_usd is None
