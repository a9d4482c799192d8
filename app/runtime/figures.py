"""Each provider's measured figures, from the turns this gateway ran: the routing strategies'
input (app/runtime/strategies.py), ``GET /v1/providers`` and the metrics.

    turn.started ─► first message.delta / message.completed ─► turn.completed | turn.failed
        └─ time to first text ─┘                               └─ duration, failed?, cost

A provider keeps its last ``selection.window_turns`` measured turns (a window of samples, not
an average that decays): medians over it shrug off one stuck turn, a provider's old behaviour
leaves it after that many turns, and every figure is exact for the turns it names. Turns a
client interrupted, the gateway stopped (a budget too), or that failed for the request's own
fault (``invalid_request``, ``resource_limit``) say nothing about the provider and are not
measured; running turns are counted while they run. Figures live in memory, per replica: a
restart starts from none, and the strategies explore again (docs/concepts/selection.md).
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from app.events import FailureKind, TurnError

NOT_MEASURED_KINDS: frozenset[FailureKind] = frozenset(
    {"interrupted", "invalid_request", "resource_limit", "budget_exceeded"}
)
"""Failures a person or the request caused, not the provider."""
NOT_MEASURED_REASONS = frozenset({"gateway_shutdown", "storage_unavailable", "replica_lost"})
"""Failures the gateway caused."""


@dataclass(frozen=True, kw_only=True)
class TurnSample:
    """What one measured turn showed about its provider."""

    first_text_s: float | None
    """Seconds from ``turn.started`` to its first text; None when it printed none."""
    duration_s: float
    failed: bool
    cost_usd: float | None = None


@dataclass(frozen=True, kw_only=True)
class ProviderFigures:
    """One provider's figures over its measured window (None: nothing to say yet)."""

    turns: int = 0
    """Measured turns in the window."""
    first_text_p50_s: float | None = None
    """Median time to first text over the turns that printed text."""
    duration_p50_s: float | None = None
    """Median duration of the completed turns."""
    failure_rate: float | None = None
    """Failed turns over measured turns."""
    cost_per_turn_usd: float | None = None
    """Mean cost over the turns whose CLI reported one."""
    running: int = 0
    """Turns of this provider running on this replica now."""


def summarize(samples: Iterable[TurnSample], *, running: int = 0) -> ProviderFigures:
    """The figures of a window of samples."""
    window = list(samples)
    if not window:
        return ProviderFigures(running=running)
    first = [s.first_text_s for s in window if s.first_text_s is not None]
    durations = [s.duration_s for s in window if not s.failed]
    costs = [s.cost_usd for s in window if s.cost_usd is not None]
    return ProviderFigures(
        turns=len(window),
        first_text_p50_s=statistics.median(first) if first else None,
        duration_p50_s=statistics.median(durations) if durations else None,
        failure_rate=sum(s.failed for s in window) / len(window),
        cost_per_turn_usd=statistics.fmean(costs) if costs else None,
        running=running,
    )


@dataclass(eq=False)
class TurnTiming:
    """The monotonic marks of one running turn; ``first_text`` is set once, by the hooks."""

    provider: str
    started: float
    first_text: float | None = None


class FigureBook:
    """Every provider's window of samples and running turns on this replica."""

    def __init__(
        self, *, window_turns: int, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.window_turns = window_turns
        self.monotonic = monotonic
        self._samples: dict[str, deque[TurnSample]] = {}
        self._running: dict[str, int] = {}

    def turn_started(self, provider: str) -> TurnTiming:
        """Count a turn as running from now; pass the timing to ``turn_ended``."""
        self._running[provider] = self._running.get(provider, 0) + 1
        return TurnTiming(provider=provider, started=self.monotonic())

    def turn_ended(
        self,
        timing: TurnTiming,
        *,
        status: str,
        error: TurnError | None = None,
        cost_usd: float | None = None,
    ) -> None:
        """The turn ended with ``status``: no longer running, and measured when it says
        something about its provider."""
        provider = timing.provider
        self._running[provider] = max(self._running.get(provider, 0) - 1, 0)
        if status not in ("completed", "failed"):  # interrupted: a person or the gateway
            return
        if error is not None and (
            error.kind in NOT_MEASURED_KINDS or error.reason in NOT_MEASURED_REASONS
        ):
            return
        now = self.monotonic()
        first = timing.first_text - timing.started if timing.first_text is not None else None
        self.add(
            provider,
            TurnSample(
                first_text_s=first,
                duration_s=now - timing.started,
                failed=status == "failed",
                cost_usd=cost_usd,
            ),
        )

    def add(self, provider: str, sample: TurnSample) -> None:
        """Add one measured turn to the provider's window (the oldest leaves a full one)."""
        window = self._samples.get(provider)
        if window is None:
            window = self._samples[provider] = deque(maxlen=self.window_turns)
        window.append(sample)

    def figures(self, provider: str) -> ProviderFigures:
        return summarize(self._samples.get(provider, ()), running=self._running.get(provider, 0))

    def all(self, providers: Iterable[str]) -> dict[str, ProviderFigures]:
        return {name: self.figures(name) for name in providers}
