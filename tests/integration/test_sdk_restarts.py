"""The Python SDK's event streams across a restart of a real gateway (the fake ``claude``)
mid-turn: each event once, none missed, the log's own (tests/sdk_restarts.py). The sync
client meets a SIGTERM (the ``shutdown`` frame), the async one a SIGKILL (a broken
connection, refused until the gateway is back); tests/e2e/test_python_sdk.py runs the other
two pairs with the real Claude Code."""

from __future__ import annotations

import pytest
from agent_gateway_sdk.events import TurnCompletedEvent

from tests.fakes.gateway import FakeGatewayFactory
from tests.sdk_restarts import FOLLOW, assert_each_event_once


@pytest.mark.parametrize(
    ("kind", "kill"), [("sync", False), ("async", True)], ids=["sync-sigterm", "async-sigkill"]
)
def test_a_stream_outlives_a_gateway_restart_mid_turn_with_each_event_once(
    make_fake_gateway: FakeGatewayFactory, kind: str, kill: bool
) -> None:
    gateway = make_fake_gateway().start()
    evidence = FOLLOW[kind](gateway, gateway.workspace, slow="slow", then="hello", kill=kill)
    assert_each_event_once(evidence)
    first_end = next(
        e
        for e in evidence.yielded
        if e.turn_id == evidence.first_turn
        and e.type.startswith("turn.")
        and e.type != "turn.started"
    )
    # SIGTERM interrupts the turn as the gateway stops; after SIGKILL the next start ends it.
    assert first_end.type == ("turn.failed" if kill else "turn.interrupted"), first_end
    last = evidence.yielded[-1]
    assert isinstance(last, TurnCompletedEvent)
    assert last.data.final_text == "fake reply"
