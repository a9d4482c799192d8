"""The pure parts of webhooks: the signature (checked with the ``standardwebhooks`` library),
the ``[webhooks]`` settings and what they refuse, which endpoints a message goes to, the
messages a batch of events makes, and the retry schedule."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError
from standardwebhooks.webhooks import Webhook

from app.events import stored_time
from app.records import EventRecord
from app.runtime.turns import stopped
from app.settings import ConfigError, load_settings
from app.store.webhookrecords import MessageHead
from app.webhook_settings import WebhookSettings, secret_key, url_refusal
from app.webhooks.dispatcher import retry_delay
from app.webhooks.endpoints import configured, destinations
from app.webhooks.outbox import CLOSING_REASON, WebhookOutbox
from app.webhooks.sender import Attempt
from app.webhooks.signing import new_secret, signature, webhook_headers

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
NOW = datetime(2026, 12, 1, 9, 30, 15, 123456, tzinfo=UTC)


# --- the signature ------------------------------------------------------------------------------


def test_every_secret_signs_and_the_reference_library_verifies_each() -> None:
    secrets = [new_secret(), SECRET]
    body = '{"type":"turn.completed","timestamp":"2026-12-01T09:30:15Z","data":{}}'
    stamp = int(datetime.now(UTC).timestamp())
    headers = webhook_headers(secrets, msg_id="msg_1", timestamp=stamp, body=body)
    assert headers["webhook-id"] == "msg_1"
    assert headers["webhook-timestamp"] == str(stamp)
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in secrets:
        assert Webhook(secret).verify(body, headers) == {
            "type": "turn.completed",
            "timestamp": "2026-12-01T09:30:15Z",
            "data": {},
        }
        reference = Webhook(secret).sign("msg_1", datetime.fromtimestamp(stamp, UTC), body)
        assert reference in headers["webhook-signature"].split(" ")


def test_a_signature_covers_the_id_the_timestamp_and_the_body() -> None:
    base = signature([SECRET], msg_id="msg_1", timestamp=100, body="{}")
    assert base.startswith("v1,")
    for changed in (
        signature([SECRET], msg_id="msg_2", timestamp=100, body="{}"),
        signature([SECRET], msg_id="msg_1", timestamp=101, body="{}"),
        signature([SECRET], msg_id="msg_1", timestamp=100, body="{ }"),
    ):
        assert changed != base


@pytest.mark.parametrize(
    ("secret", "words"),
    [
        ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "starts with 'whsec_'"),
        ("whsec_not base64!", "base64"),
        ("whsec_c2hvcnQ=", "24 to 64"),
        ("whsec_" + "A" * 100, "24 to 64"),
    ],
)
def test_a_secret_that_is_not_a_standard_webhooks_secret_is_refused(
    secret: str, words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        secret_key(secret)


def test_a_made_secret_holds_32_random_bytes() -> None:
    made = {new_secret() for _ in range(5)}
    assert len(made) == 5
    assert {len(secret_key(s)) for s in made} == {32}


# --- URLs and settings --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("https://hooks.example.org/agent", None),
        ("http://127.0.0.1:9000/hook", None),
        ("http://[::1]:9000/hook", None),
        ("http://hooks.example.org/agent", "allow_http_hosts"),
        ("http://localhost/hook", "allow_http_hosts"),
        ("ftp://127.0.0.1/hook", "https://"),
        ("https://user:pw@hooks.example.org/", "no user"),
        ("https://hooks.example.org/#x", "fragment"),
        ("https://hooks.example.org:port/", "cannot be parsed"),
        ("https:///nohost", "https://"),
    ],
)
def test_an_endpoint_is_https_or_plain_http_to_an_allowed_host(
    url: str, refused: str | None
) -> None:
    why = url_refusal(url, allow_http_hosts=["127.0.0.1", "::1"])
    assert (why is None) if refused is None else (why is not None and refused in why)


def test_allowed_hosts_limits_every_endpoint() -> None:
    allowed = ["hooks.example.org"]
    assert (
        url_refusal("https://hooks.example.org/", allow_http_hosts=[], allowed_hosts=allowed)
        is None
    )
    why = url_refusal("https://other.example.org/", allow_http_hosts=[], allowed_hosts=allowed)
    assert why is not None
    assert "allowed_hosts" in why


def test_the_configuration_refuses_a_plain_http_endpoint_on_a_host_not_allowed(
    tmp_path: Path,
) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [workspaces]
            roots = ["{tmp_path}"]
            [[webhooks.endpoints]]
            url = "http://hooks.internal/agent"
            secret = "{SECRET}"
            events = ["turn.completed"]
            """
        )
    )
    with pytest.raises(ConfigError, match="allow_http_hosts"):
        load_settings(config)
    config.write_text(config.read_text() + '[webhooks]\nallow_http_hosts = ["hooks.internal"]\n')
    [entry] = load_settings(config).webhooks.endpoints
    assert entry.endpoint_id == configured(load_settings(config).webhooks)[0].id


