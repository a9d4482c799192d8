"""The webhook admin API on a real gateway: admin keys only, secrets shown once and never
again (nor in the log), configured endpoints read-only, disabling, 410 Gone, rotation, and
bad input refused with a problem."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.fakes.gateway import FakeGatewayFactory
from tests.gateway import wait_until
from tests.integration.webhooks import deliveries, endpoint, run_turn, webhooks_section
from tests.webhook_receiver import OTHER_SECRET, SECRET, Received, WebhookReceiver

BOB = {"name": "bob", "token": "bob-token-0123456789abcdefghijklmnopqrstuvwxyz"}
TURN_DONE = {"events": ["turn.completed"]}


def test_webhook_routes_are_for_admin_keys_only(make_fake_gateway: FakeGatewayFactory) -> None:
    gateway = make_fake_gateway(server={"api_keys": [BOB]}, webhooks=webhooks_section()).start()
    with gateway.client() as client:
        made = client.post("/v1/webhooks", json={"url": "https://127.0.0.1/x", **TURN_DONE})
        assert made.status_code == 201, made.text
        hook = made.json()["id"]
        client.headers["Authorization"] = f"Bearer {BOB['token']}"
        for method, path, body in (
            ("GET", "/v1/webhooks", None),
            ("POST", "/v1/webhooks", {"url": "https://127.0.0.1/y", **TURN_DONE}),
            ("GET", f"/v1/webhooks/{hook}", None),
            ("POST", f"/v1/webhooks/{hook}/disable", None),
            ("POST", f"/v1/webhooks/{hook}/enable", None),
            ("POST", f"/v1/webhooks/{hook}/test", None),
            ("POST", f"/v1/webhooks/{hook}/secret", {}),
            ("GET", f"/v1/webhooks/{hook}/deliveries", None),
        ):
            response = client.request(method, path, json=body)
            assert response.status_code == 403, (path, response.text)
            assert response.headers["content-type"] == "application/problem+json"
            assert "admin key" in response.json()["detail"]


def test_an_endpoint_added_through_the_api_gets_its_secret_once(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    with WebhookReceiver() as receiver:
        gateway = make_fake_gateway(webhooks=webhooks_section()).start()
        with gateway.client() as client:
            made = client.post(
                "/v1/webhooks",
                json={"url": receiver.url, "description": "ops", **TURN_DONE},
            )
            assert made.status_code == 201, made.text
            created = made.json()
            secret = created["secret"]
            assert secret.startswith("whsec_")
            receiver.use_secret(secret)
            assert created["source"] == "api"
            assert created["enabled"] is True
            shown = client.get(f"/v1/webhooks/{created['id']}")
            listed = client.get("/v1/webhooks")
            assert shown.json() == {k: v for k, v in created.items() if k != "secret"}
            assert listed.json() == {"endpoints": [shown.json()]}
            tested = client.post(f"/v1/webhooks/{created['id']}/test")
            assert tested.status_code == 202, tested.text
            [received] = receiver.wait_for(lambda got: len(got) == 1)
            assert received.id == tested.json()["message_id"]
            assert received.type == "webhook.test"
            assert received.data == {"endpoint_id": created["id"]}
            run_turn(client, gateway, "hello")
            receiver.wait_for(
                lambda got: [r.type for r in got] == ["webhook.test", "turn.completed"]
            )
            log = wait_until(
                lambda: (
                    len(
                        found := [
                            d for d in deliveries(client, created["id"]) if d["status"] != "pending"
                        ]
                    )
                    == 2
                    and found
                )
            )
            texts = shown.text + listed.text + str(log)
        assert [d["type"] for d in log] == ["turn.completed", "webhook.test"]  # newest first
        assert not receiver.refused
        key = secret.removeprefix("whsec_")
        for where in (texts, gateway.log()):
            assert secret not in where
            assert key not in where


def test_a_configured_endpoint_is_listed_and_tested_but_changed_only_in_the_configuration(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    with WebhookReceiver() as receiver:
        gateway = make_fake_gateway(
            webhooks=webhooks_section(endpoint(receiver.url, "turn.failed", id="ops"))
        ).start()
        with gateway.client() as client:
            [listed] = client.get("/v1/webhooks").json()["endpoints"]
            assert listed["id"] == "ops"
            assert listed["source"] == "config"
            assert listed["events"] == ["turn.failed"]
            assert "secret" not in listed
            for action in ("disable", "enable"):
                refused = client.post(f"/v1/webhooks/ops/{action}")
                assert refused.status_code == 409, refused.text
                assert "configuration" in refused.json()["detail"]
            assert client.post("/v1/webhooks/ops/test").status_code == 202
            receiver.wait_for(lambda got: [r.type for r in got] == ["webhook.test"])
            assert client.get("/v1/webhooks/nope").status_code == 404
            assert client.get("/v1/webhooks/nope/deliveries").status_code == 404
            assert client.post("/v1/webhooks/nope/test").status_code == 404


def test_disabling_an_endpoint_cancels_its_pending_deliveries(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    with WebhookReceiver(answer=lambda received: 500) as receiver:
        gateway = make_fake_gateway(webhooks=webhooks_section(retry_delays_s=[3600.0])).start()
        with gateway.client() as client:
            made = client.post(
                "/v1/webhooks", json={"url": receiver.url, "secret": SECRET, **TURN_DONE}
            )
            hook = made.json()["id"]
            run_turn(client, gateway, "hello")
            receiver.wait_for(lambda got: len(got) == 1)
            [pending] = wait_until(
                lambda: [d for d in deliveries(client, hook) if d["attempts"] == 1]
            )
            assert pending["status"] == "pending"
            assert 3000 < pending["next_attempt_in_s"] <= 3960
            disabled = client.post(f"/v1/webhooks/{hook}/disable")
            assert disabled.status_code == 200, disabled.text
            assert disabled.json()["enabled"] is False
            [cancelled] = deliveries(client, hook)
            assert cancelled["status"] == "cancelled"
            assert client.post(f"/v1/webhooks/{hook}/test").status_code == 409
            assert client.post(f"/v1/webhooks/{hook}/enable").json()["enabled"] is True
        assert len(receiver.received) == 1


def test_an_endpoint_answering_410_is_disabled(make_fake_gateway: FakeGatewayFactory) -> None:
    with WebhookReceiver(answer=lambda received: 410) as receiver:
        gateway = make_fake_gateway(webhooks=webhooks_section()).start()
        with gateway.client() as client:
            made = client.post(
                "/v1/webhooks", json={"url": receiver.url, "secret": SECRET, **TURN_DONE}
            )
            hook = made.json()["id"]
            client.post(f"/v1/webhooks/{hook}/test")
            shown = wait_until(
                lambda: (
                    (found := client.get(f"/v1/webhooks/{hook}").json())["enabled"] is False
                    and found
                )
            )
            [failed] = deliveries(client, hook)
        assert shown["disabled_reason"] == "the endpoint answered 410 Gone"
        assert (failed["status"], failed["attempts"], failed["last_status_code"]) == (
            "failed",
            1,
            410,
        )


def test_a_rotated_secret_signs_with_the_old_and_the_new_one(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    # The receiver still verifies with the old secret; the gateway already signs with the new.
    with WebhookReceiver(SECRET) as receiver:
        rotating = endpoint(
            receiver.url, "turn.completed", secret=OTHER_SECRET, previous_secrets=[SECRET]
        )
        gateway = make_fake_gateway(webhooks=webhooks_section(rotating)).start()
        with gateway.client() as client:
            run_turn(client, gateway, "hello")
        [received] = receiver.wait_for(lambda got: len(got) == 1)
        assert len(received.signatures) == 2
        Webhook(OTHER_SECRET).verify(
            received.body, _headers(received)
        )  # and the new secret verifies it
        log = gateway.log()
        assert OTHER_SECRET not in log
        assert SECRET not in log


def test_an_api_endpoint_s_secret_is_rotated_without_a_refused_delivery(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    with WebhookReceiver(SECRET) as receiver:
        gateway = make_fake_gateway(
            webhooks=webhooks_section(endpoint(receiver.url, "turn.failed", id="ops"))
        ).start()
        with gateway.client() as client:
            made = client.post(
                "/v1/webhooks", json={"url": receiver.url, "secret": SECRET, **TURN_DONE}
            )
            hook = made.json()["id"]
            rotated = client.post(f"/v1/webhooks/{hook}/secret", json={})
            assert rotated.status_code == 200, rotated.text
            new = rotated.json()["secret"]
            assert new.startswith("whsec_")
            assert rotated.json()["signing_secrets"] == 2
            client.post(f"/v1/webhooks/{hook}/test")
            [both] = receiver.wait_for(lambda got: len(got) == 1)  # verified with the old one
            assert len(both.signatures) == 2
            Webhook(new).verify(both.body, _headers(both))  # and the new one verifies it too
            # The receiver has the new secret: the old one stops signing.
            receiver.use_secret(new)
            dropped = client.post(
                f"/v1/webhooks/{hook}/secret", json={"secret": new, "keep_previous": False}
            )
            assert dropped.json() == {"id": hook, "secret": None, "signing_secrets": 1}
            client.post(f"/v1/webhooks/{hook}/test")
            _, only = receiver.wait_for(lambda got: len(got) == 2)
            assert len(only.signatures) == 1
            with pytest.raises(WebhookVerificationError):
                Webhook(SECRET).verify(only.body, _headers(only))
            assert client.post("/v1/webhooks/ops/secret", json={}).status_code == 409
            bad = client.post(f"/v1/webhooks/{hook}/secret", json={"secret": "whsec_c2hvcnQ="})
            assert bad.status_code == 422
        assert not receiver.refused
        for secret in (SECRET, new):
            assert secret not in gateway.log()


def _headers(received: Received) -> dict[str, str]:
    return {
        "webhook-id": received.id,
        "webhook-timestamp": str(received.timestamp),
        "webhook-signature": " ".join(received.signatures),
    }


BAD_ENDPOINTS: list[tuple[dict[str, Any], str]] = [
    ({"url": "https://127.0.0.1/x", "events": ["turn.exploded"]}, "events"),
    ({"url": "https://127.0.0.1/x", "events": []}, "events"),
    ({"url": "https://127.0.0.1/x", **TURN_DONE, "secret": "whsec_c2hvcnQ="}, "24 to 64"),
    ({"url": "https://127.0.0.1/x", **TURN_DONE, "secret": "plain"}, "whsec_"),
    ({"url": "https://127.0.0.1/x", **TURN_DONE, "keys": ["nobody"]}, "nobody"),
    ({"url": "https://127.0.0.1/x#part", **TURN_DONE}, "fragment"),
    ({"url": "https://example.org/x", **TURN_DONE}, "allowed_hosts"),
    ({"url": "not a url", **TURN_DONE}, "https://"),
    ({"url": "https://127.0.0.1/x", **TURN_DONE, "extra": 1}, "extra"),
]


def test_bad_endpoints_are_refused_with_a_problem(make_fake_gateway: FakeGatewayFactory) -> None:
    gateway = make_fake_gateway(webhooks=webhooks_section(allowed_hosts=["127.0.0.1"])).start()
    with gateway.client() as client:
        for body, words in BAD_ENDPOINTS:
            response = client.post("/v1/webhooks", json=body)
            assert response.status_code == 422, (body, response.text)
            assert response.headers["content-type"] == "application/problem+json"
            assert words in response.text, (body, response.text)
        assert client.get("/v1/webhooks").json() == {"endpoints": []}


def test_webhooks_turned_off_answer_409_and_store_nothing(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    with WebhookReceiver() as receiver:
        gateway = make_fake_gateway(
            webhooks=webhooks_section(endpoint(receiver.url, "turn.completed"), enabled=False)
        ).start()
        with gateway.client() as client:
            run_turn(client, gateway, "hello")
            refused = client.get("/v1/webhooks")
        assert refused.status_code == 409
        assert "webhooks.enabled" in refused.json()["detail"]
        assert receiver.received == []
        with contextlib.closing(sqlite3.connect(gateway.data_dir / "gateway.db")) as db:
            assert db.execute("SELECT count(*) FROM webhook_messages").fetchone() == (0,)


def test_a_configured_endpoint_naming_no_key_of_the_gateway_stops_the_start(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(
        webhooks=webhooks_section(
            endpoint("https://127.0.0.1/x", "turn.completed", id="ops", keys=["nobody"])
        )
    )
    with pytest.raises(RuntimeError, match="exited early") as refused:
        gateway.start()
    assert "webhooks.endpoints ops: keys ['nobody'] name no key of this gateway" in str(
        refused.value
    )
    assert "Traceback" not in gateway.log()
