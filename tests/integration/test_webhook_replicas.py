"""Webhooks on two replicas of one PostgreSQL: both dispatchers poll the same outbox, and every
message reaches the receiver once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.dbservers import PostgresServer, RedisServer
from tests.gateway import wait_until
from tests.integration.replicas import two_replicas
from tests.integration.webhooks import deliveries, endpoint, run_turn, webhooks_section
from tests.webhook_receiver import WebhookReceiver

TURNS_PER_REPLICA = 4


def test_two_replicas_deliver_each_message_once(
    tmp_path: Path, postgres: PostgresServer, redis_server: RedisServer
) -> None:
    with WebhookReceiver() as receiver:
        # Both dispatchers look for work every 50 ms: each message is there for both to take.
        section = webhooks_section(
            endpoint(receiver.url, "turn.completed", "session.idle", id="receiver"),
            poll_interval_s=0.05,
        )
        with two_replicas(tmp_path, postgres, redis_server, webhooks=section) as made:
            a, b = (made[name].start() for name in ("gw-a", "gw-b"))
            with a.client() as on_a, b.client() as on_b:
                sessions = [
                    run_turn(client, gateway, "hello")[0]
                    for client, gateway in ((on_a, a), (on_b, b))
                    for _ in range(TURNS_PER_REPLICA)
                ]
                expected = 2 * len(sessions)  # turn.completed and session.idle each
                receiver.wait_for(lambda got: len(got) >= expected)
                log = wait_until(
                    lambda: (
                        len(
                            done := [
                                d
                                for d in deliveries(on_b, "receiver")
                                if d["status"] == "succeeded"
                            ]
                        )
                        == expected
                        and done
                    )
                )
                # Once every delivery is recorded as succeeded, nothing can send it again.
                assert deliveries(on_a, "receiver", status="pending") == []
        ids = Counter(r.id for r in receiver.received)
        assert len(ids) == expected
        assert set(ids.values()) == {1}, [i for i, n in ids.items() if n > 1]
        assert {r.data["session_id"] for r in receiver.received} == set(sessions)
        assert {d["message_id"] for d in log} == set(ids)
        assert {d["sent_by"] for d in log} <= {"gw-a", "gw-b"}
        assert not receiver.refused
