"""Schemathesis fuzzes a live gateway (the fake ``claude``) from the OpenAPI document it serves
(the committed one, with the providers this gateway enables).

Two seeded runs of the ``schemathesis`` CLI against one gateway:

- with the key: the coverage, fuzzing and stateful phases (sessions → turns → events, by the
  document's links) with every check but ``use_after_free`` (``DELETE`` closes a session and
  keeps its history readable, on purpose): nothing is a 5xx, every status, content type,
  header and body is the documented one, invalid input is refused and every schema-valid
  request accepted (ST202: the contract states what the server enforces; the few facts only
  the deployment knows get its values in positive cases, see ``schemathesis_hooks``), auth is
  enforced (``ignored_auth``), and each answer comes within a bound;
- without a key: every keyed operation answers 401 ``application/problem+json`` whatever the
  request (``schemathesis_hooks.keyless_requests_are_refused``), and nothing is a 5xx.

The gateway's limits are lowered so the fuzzer cannot run away with processes; a failing run
prints the CLI's report, each finding with a ``curl`` line that reproduces it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.gateway import FakeGateway, fake_gateway_at, fake_server_in
from tests.gateway import ROOT, TOKEN

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
SEED = 4242
MAX_EXAMPLES = 12
MAX_RESPONSE_S = 5.0

# Positive cases get the gateway's workspace from the map_case hook (schemathesis_hooks), so the
# stateful phase has sessions to follow; negative ones exercise the workspace checks (422).
CONFIG = """
# 413 (body over server.max_body_bytes) is a refusal too.
[checks.negative_data_rejection]
expected-statuses = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]

# A valid request may meet a state of the deployment: a turn running (409), a limit (429) or,
# once the fuzzer's own turns spent a session's budget, that budget (402).
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "401", "402", "403", "404", "409", "429", "5xx"]

# DELETE closes a session and keeps its history readable: a closed session is not gone.
[checks.use_after_free]
enabled = false

[phases.stateful.checks.use_after_free]
enabled = false
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGateway]:
    base = tmp_path_factory.mktemp("fuzz")
    # Every provider the schema names is available (the fake CLIs), and OpenCode, which has
    # every capability, is the fallback: any schema-valid provider or `requires` can be served.
    gateway = fake_gateway_at(
        base,
        codex={
            "enabled": True,
            "executable": str(fake_server_in(base / "bin", "codex")),
            "env": {"FAKE_CODEX_LOG": str(base / "codex.log")},
        },
        opencode={
            "enabled": True,
            "executable": str(fake_server_in(base / "bin", "opencode")),
            "env": {"XDG_DATA_HOME": str(base / "opencode-data")},
        },
        selection={"fallback_chain": ["opencode"]},
        # Endpoints on loopback only: no fuzzed URL reaches beyond this machine.
        webhooks={"allowed_hosts": ["127.0.0.1"], "allow_http_hosts": ["127.0.0.1"]},
        limits={
            "max_live_processes": 4,  # at the cap the longest-idle CLI is closed
            "session_creates_per_minute": 100_000,
            "max_open_sessions_per_key": 100_000,
            "auth_failures_per_minute": 100_000,  # keyless runs get 401s, not the 429 backoff
        },
        # Every mode the schema lists is enabled here, so each schema-valid one is accepted.
        sessions={
            "turn_timeout_s": 20,
            "allowed_approval_modes": ["ask", "auto_edits", "allow_all", "read_only"],
        },
    ).start()
    yield gateway
    gateway.stop()


def _schemathesis(gateway: FakeGateway, tmp_path: Path, *args: str) -> str:
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    with gateway.client() as client:
        served = client.get("/openapi.json")
    assert served.status_code == 200, served.text
    document = tmp_path / "openapi.json"
    document.write_bytes(served.content)
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.integration.schemathesis_hooks",
        "PYTHONPATH": str(ROOT),
        "FUZZ_WORKSPACE": str(gateway.workspace),
        "FUZZ_CAPABILITIES": json.dumps(_capabilities(gateway)),
    }
    env.pop("SCHEMATHESIS_CONFIG", None)
    result = subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(config),
            "run",
            str(document),
            "--url",
            gateway.base_url,
            "--seed",
            str(SEED),
            "--max-examples",
            str(MAX_EXAMPLES),
            "--request-timeout",
            "20",
            "--workers",
            "1",
            "--no-color",
            "--output-truncate",
            "true",
            "--suppress-health-check",
            "all",
            *args,
        ],
        cwd=tmp_path,  # its working files (.schemathesis/) stay out of the checkout
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    report = result.stdout + result.stderr
    if result.returncode != 0:
        pytest.fail(f"schemathesis found problems:\n{report[-20_000:]}", pytrace=False)
    assert "API Operations:" in report, report[-5_000:]
    operations = sum(
        method in {"get", "put", "post", "delete", "patch"}
        for item in served.json()["paths"].values()
        for method in item
    )
    assert f"Tested: {operations}" in report, report[-5_000:]  # every operation, none skipped
    return report


