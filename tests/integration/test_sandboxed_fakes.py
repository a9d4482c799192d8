"""The fake ``claude`` in the bubblewrap sandbox, through a real gateway: the sandbox's own
process tree (the other orchestration tests run their fakes unsandboxed, following them by
the pids they log), what the providers' reports say about it, and the sessions' homes.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from app.providers.sandboxing import bwrap_problem, inside_uid
from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import wait_until
from tests.integration.callers import new_session
from tests.integration.cliprocs import NO_RETRY, alive, gateway_pid, run_turn, terminal

BWRAP = "bwrap"
SANDBOXED = {"mode": "bwrap"}


@pytest.fixture(autouse=True)
def _bubblewrap_works() -> None:
    problem = bwrap_problem(BWRAP, inside_uid())
    assert problem is None, f"{problem} (scripts/system-packages.sh installs bubblewrap)"


def tagged(tag: str) -> list[int]:
    """Live host pids whose environment carries the gateway's process tag ``tag``."""
    found = []
    needle = f"AGENT_GATEWAY_PROCESS={tag}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def start(make_fake_gateway: FakeGatewayFactory, **sandbox: Any) -> FakeGateway:
    return make_fake_gateway(sandbox={**SANDBOXED, **sandbox}).start()


def test_a_sandboxed_fake_runs_in_its_sessions_home_with_its_pid_namespace(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = start(make_fake_gateway)
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        assert terminal(run_turn(client, sid, "hi"))["type"] == "turn.completed"
        providers = client.get("/v1/providers/claude_code").json()
        ready = client.get("/readyz").json()
    [spawn] = gateway.spawns()
    home = gateway.data_dir / "homes" / sid
    assert spawn["env"]["HOME"] == str(home)
    assert spawn["env"]["CLAUDE_CONFIG_DIR"] == str(home / ".claude")
    assert spawn["env"]["TMPDIR"] == "/tmp"
    assert spawn["pid"] == 2  # bwrap's init is 1 in the sandbox's PID namespace
    assert (home.stat().st_mode & 0o777) == 0o700
    assert providers["sandbox"]["mode"] == "bwrap"
    assert "sandbox.mode = bwrap" in providers["sandbox"]["reason"]
    assert ready["checks"]["sandbox:claude_code"].startswith("bwrap")


@pytest.mark.parametrize(("prompt", "exit_code"), [("segv", -11), ("exit:3", 3)])
def test_a_sandboxed_crash_is_reported_with_the_cli_own_status(
    make_fake_gateway: FakeGatewayFactory, prompt: str, exit_code: int
) -> None:
    gateway = start(make_fake_gateway)
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        failed = terminal(run_turn(client, sid, prompt, retry=NO_RETRY))
        after = terminal(run_turn(client, sid, "hi"))
    error = failed["data"]["error"]
    assert (error["kind"], error["exit_code"]) == ("cli_crashed", exit_code)
    assert after["type"] == "turn.completed", after["data"]


def test_a_sandboxed_cli_and_its_children_die_with_a_sigkilled_gateway(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = start(make_fake_gateway)
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        # fork:2 leaves two sleeping children in the sandbox and prints nothing more.
        client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "fork:2"})
        wait_until(gateway.spawns, what="the fake started")
    tag = gateway.spawns()[0]["env"]["AGENT_GATEWAY_PROCESS"]
    # bwrap, its init, the fake and its two children.
    wait_until(lambda: len(tagged(tag)) >= 5, what="the sandboxed tree is up")
    os.kill(gateway_pid(gateway), signal.SIGKILL)
    wait_until(lambda: not tagged(tag), timeout=10, what="the sandbox died with the gateway")


def test_an_unexecutable_sandboxed_cli_is_permission_denied_before_bwrap_starts(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    gateway = make_fake_gateway(sandbox=SANDBOXED)
    executable = Path(gateway.config["providers"]["claude_code"]["executable"])
    gateway.start()
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        executable.chmod(0o644)
        failed = terminal(run_turn(client, sid, "hi", retry=NO_RETRY))
    assert (failed["data"]["error"]["kind"], failed["data"]["error"]["reason"]) == (
        "cli_missing",
        "permission_denied",
    )
    assert gateway.spawns() == []


def test_an_explicit_bwrap_that_cannot_start_makes_the_provider_unavailable(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-bwrap")
    gateway = start(make_fake_gateway, bwrap=missing)
    with gateway.client() as client:
        provider = client.get("/v1/providers/claude_code").json()
        created = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
    assert provider["health"]["available"] is False
    assert "bubblewrap" in provider["health"]["reason"]
    assert (
        'sandbox.mode (or providers.claude_code.sandbox) = "none"' in (provider["health"]["reason"])
    )
    assert created.status_code == 503, created.text
    assert gateway.spawns() == []


def test_auto_without_bubblewrap_runs_unconfined_and_says_why(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-bwrap")
    gateway = start(make_fake_gateway, bwrap=missing, mode="auto")
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        assert terminal(run_turn(client, sid, "hi"))["type"] == "turn.completed"
        sandbox = client.get("/v1/providers/claude_code").json()["sandbox"]
        ready = client.get("/readyz").json()["checks"]["sandbox:claude_code"]
    assert sandbox["mode"] == "none"
    assert "is not installed" in sandbox["reason"]
    assert ready.startswith("none (no sandbox:")
    assert gateway.spawns()[0]["env"]["HOME"] != str(gateway.data_dir / "homes" / sid)
