"""Following a session with the Python SDK while its gateway restarts mid-turn, with either
client: the test's evidence is every event the stream yielded next to the session's log.

The gateway is stopped while the first turn streams (SIGTERM: its ``shutdown`` frame; or
SIGKILL: the connection just breaks) and started again on the same data directory and port;
the stream goes on by itself. Once the first turn has ended, a second turn runs on the new
gateway, so events after the restart reach the same stream live. A turn runs to its end
before all this, so the agent's thread is on disk when the gateway is killed (Claude Code
cannot resume a thread it had no time to write).
"""

from __future__ import annotations

import asyncio
import signal
from dataclasses import dataclass
from pathlib import Path

from agent_gateway_sdk import AsyncClient, Client
from agent_gateway_sdk.events import TURN_END_TYPES, Event, MessageDeltaEvent

from tests.gateway import TOKEN, GatewayProcess


@dataclass(frozen=True)
class Evidence:
    yielded: list[Event]
    stored: list[Event]
    first_turn: str
    second_turn: str


def restart(gateway: GatewayProcess, *, kill: bool) -> None:
    """Stop the gateway (SIGTERM, or SIGKILL when ``kill``) and start it on its port again."""
    assert gateway.process is not None
    if kill:
        gateway.process.send_signal(signal.SIGKILL)
        gateway.process.wait(timeout=10)
    gateway.stop()
    gateway.start(timeout=60)


def _ends(event: Event, turn_id: str | None) -> bool:
    return turn_id is not None and event.type in TURN_END_TYPES and event.turn_id == turn_id


def follow_sync(
    gateway: GatewayProcess, workspace: Path, *, slow: str, then: str, kill: bool
) -> Evidence:
    with Client(gateway.base_url, token=TOKEN) as client:
        session = client.sessions.create(workspace=workspace, approval_mode="ask")
        assert session.run(then).ok
        after = session.refresh().last_seq
        first = session.turns.start(slow)
        second: str | None = None
        yielded: list[Event] = []
        restarted = False
        with session.events(after=after) as stream:
            for event in stream:
                yielded.append(event)
                if isinstance(event, MessageDeltaEvent) and not restarted:
                    restarted = True
                    restart(gateway, kill=kill)  # while the stream is open, mid-turn
                if _ends(event, first.id):
                    second = session.turns.start(then).id
                if _ends(event, second):
                    break
        assert second is not None
        stored = session.events_page(after=after, limit=1000).events
    return Evidence(yielded, stored, first.id, second)


def follow_async(
    gateway: GatewayProcess, workspace: Path, *, slow: str, then: str, kill: bool
) -> Evidence:
    async def scenario() -> Evidence:
        async with AsyncClient(gateway.base_url, token=TOKEN) as client:
            session = await client.sessions.create(workspace=workspace, approval_mode="ask")
            assert (await session.run(then)).ok
            after = (await session.refresh()).last_seq
            first = await session.turns.start(slow)
            second: str | None = None
            yielded: list[Event] = []
            restarted = False
            async with session.events(after=after) as stream:
                async for event in stream:
                    yielded.append(event)
                    if isinstance(event, MessageDeltaEvent) and not restarted:
                        restarted = True
                        # Blocking on purpose: nothing else runs in this loop meanwhile.
                        restart(gateway, kill=kill)
                    if _ends(event, first.id):
                        second = (await session.turns.start(then)).id
                    if _ends(event, second):
                        break
            assert second is not None
            stored = (await session.events_page(after=after, limit=1000)).events
        return Evidence(yielded, stored, first.id, second)

    return asyncio.run(scenario())


FOLLOW = {"sync": follow_sync, "async": follow_async}


def assert_each_event_once(evidence: Evidence) -> None:
    """The stream yielded exactly the log: every event, once, in order, equal to its record."""
    seqs = [e.seq for e in evidence.yielded]
    assert seqs == sorted(set(seqs)), "an event came twice or out of order"
    assert seqs == [e.seq for e in evidence.stored], "the stream missed or added events"
    assert evidence.yielded == evidence.stored
    ends = [e for e in evidence.yielded if e.type in TURN_END_TYPES]
    assert [e.turn_id for e in ends] == [evidence.first_turn, evidence.second_turn]
