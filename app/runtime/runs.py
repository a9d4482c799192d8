"""One-shot runs: select a provider, run one turn, and fall back before any output.

    select ─► session on the first candidate ─► turn (the coordinator retries in the thread)
        └─ failed before any output, with a kind another provider may not share
           ─► provider.switched ─► the same prompt on the next available candidate

Once the agent has produced output (text, reasoning or a tool call) the run stays on its
provider: only same-thread retries apply. An explicit provider never falls back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pydantic import JsonValue

from app.events import FailureKind
from app.records import SessionRecord, TurnRecord
from app.runtime.requests import SessionRequest
from app.runtime.sessions import SessionManager

NO_FALLBACK: frozenset[FailureKind] = frozenset(
    {"invalid_request", "interrupted", "context_lost", "agent_error"}
)
"""Failures that the same request would meet on any provider, or that a person caused."""

OUTPUT_TYPES = frozenset({"message.delta", "message.completed", "reasoning.delta", "tool.started"})


@dataclass(kw_only=True)
class Run:
    """A one-shot request: its session, the providers left to fall back to, what happened."""

    manager: SessionManager
    session: SessionRecord
    prompt: str
    retry: dict[str, JsonValue] | None
    remaining: list[str]
    switches: list[dict[str, str]] = field(default_factory=list)
    turn: TurnRecord | None = None

    async def finish(self) -> TurnRecord:
        """Run the turn, falling back along the chain while that is allowed; the last turn."""
        manager = self.manager
        while True:
            started = await manager.start_turn(self.session.id, self.prompt, retry=self.retry)
            await manager.wait_turn(self.session.id)
            turn = await manager.store.get_turn(self.session.id, started.id)
            assert turn is not None
            self.turn = turn
            kind = (turn.error or {}).get("kind")
            if turn.status != "failed" or kind in NO_FALLBACK or await self._had_output(turn):
                return turn
            following = await self._next_available()
            if following is None:
                return turn
            self.switches.append(
                {"from": self.session.provider, "to": following, "reason": str(kind)}
            )
            self.session = await manager.switch_provider(
                self.session.id, following, reason=f"{kind} before any output"
            )

    @property
    def ended_by_shutdown(self) -> bool:
        """The run's last turn was stopped by the gateway's graceful shutdown."""
        error = (self.turn.error if self.turn else None) or {}
        return error.get("reason") == "gateway_shutdown"

    async def _had_output(self, turn: TurnRecord) -> bool:
        events = await self.manager.events.page(self.session.id, after=0, limit=100_000)
        return any(e.turn_id == turn.id and e.type in OUTPUT_TYPES for e in events)

    async def _next_available(self) -> str | None:
        while self.remaining:
            name = self.remaining.pop(0)
            health = await self.manager.registry.health(name)
            if health.available and name in self.manager.providers:
                return name
        return None


async def start_run(manager: SessionManager, request: SessionRequest, prompt: str) -> Run:
    """Create the run's session on the selected provider; ``Run.finish`` does the rest.

    The run falls back along the candidates that could serve, in the order the routing
    strategy ranked them (``ordered``: the selector's order)."""
    session = await manager.create(replace(request, metadata={"run": True}))
    remaining: list[str] = []
    if not request.provider:
        ranked = (session.selection or {}).get("scores")
        if isinstance(ranked, list):
            remaining = [
                str(entry["provider"])
                for entry in ranked
                if isinstance(entry, dict) and entry.get("provider") != session.provider
            ]
    return Run(
        manager=manager, session=session, prompt=prompt, retry=request.retry, remaining=remaining
    )