@pytest.mark.parametrize(
    ("section", "words"),
    [
        ({"endpoints": [{"url": "https://a/", "secret": SECRET, "events": []}]}, "at least 1"),
        ({"endpoints": [{"url": "https://a/", "secret": SECRET, "events": ["x"]}]}, "session.idle"),
        (
            {"endpoints": [{"url": "https://a/", "secret": "s3cret", "events": ["turn.failed"]}]},
            "whsec_",
        ),
        ({"lease_s": 10, "timeout_s": 15}, "longer than webhooks.timeout_s"),
        ({"retry_delays_s": [-1]}, "0 to 86400"),
        (
            {
                "endpoints": [
                    {"url": "https://a/x", "secret": SECRET, "events": ["turn.failed"], "id": "a"},
                    {"url": "https://a/y", "secret": SECRET, "events": ["turn.failed"], "id": "a"},
                ]
            },
            "two endpoints",
        ),
    ],
)
def test_bad_webhook_settings_say_what_to_fix(section: dict[str, object], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        WebhookSettings.model_validate(section)


def test_configured_secrets_are_what_the_mask_hides() -> None:
    settings = WebhookSettings.model_validate(
        {
            "endpoints": [
                {"url": "https://a/", "secret": SECRET, "events": ["turn.failed"]},
            ]
        }
    )
    assert settings.secrets() == [SECRET, SECRET.removeprefix("whsec_")]
    assert SECRET not in repr(settings)


# --- which endpoints a message goes to ----------------------------------------------------------


def test_a_message_goes_to_the_enabled_endpoints_that_want_its_type_and_key() -> None:
    settings = WebhookSettings.model_validate(
        {
            "endpoints": [
                {"id": "all", "url": "https://a/", "secret": SECRET, "events": ["turn.failed"]},
                {
                    "id": "alice",
                    "url": "https://b/",
                    "secret": SECRET,
                    "events": ["turn.failed", "session.idle"],
                    "keys": ["alice"],
                },
            ]
        }
    )
    endpoints = configured(settings)

    def head(kind: str, owner: str | None, only: str | None = None) -> MessageHead:
        return MessageHead(id="m", type=kind, session_id="s", owner=owner, endpoint_id=only)

    assert destinations(endpoints, head("turn.failed", "alice")) == ["all", "alice"]
    assert destinations(endpoints, head("turn.failed", "bob")) == ["all"]
    assert destinations(endpoints, head("turn.failed", None)) == ["all"]
    assert destinations(endpoints, head("session.idle", "alice")) == ["alice"]
    assert destinations(endpoints, head("turn.completed", "alice")) == []
    assert destinations(endpoints, head("webhook.test", None, only="alice")) == ["alice"]


# --- the messages of a batch --------------------------------------------------------------------


def _event(seq: int, kind: str, data: str = "{}") -> EventRecord:
    return EventRecord(
        seq=seq,
        session_id="ses_1",
        turn_id="trn_1",
        attempt=1,
        provider="claude_code",
        at=NOW,
        at_text=stored_time(NOW),
        type=kind,  # type: ignore[arg-type]
        data_json=data,
    )


def test_a_turn_s_end_is_followed_by_session_idle_unless_the_session_is_closing() -> None:
    outbox = WebhookOutbox(wake=lambda: None, metrics=None)
    outbox.wanted = frozenset({"session.idle"})
    closing = stopped("session closed").error
    assert closing is not None
    assert closing.message == CLOSING_REASON  # the words the runtime ends such a turn with
    batch = [
        _event(1, "turn.started"),
        _event(2, "turn.completed", '{"final_text":"ok"}'),
        _event(3, "turn.failed", '{"error":{}}'),
        _event(4, "turn.interrupted", '{"reason":"interrupted by the client"}'),
        _event(5, "turn.interrupted", f'{{"reason":"{CLOSING_REASON}"}}'),
    ]
    made = outbox.messages(batch)
    assert [(m.type, m.seq) for m in made] == [
        ("session.idle", 2),
        ("session.idle", 3),
        ("session.idle", 4),
    ]
    assert made[0].payload == (
        '{"type":"session.idle","timestamp":"2026-12-01T09:30:15.123456Z","data":'
        '{"session_id":"ses_1","turn_id":"trn_1","seq":2,"turn_status":"completed"}}'
    )
    assert len({m.id for m in made}) == 3


def test_an_event_s_message_carries_the_event_as_the_stream_does() -> None:
    outbox = WebhookOutbox(wake=lambda: None, metrics=None)
    assert outbox.messages([_event(2, "turn.completed")]) == []  # nobody wants anything yet
    outbox.wanted = frozenset({"turn.completed"})
    [made] = outbox.messages([_event(2, "turn.completed", '{"final_text":"ok"}')])
    assert made.payload == (
        '{"type":"turn.completed","timestamp":"2026-12-01T09:30:15.123456Z","data":'
        '{"seq":2,"session_id":"ses_1","turn_id":"trn_1","attempt":1,"provider":"claude_code",'
        '"at":"2026-12-01T09:30:15.123456Z","type":"turn.completed","data":{"final_text":"ok"}}}'
    )
    assert made.id.startswith("msg_")
    assert "." not in made.id


# --- the retry schedule -------------------------------------------------------------------------


def test_the_retry_schedule_is_bounded_and_honours_retry_after() -> None:
    settings = WebhookSettings(retry_delays_s=[5, 60])
    failed = Attempt(result="http_error", status_code=500)
    assert retry_delay(settings, 1, failed, jitter=lambda: 0.0) == 5
    assert retry_delay(settings, 2, failed, jitter=lambda: 1.0) == pytest.approx(66)
    assert retry_delay(settings, 3, failed) is None  # tried once and after each wait
    throttled = Attempt(result="http_error", status_code=429, retry_after_s=120)
    assert retry_delay(settings, 1, throttled, jitter=lambda: 0.0) == 120
    redirect = Attempt(result="redirect", status_code=302, final=True)
    assert retry_delay(settings, 1, redirect) is None
