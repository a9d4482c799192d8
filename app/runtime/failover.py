"""Session failover: a turn whose provider fails for good goes on with another agent.

    attempt(s) on provider A (same-thread retries, usage-limit waits: the coordinator)
      └─ failed for good, the session allows failover, the kind is not the request's own
         ─► next provider of the chain that can serve (health, capabilities, strategy),
            A and every provider this turn already tried left out
         ─► provider.switched {from, to, reason, message, handoff: {turns, chars}}
         ─► a fresh thread on B; its first prompt is the hand-off (app/runtime/handoff.py):
            the conversation so far, then the failed turn's prompt
         ─► the same turn goes on there (attempts keep counting); later turns stay on B

The session's ``provider`` becomes B; the binding to A's thread is kept (retention prunes it
like any other). No chain left, or nobody able to serve: the last failure stands.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from app.events import FailureKind, HandoffSize, ProviderSwitched, TurnError
from app.providers.base import Provider, SessionSpec
from app.records import SessionRecord, TurnRecord
from app.runtime.coordinator import RetryPolicy, Sleep, TurnCoordinator
from app.runtime.eventlog import EventLog
from app.runtime.handoff import SUMMARY_CHARS, Handoff, build_handoff
from app.runtime.live import TurnContext
from app.runtime.requests import SessionRequest
from app.runtime.selector import NoProviderAvailable, Selection
from app.settings import Settings
from app.store.interface import Storage

log = logging.getLogger(__name__)

NEVER_FAIL_OVER: frozenset[FailureKind] = frozenset(
    {"invalid_request", "interrupted", "context_lost", "agent_error", "resource_limit"}
)
"""Failures another agent would meet too (the request's own), or that a person caused."""

HANDOFF_EVENTS = 100_000
"""The most events of a session read to build a hand-off (the newest ones)."""
HANDOFF_PAGE = 1_000
"""Events read at a time, from the log's end back."""
NO_SEQ_YET = 2**62
"""Greater than any event seq: reading backwards from it starts at the newest event."""
TURN_FLOOR_CHARS = 30
"""Less than an earlier turn's summary adds to a hand-off besides its prompt (its heading,
``User:`` and the blank line)."""

Select = Callable[[str | None, Sequence[str], str, Sequence[str]], Awaitable[Selection]]
"""``(scenario, requires, strategy, exclude)`` → the next provider (raises when none)."""


def wants_failover(request: SessionRequest, settings: Settings) -> bool:
    """Whether a new session fails over: its own ``fallback``, else its scenario's, else the
    gateway's default. An explicit provider moves only when ``fallback`` is true: it starts
    there and, failing for good, goes on along the chain like any other session."""
    if request.fallback is not None:
        return request.fallback
    if request.provider is not None:
        return False
    scenario = request.scenario
    return settings.selection.failover or scenario in settings.selection.failover_scenarios


def may_fail_over(error: TurnError, policy: RetryPolicy) -> bool:
    """Whether a turn's final failure moves it to another provider (the session allowing)."""
    if error.kind in NEVER_FAIL_OVER or error.reason is not None:
        return False  # ``reason``: the gateway ended it (storage, shutdown), not the provider
    return error.kind != "usage_limit" or policy.usage_limit != "fail"


@dataclass(frozen=True, kw_only=True)
class Moved:
    """Where a failed-over turn goes on: the new provider and its first prompt."""

    provider: str
    prompt: str
    handoff: Handoff


class Failover:
    """Moves a live session's failed turn to the next provider (one per ``LocalSessions``)."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Storage,
        events: EventLog,
        providers: Mapping[str, Provider],
        select: Select,
        clock: Callable[[], datetime],
        sleep: Sleep,
        monotonic: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.store = store
        self.events = events
        self.providers = providers
        self._select = select
        self._clock = clock
        self._sleep = sleep
        self._monotonic = monotonic

    async def go_on(
        self,
        live: TurnContext,
        turn: TurnRecord,
        error: TurnError,
        attempts: int,
        tried: Sequence[str],
    ) -> tuple[TurnCoordinator, str] | None:
        """``TurnServices.fail_over``: the turn's coordinator on the next provider, and the
        hand-off it starts with; None when the failure stands."""
        current = live.coordinator
        if current is None or current.interrupted:
            return None
        moved = await self.move(
            live, turn, error, policy=current.policy, attempts=attempts, tried=tried
        )
        if moved is None:
            return None
        live.coordinator = TurnCoordinator(
            handle=live.handle,
            policy=current.policy,
            continuation_prompt=self.settings.retry.continuation_prompt,
            turn_timeout_s=self.settings.sessions.turn_timeout_s,
            reporter=current.reporter,  # the turn's record and output budget go on
            sleep=self._sleep,
            monotonic=self._monotonic,
            clock=self._clock,
            first_attempt=attempts + 1,
        )
        if current.interrupted:  # asked during the switch: the new agent does not start
            await live.coordinator.interrupt()
        return live.coordinator, moved.prompt

    async def move(
        self,
        live: TurnContext,
        turn: TurnRecord,
        error: TurnError,
        *,
        policy: RetryPolicy,
        attempts: int,
        tried: Sequence[str],
    ) -> Moved | None:
        """Switch ``live`` to the next provider that can serve, or None (the failure stands)."""
        row = await self.store.get_session(live.session_id)
        selection = (row.selection if row else None) or {}
        if row is None or not selection.get("fallback") or not may_fail_over(error, policy):
            return None
        requires = selection.get("requires")
        strategy = selection.get("strategy")
        try:
            chosen = await self._select(
                _str(selection.get("scenario")),
                [str(r) for r in requires] if isinstance(requires, list) else [],
                _str(strategy) or "ordered",
                tried,
            )
        except NoProviderAvailable as exc:  # CapabilitiesUnmet too
            log.warning(
                "session %s cannot fail over: %s",
                row.id,
                exc,
                extra={"session_id": row.id, "tried": list(tried)},
            )
            return None
        previous = live.provider
        handoff = await self._handoff(row, turn, previous, error)
        await self._switch(live, row, turn, chosen.provider)
        await self.events.append(
            row.id,
            ProviderSwitched(
                from_provider=previous,
                to_provider=chosen.provider,
                reason=error.kind,
                message=error.message,
                handoff=HandoffSize(turns=handoff.turns, chars=handoff.chars),
            ),
            turn_id=turn.id,
            attempt=max(attempts, 1),
            provider=chosen.provider,
        )
        log.info(
            "session %s failed over from %s to %s (%s)",
            row.id,
            previous,
            chosen.provider,
            error.kind,
            extra={
                "session_id": row.id,
                "turn_id": turn.id,
                "provider": chosen.provider,
                "reason": error.kind,
                "handoff_turns": handoff.turns,
                "handoff_chars": handoff.chars,
            },
        )
        return Moved(provider=chosen.provider, prompt=handoff.prompt, handoff=handoff)

    async def _handoff(
        self, row: SessionRecord, turn: TurnRecord, provider: str, error: TurnError
    ) -> Handoff:
        """The hand-off, from the log read backwards: the newest turns are the ones it
        carries, and reading stops once the turns read could not all fit anyway."""
        await self.events.flush()  # what the failed attempt said is in the store
        max_chars = self.settings.sessions.handoff_max_chars
        newest_first: list[dict[str, Any]] = []
        before, floor = NO_SEQ_YET, 0
        while len(newest_first) < HANDOFF_EVENTS and floor < max_chars:
            page = await self.store.events_before(
                row.id, before=before, types=_HANDOFF_TYPES, limit=HANDOFF_PAGE
            )
            for event in page:
                envelope = json.loads(event.json)
                newest_first.append(envelope)
                if event.type == "turn.started" and event.turn_id != turn.id:
                    words = str(envelope.get("data", {}).get("prompt", "")).split()
                    floor += TURN_FLOOR_CHARS + min(len(" ".join(words)), SUMMARY_CHARS)
            if len(page) < HANDOFF_PAGE:
                break
            before = page[-1].seq
        return build_handoff(
            reversed(newest_first),
            current_turn_id=turn.id,
            prompt=turn.prompt,
            from_provider=provider,
            reason=f"{error.kind}: {error.message}",
            max_chars=max_chars,
            earlier=turn.number - 1,
            mask=self.events.mask.text,
        )

    async def _switch(
        self, live: TurnContext, row: SessionRecord, turn: TurnRecord, to: str
    ) -> None:
        """Close the old provider's handle and open a fresh thread on ``to``."""
        await live.handle.close()
        model = self.settings.providers[to].model
        spec = SessionSpec(
            session_id=row.id,
            workspace=Path(row.workspace),
            model=model,
            approval_mode=row.approval_mode,  # type: ignore[arg-type]
            thread_id=None,
            thread_bound_at=None,
        )
        live.provider, live.handle, live.thread_id = to, self.providers[to].open_session(spec), None
        now = self._clock()
        await self.store.update_session(row.id, provider=to, model=model, updated_at=now)
        await self.store.update_turn(turn.id, provider=to)


_HANDOFF_TYPES = (
    "turn.started",
    "turn.completed",
    "turn.failed",
    "turn.interrupted",
    "message.completed",
    "tool.started",
    "tool.completed",
)
"""The events a hand-off is built from (the store skips deltas and the rest)."""


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None
