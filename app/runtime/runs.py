"""One-shot runs: select a provider, run one turn, fall back along the chain.

    select ─► session on the first candidate ─► turn (the coordinator retries in the thread)
        └─ failed for good, with a kind another provider may not share
           ─► provider.switched ─► the same turn goes on with the next available candidate,
              whose first prompt is a hand-off of what the failed agent did (session
              failover, app/runtime/failover.py)

A run's session always fails over unless its provider is explicit: an explicit provider
moves only when the run asks for ``fallback: true``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from app.records import SessionRecord, TurnRecord
from app.runtime.budgets import admit_run
from app.runtime.commands import GATEWAY, StartTurn
from app.runtime.requests import SessionRequest
from app.runtime.sessions import Sessions


@dataclass(kw_only=True)
class Run:
    """A one-shot request: its session, its turn, and the switches it made."""

    manager: Sessions
    session: SessionRecord
    prompt: str
    request: SessionRequest
    switches: list[dict[str, str]] = field(default_factory=list)
    turn: TurnRecord | None = None

    async def finish(self) -> TurnRecord:
        """Run the turn (failing over along the chain while that is allowed); the turn."""
        manager = self.manager
        command = StartTurn(
            session_id=self.session.id, prompt=self.prompt, retry=self.request.retry
        )
        started = await manager.execute(command, GATEWAY)
        await manager.wait_turn(self.session.id)
        turn = await manager.store.get_turn(self.session.id, started.id)
        assert turn is not None
        self.turn = turn
        self.session = await manager.get(self.session.id)
        self.switches = await self._switches(turn)
        return turn

    @property
    def ended_by_shutdown(self) -> bool:
        """The run's last turn was stopped by the gateway's graceful shutdown."""
        error = (self.turn.error if self.turn else None) or {}
        return error.get("reason") == "gateway_shutdown"

    async def _switches(self, turn: TurnRecord) -> list[dict[str, str]]:
        events = await self.manager.events.page(self.session.id, after=0, limit=100_000)
        switched = [
            json.loads(e.json)["data"]
            for e in events
            if e.turn_id == turn.id and e.type == "provider.switched"
        ]
        return [
            {"from": s["from_provider"], "to": s["to_provider"], "reason": s["reason"]}
            for s in switched
        ]


async def start_run(manager: Sessions, request: SessionRequest, prompt: str) -> Run:
    """Create the run's session on the selected provider; ``Run.finish`` does the rest.
    Refused (429) before anything is made when the key's budget is spent."""
    await admit_run(manager.store, manager.settings, request.owner, manager.clock())
    fallback = request.provider is None or request.fallback is True
    request = replace(request, metadata={"run": True}, fallback=fallback)
    session = await manager.create(request)
    return Run(manager=manager, session=session, prompt=prompt, request=request)
