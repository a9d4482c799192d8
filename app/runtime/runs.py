"""One-shot runs: select a provider, run one turn, and fall back before any output.

    select ─► session on the first candidate ─► turn (the coordinator retries in the thread)
        └─ failed before any output, with a kind another provider may not share
           ─► provider.switched ─► the same prompt on the next available candidate

Once the agent has produced output (text, reasoning or a tool call) the run stays on its
provider: only same-thread retries apply. An explicit provider never falls back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from app.events import ApprovalMode, FailureKind
from app.runtime.selector import candidates
from app.runtime.sessions import SessionManager
from app.store.tables import SessionRow, TurnRow

NO_FALLBACK: frozenset[FailureKind] = frozenset(
    {"invalid_request", "interrupted", "context_lost", "agent_error"}
)
"""Failures that the same request would meet on any provider, or that a person caused."""

OUTPUT_TYPES = frozenset({"message.delta", "message.completed", "reasoning.delta", "tool.started"})


@dataclass(kw_only=True)
class Run:
    """A one-shot request: its session, the providers left to fall back to, what happened."""

    manager: SessionManager
    session: SessionRow
    prompt: str
    retry: dict[str, JsonValue] | None
    remaining: list[str]
    switches: list[dict[str, str]] = field(default_factory=list)
    turn: TurnRow | None = None

    async def finish(self) -> TurnRow:
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

    async def _had_output(self, turn: TurnRow) -> bool:
        events = await self.manager.events.page(self.session.id, after=0, limit=100_000)
        return any(e.turn_id == turn.id and e.type in OUTPUT_TYPES for e in events)

    async def _next_available(self) -> str | None:
        while self.remaining:
            name = self.remaining.pop(0)
            health = await self.manager.registry.health(name)
            if health.available and name in self.manager.providers:
                return name
        return None


async def start_run(
    manager: SessionManager,
    *,
    workspace: str,
    prompt: str,
    provider: str | None = None,
    scenario: str | None = None,
    model: str | None = None,
    approval_mode: ApprovalMode | None = None,
    retry: dict[str, JsonValue] | None = None,
    requires: Sequence[str] = (),
    owner: str | None = None,
) -> Run:
    """Create the run's session (owned by ``owner``) on the selected provider;
    ``Run.finish`` does the rest."""
    session = await manager.create(
        workspace=workspace,
        provider=provider,
        scenario=scenario,
        model=model,
        approval_mode=approval_mode,
        retry=retry,
        requires=requires,
        metadata={"run": True},
        owner=owner,
    )
    order = [
        c.provider
        for c in candidates(
            provider=provider,
            scenario=scenario,
            configured=list(manager.settings.providers),
            selection=manager.settings.selection,
        )
    ]
    remaining = [] if provider is not None else order[order.index(session.provider) + 1 :]
    return Run(manager=manager, session=session, prompt=prompt, retry=retry, remaining=remaining)
