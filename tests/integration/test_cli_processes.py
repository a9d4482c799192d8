"""The CLI processes' lives, with the real gateway and the fake ``claude``
(tests/fakes/fake_claude.py, whose fault modes are chosen by the prompt text): their
environment (T9), process trees and orphans (T11, R10, R3), crashes and hangs (R4, R5), spawn
failures (R14) and a spawn storm (R16).

Most tests share the module's ``cli_gateway`` (tests/integration/conftest.py), each in sessions
of its own; a test gets a gateway of its own (``make_cli_gateway``) only when it kills or
restarts the gateway, or needs settings that would change what the others see.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory, fake_server_in
from tests.gateway import SseReader, follow, is_turn_end
from tests.integration.callers import new_session
from tests.integration.cliprocs import (
    NO_RETRY,
    alive,
    close_sessions,
    descendants,
    gateway_pid,
    gateway_secrets,
    grandchildren,
    group_members,
    prompts,
    run_turn,
    sleeping_children,
    terminal,
    wait_until,
)

# --- T9 ---------------------------------------------------------------------------------------


def test_t9_the_cli_environment_holds_none_of_the_gateways_secrets(
    cli_gateway: FakeGateway,
) -> None:
    gateway = cli_gateway
    secrets = gateway_secrets(gateway)
    assert all(gateway.extra_env[name] == value for name, value in secrets.items())
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        events = run_turn(client, sid, "dump-env")
    assert terminal(events)["type"] == "turn.completed"
    [dumped] = [e["data"]["text"] for e in events if e["type"] == "message.completed"]
    env = json.loads(dumped)
    for name, value in secrets.items():
        assert name not in env
        assert value not in dumped
    assert "db-password" not in dumped
    assert env["CONFIGURED_FOR_CLI"] == "configured-value"
    # The CLI's own credential reaches it, and is masked in what it prints (T19).
    assert env["ANTHROPIC_API_KEY"] == "[redacted]"
    assert gateway.spawns()[-1]["env"]["ANTHROPIC_API_KEY"] == "sk-ant-passthrough"
    assert env["AGENT_GATEWAY_PROCESS"]  # the tag descendants inherit


# --- T11 / R10 / R3: process trees ------------------------------------------------------------


def test_t11_r10_a_setsid_escapee_dies_with_its_session(cli_gateway: FakeGateway) -> None:
    gateway = cli_gateway
    pid = gateway_pid(gateway)
    escaped_before = len(grandchildren(gateway))
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        assert terminal(run_turn(client, sid, "setsid-grandchild"))["type"] == "turn.completed"
        [escapee] = grandchildren(gateway)[escaped_before:]
        cli = client.get(f"/v1/sessions/{sid}").json()["process"]["pid"]
        assert alive(escapee)
        assert escapee not in group_members(cli)  # it left the CLI's process group
        # Its parent exited at once; as a child subreaper the gateway adopted it.
        assert escapee in descendants(pid)
        own = {cli, escapee, *descendants(cli)}
        assert client.delete(f"/v1/sessions/{sid}").status_code == 200
        wait_until(lambda: not alive(escapee) and not alive(cli))
        # Reaped too: none of them is left below the gateway, not even as a zombie.
        wait_until(lambda: not own & descendants(pid).keys(), timeout=10)


def test_r3_t11_after_a_sigkilled_gateway_the_restart_sweeps_its_orphans(
    make_cli_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_cli_gateway().start()
    with gateway.client() as client:
        escaping, forking = (
            new_session(client, gateway.workspace),
            new_session(client, gateway.workspace),
        )
        assert terminal(run_turn(client, escaping, "setsid-grandchild"))["type"] == (
            "turn.completed"
        )
        assert client.post(f"/v1/sessions/{forking}/turns", json={"prompt": "fork:3"}).is_success
        cli = wait_until(lambda: client.get(f"/v1/sessions/{forking}").json()["process"])["pid"]
        sleepers = wait_until(lambda: s if len(s := sleeping_children(cli)) == 3 else None)
    [escapee] = grandchildren(gateway)
    assert gateway.process is not None
    gateway.process.send_signal(signal.SIGKILL)
    gateway.process.wait(timeout=10)
    gateway.stop()
    # What a SIGKILLed gateway leaves behind (the CLI itself may exit at its stdin's EOF).
    assert all(alive(p) for p in (escapee, *sleepers))
    gateway.start()
    wait_until(lambda: not any(alive(p) for p in (escapee, cli, *sleepers)), timeout=10)


def server_pids(gateway: FakeGateway) -> dict[str, int]:
    """The gateway's shared fake servers (``codex app-server``, ``opencode serve``) by name."""
    found = {}
    for pid in descendants(gateway_pid(gateway)):
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            for name in ("codex", "opencode"):
                if f"fake_{name}_".encode() in cmdline:
                    found[name] = pid
    return found


