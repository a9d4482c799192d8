"""The limits a running turn is stopped at: the bytes of events it may record
(``limits.max_turn_output_bytes``) and the budgets it runs under (app/runtime/budgets.py).

    coordinator.run ─┬─ ends ──────────────────────────────────────────► its outcome
                     ├─ events over their bytes ─► interrupt, then cancel ─► failed
                     │                             (``resource_limit``, ``output_limit``)
                     └─ a usage report reached a budget ─► interrupt, then cancel
                              ─► completed if the agent finished first, else failed
                                 (``budget_exceeded``, with what the turn used)

Either way the turn's process gets ``STOP_S`` to end the turn after its interrupt; then the
attempt is cancelled and the CLI's process released (the next turn resumes the thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from app.events import TurnError, Usage
from app.providers.base import TurnOutcome
from app.runtime.budgets import Spending
from app.runtime.coordinator import CoordinatedTurn, TurnCoordinator
from app.runtime.live import TurnContext

log = logging.getLogger(__name__)

STOP_S = 10.0
"""How long a turn over a limit has to end after its interrupt before it is cancelled and its
CLI process released."""


class EventBudget:
    """Bytes of event data one turn may record (``limits.max_turn_output_bytes``).

    Every provider's events are charged, so the bound holds for shared-server CLIs too; once
    it is spent, further events are dropped and ``exceeded`` is set for the turn to be stopped.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.exceeded = asyncio.Event()

    def charge(self, size: int) -> bool:
        """Count an event's encoded payload (``size`` characters); False when the turn is
        over its budget (the event is dropped)."""
        if self.exceeded.is_set():
            return False
        self.used += size
        if self.used > self.limit:
            self.exceeded.set()
            return False
        return True


async def run_within(
    coordinator: TurnCoordinator,
    prompt: str,
    live: TurnContext,
    *,
    output: EventBudget,
    spending: Spending | None,
) -> CoordinatedTurn:
    """Run the turn; stop it once its events exceed their bytes or a usage report reached
    one of its budgets, and end it so."""
    run = asyncio.ensure_future(coordinator.run(prompt))
    watched = [asyncio.ensure_future(output.exceeded.wait())]
    if spending is not None:
        watched.append(asyncio.ensure_future(spending.over.wait()))
    try:
        await asyncio.wait({run, *watched}, return_when=asyncio.FIRST_COMPLETED)
        if output.exceeded.is_set():
            await _stop(run, coordinator, live)
            log.warning(
                "turn of session %s stopped: over %d bytes of events", live.session_id, output.limit
            )
            error = TurnError(
                kind="resource_limit",
                reason="output_limit",
                message=f"the turn recorded more than {output.limit} bytes of events and was "
                "stopped; raise limits.max_turn_output_bytes if this is expected.",
                provider=live.provider,
            )
            return CoordinatedTurn(
                outcome=TurnOutcome(status="failed", error=error),
                attempts=_attempts(coordinator),
            )
        if spending is None or not spending.over.is_set():
            return run.result()
        ended = await _stop(run, coordinator, live)
        if ended is not None and ended.outcome.status == "completed":
            return ended  # the agent finished before the interrupt reached it
        spent_error = spending.error(live.provider)
        assert spent_error is not None
        log.warning("turn of session %s stopped: %s", live.session_id, spent_error.message)
        usage = _most(ended.outcome.usage if ended else None, spending.used)
        return CoordinatedTurn(
            outcome=TurnOutcome(status="failed", error=spent_error, usage=usage),
            attempts=ended.attempts if ended else _attempts(coordinator),
        )
    finally:
        for task in (*watched, run):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


async def _stop(
    run: asyncio.Future[CoordinatedTurn], coordinator: TurnCoordinator, live: TurnContext
) -> CoordinatedTurn | None:
    """Interrupt the turn and wait a while for it to end; then cancel it and release the
    CLI. How it ended (None: it was cancelled); a gateway failure (storage) is raised, since
    it outranks the limit."""
    if not run.done():
        await coordinator.interrupt()
        await asyncio.wait({run}, timeout=STOP_S)
    if not run.done():
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
        await live.handle.suspend()
        return None
    return run.result()


def _attempts(coordinator: TurnCoordinator) -> int:
    reporter = coordinator.reporter
    return max(getattr(reporter, "attempts", 1), 1)


def _most(reported: Usage | None, counted: Usage) -> Usage:
    """What a stopped turn used: what its CLI reported at the end, but never less than what
    its reports during the attempts said (a CLI cut short may report less, or nothing)."""
    if reported is None:
        return counted
    costs = [c for c in (reported.cost_usd, counted.cost_usd) if c is not None]
    return Usage(
        input_tokens=max(reported.input_tokens, counted.input_tokens),
        output_tokens=max(reported.output_tokens, counted.output_tokens),
        cached_input_tokens=max(reported.cached_input_tokens, counted.cached_input_tokens),
        cache_creation_input_tokens=max(
            reported.cache_creation_input_tokens, counted.cache_creation_input_tokens
        ),
        cost_usd=max(costs) if costs else None,
    )
