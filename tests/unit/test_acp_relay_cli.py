"""``agent-gateway-acp``'s command line: the gateway's URL, the key from the environment only,
and a clear refusal (status 2, a line on stderr) of what cannot work; the ACP endpoint from a
URL; the backoff between reconnects."""

from __future__ import annotations

import itertools
import random

import pytest

from agent_gateway_acp.cli import main, parser
from agent_gateway_acp.connection import MAX_DELAY_S, backoff
from agent_gateway_acp.endpoint import UrlError, acp_endpoint


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("http://127.0.0.1:8080", "ws://127.0.0.1:8080/v1/acp"),
        ("https://gateway.example", "wss://gateway.example/v1/acp"),
        ("HTTPS://gateway.example:443/", "wss://gateway.example:443/v1/acp"),
        ("https://proxy.example/gateway/", "wss://proxy.example/gateway/v1/acp"),
        ("http://[::1]:8080/v1/acp", "ws://[::1]:8080/v1/acp"),
        ("http://127.0.0.1:8080?tenant=a", "ws://127.0.0.1:8080/v1/acp?tenant=a"),
    ],
)
def test_the_acp_endpoint_of_a_gateway_url(url: str, endpoint: str) -> None:
    assert acp_endpoint(url) == endpoint


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ws://127.0.0.1:8080", "http:// or https://"),
        ("ftp://gateway.example", "http:// or https://"),
        ("gateway.example:8080", "http:// or https://"),
        ("http://", "names no host"),
        ("http://127.0.0.1:port", "not a URL"),
        ("https://user:secret@gateway.example", "must not carry credentials"),
    ],
)
def test_a_url_that_cannot_be_a_gateways_is_refused(url: str, reason: str) -> None:
    with pytest.raises(UrlError, match=reason) as refused:
        acp_endpoint(url)
    assert "secret" not in str(refused.value)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("AGENT_GATEWAY_URL", raising=False)
    monkeypatch.delenv("AGENT_GATEWAY_TOKEN", raising=False)
    return monkeypatch


def test_no_url_is_refused_with_status_2(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("AGENT_GATEWAY_TOKEN", "key")
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "no gateway URL: pass --url or set AGENT_GATEWAY_URL" in err


def test_a_url_that_is_not_http_is_refused_with_status_2(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("AGENT_GATEWAY_TOKEN", "key")
    clean_env.setenv("AGENT_GATEWAY_URL", "ftp://gateway.example")
    assert main([]) == 2
    assert "http:// or https://" in capsys.readouterr().err


def test_no_key_is_refused_with_status_2(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--url", "http://127.0.0.1:8080"]) == 2
    assert "no gateway key: set AGENT_GATEWAY_TOKEN" in capsys.readouterr().err


def test_the_key_has_no_option_and_the_help_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    options = {o for action in parser()._actions for o in action.option_strings}
    assert not [o for o in options if "token" in o or "key" in o]
    with pytest.raises(SystemExit):
        main(["--help"])
    help = capsys.readouterr().out
    assert "AGENT_GATEWAY_TOKEN" in help
    assert "(ps)" in help
    assert "never to stdout" in help


def test_reconnects_back_off_to_ten_seconds() -> None:
    delays = backoff(rng=random.Random(7))  # noqa: S311 - a fixed jitter to test
    first = [next(delays) for _ in range(10)]
    assert first[0] == 0
    assert 0.4 <= first[1] <= 0.5
    assert all(b >= a * 1.5 for a, b in itertools.pairwise(first[1:6]))
    assert max(first) <= MAX_DELAY_S
    assert first[-1] >= 0.8 * MAX_DELAY_S