def test_t30_a_sigkilled_gateway_takes_its_clis_and_shared_servers_along(
    make_cli_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    servers = tmp_path / "servers"
    gateway = make_cli_gateway(
        # Shared servers run only with the sandbox off (sandboxed, each session has its own).
        sandbox={"mode": "none"},
        codex={"enabled": True, "executable": str(fake_server_in(servers, "codex"))},
        opencode={"enabled": True, "executable": str(fake_server_in(servers, "opencode"))},
    ).start()
    with gateway.client() as client:
        client.get("/readyz")  # probes every provider: both shared servers start
        sid = new_session(client, gateway.workspace)
        # "hang" holds the turn open with the CLI running, its stdin still open.
        assert client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hang"}).is_success
        cli = wait_until(lambda: client.get(f"/v1/sessions/{sid}").json()["process"])["pid"]
        started = wait_until(lambda: s if len(s := server_pids(gateway)) == 2 else None)
    assert gateway.process is not None
    gateway.process.send_signal(signal.SIGKILL)
    gateway.process.wait(timeout=10)
    # No restart, no sweep: each child got its parent-death signal when the gateway died.
    wait_until(lambda: not any(alive(p) for p in (cli, *started.values())), timeout=10)
    gateway.stop()


# --- R4 / R5: crashes and hangs -------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "exit_code", "words"),
    [("exit:3", 3, "exited with code 3"), ("segv", -11, "SIGSEGV"), ("sigkill", -9, "SIGKILL")],
)
def test_r4_a_crashed_cli_fails_the_turn_once_and_the_session_stays_usable(
    cli_gateway: FakeGateway, prompt: str, exit_code: int, words: str
) -> None:
    gateway = cli_gateway
    logged = len(gateway.log())
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        headers = {"Accept": "text/event-stream", "Last-Event-ID": "2"}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            sent = "slow" if prompt == "sigkill" else prompt
            turn = client.post(
                f"/v1/sessions/{sid}/turns", json={"prompt": sent, "retry": NO_RETRY}
            )
            assert turn.status_code == 202
            if prompt == "sigkill":
                reader.until(lambda e: e["type"] == "message.delta")
                os.kill(client.get(f"/v1/sessions/{sid}").json()["process"]["pid"], signal.SIGKILL)
            first = reader.until(is_turn_end)
            failed = first[-1]
            assert [e["type"] for e in first].count("turn.failed") == 1
            error = failed["data"]["error"]
            assert failed["type"] == "turn.failed"
            assert (error["kind"], error["exit_code"]) == ("cli_crashed", exit_code)
            assert words in error["message"]
            if prompt == "exit:3":
                assert error["stderr_tail"].endswith("exiting with 3")
                assert len(error["stderr_tail"].encode()) <= 16 * 1024
            assert client.get(f"/v1/sessions/{sid}").json()["status"] == "idle"
            # The same subscriber sees the next turn: the stream was not broken.
            assert client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"}).is_success
            assert reader.until(is_turn_end)[-1]["type"] == "turn.completed"
    assert "Traceback" not in gateway.log()[logged:]


def test_r5_a_hung_cli_hits_the_idle_timeout_and_its_group_is_killed(
    make_cli_gateway: FakeGatewayFactory,
) -> None:
    # Its own gateway: a one-second idle timeout would fail the others' slow turns.
    gateway = make_cli_gateway(claude_code={"turn_idle_timeout_s": 1.0, "stop_grace_s": 0.5})
    gateway.start()
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        # fork:2 prints nothing after starting two sleeping children in its group.
        failed = terminal(run_turn(client, sid, "fork:2", retry=NO_RETRY))
        assert failed["type"] == "turn.failed"
        assert failed["data"]["error"]["kind"] == "idle_timeout"
        assert "turn_idle_timeout_s" in failed["data"]["error"]["message"]
        cli = gateway.spawns()[0]["pid"]
        wait_until(lambda: not group_members(cli), timeout=10)
        assert client.get(f"/v1/sessions/{sid}").json()["process"] is None


# --- R14: spawn failures ----------------------------------------------------------------------


def zombies_of(pid: int) -> list[int]:
    return [child for child, state in descendants(pid).items() if state == "Z"]


