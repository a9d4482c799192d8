"""Webhooks end to end on a real gateway (the fake ``claude``) and a real receiver on loopback
that verifies every delivery with the ``standardwebhooks`` library: what is sent for a turn,
retries under one id, a gateway killed mid-send, redirects and plain http refused."""

from __future__ import annotations

import signal

from tests.fakes.gateway import FakeGatewayFactory
from tests.gateway import follow, metric, scrape, wait_until
from tests.integration.streams import create, start_turn
from tests.integration.webhooks import (
    FAST_RETRIES,
    deliveries,
    endpoint,
    run_turn,
    webhooks_section,
)
from tests.webhook_receiver import SECRET, WebhookReceiver, status_plan


def test_a_turn_with_an_approval_sends_signed_approval_requested_and_turn_completed(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    with WebhookReceiver() as receiver:
        events = ["approval.requested", "turn.completed", "session.idle"]
        gateway = make_fake_gateway(
            webhooks=webhooks_section(endpoint(receiver.url, *events, id="receiver"))
        ).start()
        with gateway.client() as client:
            sid, seen = run_turn(client, gateway, "ask:echo hi")
            received = receiver.wait_for(lambda got: len(got) >= 3)
            stored = {e["type"]: e for e in seen}
            by_type = {r.type: r for r in received}
            assert sorted(by_type) == sorted(events)
            assert len(received) == 3
            assert not receiver.refused
            # The data of each is the event exactly as the stream carried it.
            for kind in ("approval.requested", "turn.completed"):
                assert by_type[kind].data == stored[kind]
                assert by_type[kind].payload["timestamp"] == stored[kind]["at"]
            idle = by_type["session.idle"].data
            assert idle == {
                "session_id": sid,
                "turn_id": stored["turn.completed"]["turn_id"],
                "seq": stored["turn.completed"]["seq"],
                "turn_status": "completed",
            }
            assert len({r.id for r in received}) == 3
            assert all(r.id.startswith("msg_") for r in received)
            log = wait_until(
                lambda: (
                    len(
                        found := [
                            d for d in deliveries(client, "receiver") if d["status"] != "pending"
                        ]
                    )
                    == 3
                    and found
                )
            )
            assert {d["message_id"] for d in log} == {r.id for r in received}
            assert {(d["status"], d["attempts"], d["last_status_code"]) for d in log} == {
                ("succeeded", 1, 200)
            }
            samples = scrape(client)
        assert (
            metric(
                samples,
                "agent_gateway_webhook_attempts_total",
                endpoint="receiver",
                result="success",
            )
            == 3
        )
        assert SECRET not in gateway.log()


def test_only_the_event_types_and_keys_an_endpoint_names_are_sent(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    alice = {"name": "alice", "token": "alice-token-0123456789abcdefghijklmnopqrstuv"}
    with WebhookReceiver() as everyone, WebhookReceiver() as alices:
        gateway = make_fake_gateway(
            server={"api_keys": [alice]},
            webhooks=webhooks_section(
                endpoint(everyone.url, "turn.completed", id="everyone"),
                endpoint(alices.url, "turn.completed", "turn.failed", id="alice", keys=["alice"]),
            ),
        ).start()
        with gateway.client() as admin:
            run_turn(admin, gateway, "hello")
        with gateway.client() as client:
            client.headers["Authorization"] = f"Bearer {alice['token']}"
            sid, _ = run_turn(client, gateway, "hello")
            run_turn(client, gateway, "fail-auth", sid=sid)
        both = everyone.wait_for(lambda got: len(got) == 2)
        mine = alices.wait_for(lambda got: len(got) == 2)
        assert sorted(r.type for r in both) == ["turn.completed", "turn.completed"]
        assert sorted(r.type for r in mine) == ["turn.completed", "turn.failed"]
        assert {r.data["session_id"] for r in mine} == {sid}


def test_session_idle_follows_an_interrupted_turn_but_not_a_deleted_session(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    kinds = ("turn.interrupted", "session.idle", "session.closed")
    with WebhookReceiver() as receiver:
        gateway = make_fake_gateway(
            webhooks=webhooks_section(endpoint(receiver.url, *kinds, id="receiver"))
        ).start()
        with gateway.client() as client:
            kept, gone = create(client, gateway), create(client, gateway)
            for sid in (kept, gone):
                start_turn(client, sid, "slow")
                follow(client, sid, lambda e: e["type"] == "message.delta")  # it is running
            assert client.post(f"/v1/sessions/{kept}/interrupt").status_code == 202
            assert client.delete(f"/v1/sessions/{gone}").status_code == 200
            # Every message made by then is delivered once the log has nothing pending.
            wait_until(
                lambda: (
                    len(logged := deliveries(client, "receiver")) >= 4
                    and all(d["status"] == "succeeded" for d in logged)
                )
            )
        by_session: dict[str, list[str]] = {kept: [], gone: []}
        for received in receiver.received:
            by_session[received.data["session_id"]].append(received.type)
        assert sorted(by_session[kept]) == ["session.idle", "turn.interrupted"]
        assert sorted(by_session[gone]) == ["session.closed", "turn.interrupted"]


def test_a_receiver_failing_three_times_gets_the_same_id_until_it_answers_200(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    with WebhookReceiver(answer=status_plan(500, 500, 500)) as receiver:
        gateway = make_fake_gateway(
            webhooks=webhooks_section(endpoint(receiver.url, "turn.completed", id="flaky"))
        ).start()
        with gateway.client() as client:
            run_turn(client, gateway, "hello")
            received = receiver.wait_for(lambda got: any(r.status == 200 for r in got))
            assert [r.status for r in received] == [500, 500, 500, 200]
            assert len({r.id for r in received}) == 1
            assert len({r.body for r in received}) == 1  # the same message, signed anew
            [logged] = wait_until(
                lambda: [d for d in deliveries(client, "flaky") if d["status"] == "succeeded"]
            )
            assert logged["attempts"] == 4
            assert logged["message_id"] == received[0].id
            assert logged["last_status_code"] == 200
            samples = scrape(client)
        for result, count in (("http_error", 3), ("success", 1)):
            assert (
                metric(
                    samples, "agent_gateway_webhook_attempts_total", endpoint="flaky", result=result
                )
                == count
            )


def test_a_delivery_is_given_up_once_the_schedule_is_spent(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    with WebhookReceiver(answer=lambda received: 503) as receiver:
        gateway = make_fake_gateway(
            webhooks=webhooks_section(endpoint(receiver.url, "turn.completed", id="down"))
        ).start()
        with gateway.client() as client:
            run_turn(client, gateway, "hello")
            [logged] = wait_until(
                lambda: [d for d in deliveries(client, "down") if d["status"] == "failed"]
            )
        assert logged["attempts"] == len(FAST_RETRIES) + 1
        assert logged["last_status_code"] == 503
        assert len(receiver.received) == len(FAST_RETRIES) + 1


def test_a_gateway_killed_mid_send_delivers_after_restart(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    with WebhookReceiver() as receiver:
        # A lease far longer than the test: only giving back the killed run's leases at
        # start-up can send the delivery again.
        gateway = make_fake_gateway(
            webhooks=webhooks_section(
                endpoint(receiver.url, "turn.completed", id="receiver"), lease_s=600
            )
        )
        receiver.hold()
        gateway.start()
        with gateway.client() as client:
            run_turn(client, gateway, "hello")
        assert receiver.held.wait(timeout=20), "the delivery never reached the receiver"
        assert gateway.process is not None
        gateway.process.send_signal(signal.SIGKILL)
        gateway.process.wait(timeout=10)
        gateway.stop()
        receiver.release()  # the held request dies unanswered with the gateway's connection
        assert receiver.received == []
        gateway.start()
        [delivered] = receiver.wait_for(lambda got: len(got) == 1)
        assert delivered.id == receiver.held_id
        assert delivered.type == "turn.completed"
        with gateway.client() as client:
            [logged] = wait_until(
                lambda: [d for d in deliveries(client, "receiver") if d["status"] == "succeeded"]
            )
        assert logged["attempts"] == 1  # the killed attempt never came back to be counted


def test_redirects_are_not_followed_and_plain_http_elsewhere_is_refused(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    with WebhookReceiver() as target, WebhookReceiver(redirect_to="") as redirecting:
        redirecting.redirect_to = target.url
        gateway = make_fake_gateway(webhooks=webhooks_section()).start()
        with gateway.client() as client:
            created = client.post(
                "/v1/webhooks",
                json={"url": redirecting.url, "events": ["turn.completed"], "secret": SECRET},
            )
            assert created.status_code == 201, created.text
            hook = created.json()
            tested = client.post(f"/v1/webhooks/{hook['id']}/test")
            assert tested.status_code == 202, tested.text
            [logged] = wait_until(
                lambda: [d for d in deliveries(client, hook["id"]) if d["status"] == "failed"]
            )
            assert logged["message_id"] == tested.json()["message_id"]
            assert logged["attempts"] == 1  # a redirect is not tried again either
            assert logged["last_status_code"] == 307
            assert "redirects are not followed" in logged["last_error"]
            assert [r.status for r in redirecting.received] == [307]
            assert target.received == []
            assert not redirecting.refused
            for url in (
                target.url.replace("127.0.0.1", "localhost"),
                "ftp://127.0.0.1/hook",
                f"http://user:pw@{target.url.removeprefix('http://')}",
            ):
                refused = client.post(
                    "/v1/webhooks", json={"url": url, "events": ["turn.completed"]}
                )
                assert refused.status_code == 422, (url, refused.text)
                assert refused.headers["content-type"] == "application/problem+json"
            assert (
                "allow_http_hosts"
                in client.post(
                    "/v1/webhooks",
                    json={
                        "url": target.url.replace("127.0.0.1", "localhost"),
                        "events": ["turn.completed"],
                    },
                ).json()["detail"]
            )
            listed = client.get("/v1/webhooks").json()["endpoints"]
        assert [e["id"] for e in listed] == [hook["id"]]
