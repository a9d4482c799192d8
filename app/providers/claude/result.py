"""A Claude Code ``result`` line → the turn's usage, cost and outcome (pure, no I/O).

The ``result`` line ends every turn (reference §1.7). Its ``is_error`` says whether the turn
failed, never its ``subtype``: an API failure after the CLI's retries arrives as subtype
``success`` with ``is_error`` true (2.1.330, obs).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.events import Usage, spent
from app.providers.base import TurnOutcome
from app.providers.claude.classifier import error_for_result, interrupted_error
from app.providers.raw import as_dict, as_int, as_number, as_str

_INTERRUPTED_REASONS = frozenset({"aborted_streaming", "aborted_tools"})


class CostMeter:
    """The cost of each turn of one process.

    ``total_cost_usd`` is the process's running total across turns (2.1.330 schema:
    "cumulative across turns in streaming-input sessions"), while ``usage`` is per turn. The
    per-turn cost is the sum of ``model_usage_since_last_result``, else the growth of the
    running total since this process's previous result.
    """

    def __init__(self) -> None:
        self._total: float | None = None

    def turn_cost(self, raw: dict[str, Any]) -> float | None:
        total = as_number(raw.get("total_cost_usd"))
        previous, self._total = self._total, total
        since_last = raw.get("model_usage_since_last_result")
        if isinstance(since_last, dict):
            costs = [as_number(as_dict(model).get("costUSD")) for model in since_last.values()]
            if None not in costs:
                return float(sum(cost for cost in costs if cost is not None))
        if total is None:
            return None
        return max(total - previous, 0.0) if previous is not None else total


class StreamedUsage:
    """What one turn has used so far, from the usage each model response reports as it
    streams (``message_start``, then ``message_delta`` with the final output count); a
    response's later counts replace its earlier ones, and responses add up."""

    def __init__(self) -> None:
        self._responses: dict[str, Usage] = {}

    def seen(self, message_id: str, usage: dict[str, Any]) -> Usage | None:
        """The turn's usage once response ``message_id`` reported ``usage``; None when that
        changed nothing."""
        before = self._responses.get(message_id, Usage())
        now = Usage(
            input_tokens=max(before.input_tokens, as_int(usage.get("input_tokens"))),
            output_tokens=max(before.output_tokens, as_int(usage.get("output_tokens"))),
            cached_input_tokens=max(
                before.cached_input_tokens, as_int(usage.get("cache_read_input_tokens"))
            ),
            cache_creation_input_tokens=max(
                before.cache_creation_input_tokens,
                as_int(usage.get("cache_creation_input_tokens")),
            ),
        )
        if now == before:
            return None
        self._responses[message_id] = now
        return spent(*self._responses.values())

    def clear(self) -> None:
        """The turn ended: the next one starts from nothing."""
        self._responses.clear()


def usage_of(raw: dict[str, Any], meter: CostMeter) -> Usage | None:
    """The turn's token usage and cost; None when the line reports no usage (the meter then
    does not count it either)."""
    usage = raw.get("usage")
    if not isinstance(usage, dict):
        return None
    return Usage(
        input_tokens=as_int(usage.get("input_tokens")),
        output_tokens=as_int(usage.get("output_tokens")),
        cached_input_tokens=as_int(usage.get("cache_read_input_tokens")),
        cache_creation_input_tokens=as_int(usage.get("cache_creation_input_tokens")),
        cost_usd=meter.turn_cost(raw),
    )


def outcome_of(
    raw: dict[str, Any],
    usage: Usage | None,
    *,
    interrupt_seen: bool,
    limit_resets_at: datetime | None,
) -> TurnOutcome:
    """How the turn ended: completed, interrupted (by its terminal reason, or an execution
    error after the interrupt marker was seen) or failed (classified; a usage limit without
    its own reset time takes the one a rejected ``rate_limit_event`` gave)."""
    stop_reason = as_str(raw.get("stop_reason"))
    terminal_reason = as_str(raw.get("terminal_reason"))
    if raw.get("is_error") is not True:
        return TurnOutcome(
            status="completed",
            final_text=as_str(raw.get("result")) or "",
            usage=usage,
            stop_reason=stop_reason,
        )
    if terminal_reason in _INTERRUPTED_REASONS or (
        raw.get("subtype") == "error_during_execution" and interrupt_seen
    ):
        return TurnOutcome(
            status="interrupted",
            usage=usage,
            stop_reason=stop_reason,
            error=interrupted_error(terminal_reason),
        )
    error = error_for_result(raw)
    if error.kind == "usage_limit" and error.resets_at is None:
        error = error.model_copy(update={"resets_at": limit_resets_at})
    return TurnOutcome(status="failed", usage=usage, stop_reason=stop_reason, error=error)
