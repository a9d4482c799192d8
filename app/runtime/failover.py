"""Session failover: a turn whose provider fails for good goes on with another agent.

    attempt(s) on provider A (same-thread retries, usage-limit waits: the coordinator)
      └─ failed for good, the session allows failover, the kind is not the request's own
         ─► next provider of the chain that can serve (health, capabilities, strategy),
            A and every provider this turn already tried left out
         ─► provider.switched {from, to, reason, message, handoff: {turns, chars}}
         ─► a fresh thread on B; its first prompt is the hand-off (app/runtime/handoff.py):
            the conversation so far, then the failed turn's prompt
         ─► the same turn goes on there (attempts keep counting); later turns stay on B

Failover decides and records: it chooses B, builds the hand-off, stores the session's and the
turn's ``provider`` as B and tells ``provider.switched``, then returns where the turn goes on
(``Moved``). The session's host (app/runtime/host.py) closes A's handle, opens B's and goes on;
nothing here touches the live session. The binding to A's thread is kept (retention prunes it
like any other). No chain left, or nobody able to serve: the last failure stands.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from app.events import ApprovalMode, FailureKind, HandoffSize, ProviderSwitched, TurnError
from app.providers.base import SessionSpec
from app.records import SessionRecord, TurnRecord
from app.runtime.coordinator import RetryPolicy, TurnCoordinator
from app.runtime.eventlog import EventLog
from app.runtime.handoff import HANDOFF_TYPES, SUMMARY_CHARS, Handoff, build_handoff
from app.runtime.live import TurnContext
from app.runtime.requests import SessionRequest
from app.runtime.selector import (
    ApprovalModeRefused,
    CapabilitiesUnmet,
    NoProviderAvailable,
    Selection,
)
from app.settings import Settings
from app.store.interface import Storage

log = logging.getLogger(__name__)

NEVER_FAIL_OVER: frozenset[FailureKind] = frozenset(
    {
        "invalid_request",
        "interrupted",
        "context_lost",
        "agent_error",
        "resource_limit",
        "budget_exceeded",
    }
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

Select = Callable[
    [str | None, Sequence[str], str, Sequence[str], ApprovalMode], Awaitable[Selection]
]
"""``(scenario, requires, strategy, exclude, approval_mode)`` → the next provider (raises
when none)."""


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
    """Where a failed-over turn goes on: the new provider, the session it opens there (a fresh
    thread, the provider's model) and its first prompt (the hand-off's)."""

    provider: str
    spec: SessionSpec
    prompt: str
    handoff: Handoff


class Failover:
    """Chooses where a live session's failed turn goes on, and records the move (one per
    ``LocalSessions``)."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Storage,
        events: EventLog,
        select: Select,
        clock: Callable[[], datetime],
    ) -> None:
        self.settings = settings
        self.store = store
        self.events = events
        self._select = select
        self._clock = clock

    async def go_on(
        self,
        live: TurnContext,
        current: TurnCoordinator,
        turn: TurnRecord,
        error: TurnError,
        attempts: int,
        tried: Sequence[str],
    ) -> Moved | None:
        """Where the turn run by ``current`` goes on, already recorded; None when the failure
        stands (an interrupted turn stays where it is)."""
        if current.interrupted:
            return None
        return await self.move(
            live, turn, error, policy=current.policy, attempts=attempts, tried=tried
        )

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
        """Record the move of ``live``'s turn to the next provider that can serve, and return
        it; None when the failure stands."""
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
                row.approval_mode,  # type: ignore[arg-type]
            )
        except (NoProviderAvailable, CapabilitiesUnmet, ApprovalModeRefused) as exc:
            log.warning(
                "session %s cannot fail over: %s",
                row.id,
                exc,
                extra={"session_id": row.id, "tried": list(tried)},
            )
            return None
        previous = live.provider
        handoff = await self._handoff(row, turn, previous, error)
        spec = await self._switch(row, turn, chosen.provider)
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
        return Moved(provider=chosen.provider, spec=spec, prompt=handoff.prompt, handoff=handoff)

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
                row.id, before=before, types=HANDOFF_TYPES, limit=HANDOFF_PAGE
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

    async def _switch(self, row: SessionRecord, turn: TurnRecord, to: str) -> SessionSpec:
        """Store the session and its turn as ``to``'s; the spec of the fresh thread there."""
        model = self.settings.providers[to].model
        spec = SessionSpec(
            session_id=row.id,
            workspace=Path(row.workspace),
            model=model,
            approval_mode=row.approval_mode,  # type: ignore[arg-type]
            thread_id=None,
            thread_bound_at=None,
            git_dir=None if row.git_dir is None else Path(row.git_dir),
        )
        now = self._clock()
        await self.store.update_session(row.id, provider=to, model=model, updated_at=now)
        await self.store.update_turn(turn.id, provider=to)
        return spec


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None