def test_fuzzing_with_the_key_finds_nothing_undocumented(
    gateway: FakeGateway, tmp_path: Path
) -> None:
    report = _schemathesis(
        gateway,
        tmp_path,
        "--header",
        f"Authorization: Bearer {TOKEN}",
        "--generation-with-security-parameters",
        "false",
        "--phases",
        "coverage,fuzzing,stateful",
        "--checks",
        "all",
        "--exclude-checks",
        "use_after_free,keyless_requests_are_refused",
        "--max-response-time",
        str(MAX_RESPONSE_S),
    )
    assert "Stateful" in report
    assert "Traceback" not in gateway.log()


def test_every_keyed_operation_refuses_a_request_without_a_key(
    gateway: FakeGateway, tmp_path: Path
) -> None:
    before = _sessions(gateway), len(gateway.spawns())
    _schemathesis(
        gateway,
        tmp_path,
        "--phases",
        "coverage,fuzzing",
        "--checks",
        "not_a_server_error,keyless_requests_are_refused",
    )
    assert (_sessions(gateway), len(gateway.spawns())) == before  # nothing created or started


def _capabilities(gateway: FakeGateway) -> dict[str, list[str]]:
    """The capabilities each provider has, by name, as the gateway lists them."""
    with gateway.client() as client:
        providers = client.get("/v1/providers").json()["providers"]
    return {p["name"]: [name for name, has in p["capabilities"].items() if has] for p in providers}


def _sessions(gateway: FakeGateway) -> set[str]:
    with gateway.client() as client:
        listed = client.get("/v1/sessions", params={"limit": 500}).json()["sessions"]
    assert len(listed) < 500
    return {s["id"] for s in listed}


def test_what_fuzzing_found_stays_fixed(gateway: FakeGateway) -> None:
    """Each was a finding of these runs: the exact request, and the answer it gets now."""
    problem = "application/problem+json"
    with gateway.client() as client:
        for before in ("2024-01-01T00:00:00", "2024-01-01", "0.5"):
            # a naive time was a 500; a bare number was read as Unix time
            refused = client.get("/v1/sessions", params={"before": before})
            assert refused.status_code == 422, (before, refused.text)
            assert refused.headers["content-type"] == problem
        assert client.get("/v1/sessions", params={"before": "2024-01-01T00:00:00Z"}).is_success
        # a valid time beyond the range Python holds was a 500, then a 422 the schema did not
        # promise; it is before (or after) every session
        created = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
        assert created.status_code == 201, created.text
        for before, found in (
            ("0001-01-01T00:00:00+05:00", False),
            ("9999-12-31T23:00-05:00", True),
        ):
            listed = client.get("/v1/sessions", params={"before": before})
            assert listed.status_code == 200, listed.text
            ids = {s["id"] for s in listed.json()["sessions"]}
            assert (created.json()["id"] in ids) is found, before
        # a provider or capability the gateway does not know is refused by the schema itself
        for body in ({"provider": ""}, {"provider": "gemini"}, {"requires": ["telepathy"]}):
            refused = client.post("/v1/sessions", json={"workspace": "/x", **body})
            assert refused.status_code == 422, refused.text
            assert refused.json()["type"].endswith(":validation_failed"), refused.text
        # the router named only one route's methods in Allow (and the handler dropped it)
        wrong = client.request("PUT", "/v1/sessions")
        assert wrong.status_code == 405
        assert wrong.headers["allow"] == "GET, POST"
        # a body that is not UTF-8 was a bare 400, even for a caller without a key
        not_utf8 = {"content": b"\xff", "headers": {"Content-Type": "application/json"}}
        assert client.post("/v1/sessions", **not_utf8).status_code == 422  # type: ignore[arg-type]
    keyless = httpx.post(gateway.base_url + "/v1/sessions", **not_utf8)  # type: ignore[arg-type]
    assert keyless.status_code == 401
    assert keyless.headers["content-type"] == problem