def test_r14_a_missing_cli_is_a_clear_503_with_no_session_row(
    make_cli_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_cli_gateway(claude_code={"executable": "claude-not-installed-here"}).start()
    with gateway.client() as client:
        refused = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
        assert refused.status_code == 503
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert "claude-not-installed-here" in refused.text
        assert client.get("/v1/sessions").json()["sessions"] == []
    wait_until(lambda: not zombies_of(gateway_pid(gateway)))


def test_r14_a_cli_that_turned_unexecutable_or_a_removed_workspace_fail_clearly(
    cli_gateway: FakeGateway, tmp_path: Path
) -> None:
    gateway = cli_gateway
    executable = Path(gateway.config["providers"]["claude_code"]["executable"])
    pid = gateway_pid(gateway)
    logged = len(gateway.log())
    doomed = gateway.workspace.parent / f"doomed-{tmp_path.name}"
    doomed.mkdir()
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        try:  # the cli_gateway gateway's CLI: executable again whatever happens here
            executable.chmod(0o644)
            failed = terminal(run_turn(client, sid, "hi"))["data"]["error"]
        finally:
            executable.chmod(0o755)
        assert (failed["kind"], failed["reason"]) == ("cli_missing", "permission_denied")
        assert "not executable" in failed["message"]
        assert client.get(f"/v1/sessions/{sid}").json()["status"] == "idle"
        assert terminal(run_turn(client, sid, "hi"))["type"] == "turn.completed"

        gone = new_session(client, doomed)
        doomed.rmdir()
        answer = client.post(f"/v1/sessions/{gone}/turns", json={"prompt": "hi"})
        if answer.status_code == 202:  # refused at spawn time
            error = follow(client, gone)[-1]["data"]["error"]
            assert (error["kind"], error["reason"]) == ("invalid_request", "bad_cwd")
        else:  # refused before the turn was created
            assert answer.status_code == 422, answer.text
            assert answer.headers["content-type"].startswith("application/problem+json")
        assert client.get(f"/v1/sessions/{gone}").json()["process"] is None
    wait_until(lambda: not zombies_of(pid))
    assert "Traceback" not in gateway.log()[logged:]


# --- R16: a spawn storm -----------------------------------------------------------------------


def test_r16_fifty_sessions_start_their_first_turn_at_once(cli_gateway: FakeGateway) -> None:
    gateway = cli_gateway
    spawned_before = len(gateway.spawns())

    def create(_: int) -> str:
        with gateway.client() as own:
            return new_session(own, gateway.workspace)

    with ThreadPoolExecutor(10) as pool:
        sessions = list(pool.map(create, range(50)))
    try:
        storm(gateway, sessions, spawned_before)
    finally:
        close_sessions(gateway, sessions)


def storm(gateway: FakeGateway, sessions: list[str], spawned_before: int) -> None:
    """Start the first turn of every session at once, probing /healthz meanwhile."""
    lags: list[float] = []
    storm_over = threading.Event()

    def ping() -> None:
        with httpx.Client(base_url=gateway.base_url, timeout=30) as pinger:
            while not storm_over.is_set():
                started = time.monotonic()
                assert pinger.get("/healthz").status_code == 200
                lags.append(time.monotonic() - started)
                time.sleep(0.01)

    def first_turn(sid: str) -> str:
        with gateway.client() as own:
            return str(terminal(run_turn(own, sid, "hi"))["type"])

    with ThreadPoolExecutor(51) as pool:
        pinging = pool.submit(ping)
        started = time.monotonic()
        try:
            ends = list(pool.map(first_turn, sessions))
        finally:
            storm_over.set()
        storm_s = time.monotonic() - started
        pinging.result(timeout=30)
    assert ends == ["turn.completed"] * 50
    assert len({s["pid"] for s in gateway.spawns()[spawned_before:]}) == 50
    with gateway.client() as client:
        threads = {client.get(f"/v1/sessions/{sid}").json()["thread_id"] for sid in sessions}
    assert len(threads) == 50
    assert len({e["pid"] for e in prompts(gateway) if e["thread"] in threads}) == 50
    quantiles = statistics.quantiles(lags, n=100)
    p50, p99 = statistics.median(lags), quantiles[98]
    print(
        f"\nR16: 50 first turns in {storm_s:.2f} s; /healthz during the storm "
        f"({len(lags)} probes): p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
        f"max {max(lags) * 1000:.1f} ms"
    )
    assert p99 < 0.5  # a generous liveness bound; measured values are in the notes
