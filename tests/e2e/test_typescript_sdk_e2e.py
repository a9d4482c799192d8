"""The TypeScript SDK (clients/typescript, its build in dist/) against a real gateway running
the real Claude Code CLI on the stub model: create a session, stream it, allow a tool call,
interrupt a turn, and keep ONE event stream open across a gateway restart in the middle of a
turn — it reconnects with ``Last-Event-ID`` by itself and yields every event exactly once
(compared with the API's events page). The driver is clients/typescript/e2e/drive.mjs."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import GatewayFactory
from tests.gateway import ROOT, TOKEN

pytestmark = pytest.mark.e2e

SDK = ROOT / "clients" / "typescript"
FAST_RETRY = {"strategies": {"default": {"delays_s": [0.2]}}, "cli_request_retries": 0}


def test_the_sdk_streams_approves_interrupts_and_survives_a_gateway_restart(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    node = shutil.which("node")
    if node is None or not (SDK / "dist" / "index.js").exists():
        pytest.fail("the TypeScript SDK is not built: run `make setup`")
    gateway = make_gateway(retry=FAST_RETRY, server={"coalesce_deltas_ms": 0}).start()
    lines: list[dict[str, Any]] = []
    with subprocess.Popen(
        [node, str(SDK / "e2e" / "drive.mjs"), gateway.base_url, TOKEN, str(workspace)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as driver:
        try:
            assert driver.stdin is not None
            assert driver.stdout is not None
            assert driver.stderr is not None
            for raw in driver.stdout:
                line = json.loads(raw)
                lines.append(line)
                if line["step"] == "restart":  # mid-turn: the stream is open, ticks arriving
                    assert gateway.stop() == 0
                    driver.stdin.write("stopped\n")  # it reads on while the gateway is down
                    driver.stdin.flush()
                    gateway.start()
            assert driver.wait(timeout=60) == 0, (lines, driver.stderr.read())
        finally:
            if driver.poll() is None:
                driver.kill()
    done = lines[-1]
    assert done["step"] == "done", lines
    with gateway.client() as client:
        page = client.get(f"/v1/sessions/{done['session_id']}/events", params={"limit": 1000})
    assert page.status_code == 200, page.text
    assert done["seqs"] == [event["seq"] for event in page.json()["events"]]  # each once, in order
    assert done["disconnects"] >= 1, done  # the restart was seen, and reconnected from
    allowed, interrupted, restarted, after = done["ends"]
    assert allowed["status"] == "completed"
    assert "sdk-e2e" in allowed["final_text"]
    assert (workspace / "sdk.txt").read_text() == "sdk-e2e\n"
    assert interrupted["status"] == "interrupted"
    assert restarted["status"] in ("failed", "interrupted")  # ended visibly by the restart
    assert after["status"] == "completed"
