"""The CLI processes under hostile conditions: environment, limits, process trees, faults.

Every test runs the real gateway with the fake ``claude`` (tests/fakes/fake_claude.py), whose
fault modes are chosen by the prompt text; limits are set small so that each fault is caught
quickly and nothing can take the machine down.

Most tests share one gateway (``shared``, started once for the module) whose limits are the
small ones every limit test needs, each in sessions of its own; they find their own CLI
processes by their session's thread. A test gets a gateway of its own (``make_gateway``) only
when it kills or restarts the gateway, or needs settings that would change what the others see.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway import TOKEN, GatewayProcess, SseReader, follow, is_turn_end
from tests.gateway import wait_until as poll_until
from tests.integration.conftest import FakeGateway, FakeGatewayFactory, fake_gateway_at

MIB = 1024 * 1024
NO_RETRY = {"enabled": False}
WATCH = {"watch_interval_s": 0.2}
SHARED_LIMITS = {
    **WATCH,
    "max_line_bytes": MIB,
    "max_turn_output_bytes": 32 * MIB,
    "max_process_rss_bytes": 256 * MIB,
    "max_process_count": 20,
    # Every test of the module creates its sessions on the shared gateway within a minute.
    "session_creates_per_minute": 10_000,
}


class PremigratedGateway(FakeGateway):
    """Starts on a copy of a database the real ``migrate`` command made once for the module,
    instead of running that command again (about a second a start); a database already in
    its data directory (a restart) is at the head revision and is left as it is."""

    template: Path

    def migrate(self) -> None:
        database = self.data_dir / "gateway.db"
        if not database.exists():
            shutil.copyfile(self.template, database)


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database at the head revision, made by ``agent-gateway migrate``."""
    directory = tmp_path_factory.mktemp("migrated")
    GatewayProcess(data_dir=directory, config={}).migrate()
    return directory / "gateway.db"


def fake_gateway_in(directory: Path, template: Path, **overrides: Any) -> FakeGateway:
    """A gateway in ``directory`` whose ``claude`` is the fake, on a pre-migrated database."""
    gateway = fake_gateway_at(directory, PremigratedGateway, **overrides)
    assert isinstance(gateway, PremigratedGateway)
    gateway.template = template
    return gateway


def gateway_secrets(gateway: FakeGateway) -> dict[str, str]:
    """Secrets of the gateway's own that its environment holds (none may reach a CLI)."""
    return {
        "GATEWAY_SERVER__TOKEN": TOKEN,
        "GATEWAY_STORAGE__URL": f"sqlite+aiosqlite:///{gateway.data_dir / 'gateway.db'}",
        "DATABASE_URL": "postgresql://user:db-password@db/gateway",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
        "AWS_SESSION_TOKEN": "aws-session-value",
        "GITHUB_TOKEN": "ghp_githubtokenvalue",
        "OPENAI_API_KEY": "sk-openai-value",
        "PGPASSWORD": "pg-password-value",
    }


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, migrated: Path) -> Iterator[FakeGateway]:
    """One gateway for the tests that need none of their own: small limits, secrets in its
    environment, a configured CLI variable and the CLI's own credential to pass through."""
    gateway = fake_gateway_in(
        tmp_path_factory.mktemp("shared"),
        migrated,
        limits=SHARED_LIMITS,
        sessions={"turn_timeout_s": 120},
    )
    gateway.config["providers"]["claude_code"]["env"]["CONFIGURED_FOR_CLI"] = "configured-value"
    gateway.extra_env = {**gateway_secrets(gateway), "ANTHROPIC_API_KEY": "sk-ant-passthrough"}
    try:
        yield gateway.start()
    finally:
        gateway.stop()


@pytest.fixture
def make_gateway(tmp_path: Path, migrated: Path) -> Iterator[FakeGatewayFactory]:
    """Gateways of the test's own, with its settings; stopped at the end of the test."""
    made: list[FakeGateway] = []

    def make(**overrides: Any) -> FakeGateway:
        made.append(fake_gateway_in(tmp_path / f"gateway-{len(made)}", migrated, **overrides))
        return made[-1]

    yield make
    for gateway in made:
        gateway.stop()


wait_until = partial(poll_until, timeout=15.0)


def stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw.rsplit(")", 1)[1].split()


def alive(pid: int) -> bool:
    """Running (a zombie counts as gone)."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def descendants(root: int) -> dict[int, str]:
    """Every process below ``root`` by parent pid, with its state (``Z`` for zombies)."""
    table: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := stat_fields(int(entry.name))) is not None:
            table[int(entry.name)] = (int(fields[1]), fields[0])
    found: dict[int, str] = {}
    stack = [root]
    while stack:
        parent = stack.pop()
        for pid, (ppid, state) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = state
                stack.append(pid)
    return found


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        fields = stat_fields(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def sleeping_children(cli: int) -> list[int]:
    """The members of the CLI's process group that run ``sleep 1000`` (its ``fork:N``)."""
    found = []
    for pid in group_members(cli):
        try:
            if pid != cli and Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x001000\x00":
                found.append(pid)
        except OSError:
            continue
    return found


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def new_session(client: httpx.Client, workspace: Path) -> str:
    response = client.post("/v1/sessions", json={"workspace": str(workspace)})
    assert response.status_code == 201, response.text
    session_id: str = response.json()["id"]
    return session_id


def run_turn(
    client: httpx.Client, session_id: str, prompt: str, **body: Any
) -> list[dict[str, Any]]:
    """Start a turn and return its events up to and including the terminal one."""
    after = client.get(f"/v1/sessions/{session_id}").json()["last_seq"]
    response = client.post(f"/v1/sessions/{session_id}/turns", json={"prompt": prompt, **body})
    assert response.status_code == 202, response.text
    return follow(client, session_id, after=after)


def terminal(events: list[dict[str, Any]]) -> dict[str, Any]:
    ends = [e for e in events if is_turn_end(e)]
    assert len(ends) == 1, [e["type"] for e in events]
    assert ends[0] is events[-1]
    return ends[0]


def gateway_pid(gateway: FakeGateway) -> int:
    assert gateway.process is not None
    return gateway.process.pid


def prompts(gateway: FakeGateway) -> list[dict[str, Any]]:
    path = Path(f"{gateway.spawn_log}.prompts")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def cli_pids(gateway: FakeGateway, client: httpx.Client, session_id: str) -> list[int]:
    """The CLI processes that took the session's prompts (by its thread), oldest first."""
    thread = client.get(f"/v1/sessions/{session_id}").json()["thread_id"]
    assert thread, "the session has no thread yet"
    return list(dict.fromkeys(e["pid"] for e in prompts(gateway) if e["thread"] == thread))


def grandchildren(gateway: FakeGateway) -> list[int]:
    path = Path(f"{gateway.spawn_log}.grandchildren")
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def close_sessions(gateway: FakeGateway, session_ids: list[str]) -> None:
    """Delete sessions (stopping their CLIs) so that they take nothing from later tests."""

    def close(session_id: str) -> None:
        with gateway.client() as own:
            assert own.delete(f"/v1/sessions/{session_id}").status_code == 200

    with ThreadPoolExecutor(10) as pool:
        list(pool.map(close, session_ids))


# --- T9 ---------------------------------------------------------------------------------------


def test_t9_the_cli_environment_holds_none_of_the_gateways_secrets(shared: FakeGateway) -> None:
    gateway = shared
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


# --- T10 / R6: lines and output ---------------------------------------------------------------


def test_t10_r6_an_oversize_line_fails_the_turn_as_line_too_long(shared: FakeGateway) -> None:
    gateway = shared
    assert gateway.config["limits"]["max_line_bytes"] == MIB
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        started = time.monotonic()
        failed = terminal(run_turn(client, sid, f"oversize:{20 * MIB}"))
        elapsed = time.monotonic() - started
        error = failed["data"]["error"]
        assert failed["type"] == "turn.failed"
        assert (error["kind"], error["reason"], error["retryable"]) == (
            "resource_limit",
            "line_too_long",
            False,
        )
        assert "limits.max_line_bytes" in error["message"]
        assert not alive(cli_pids(gateway, client, sid)[0])
        assert client.get(f"/v1/sessions/{sid}").json()["status"] == "idle"
        # The stream goes on: the next turn resumes the thread on a new process.
        assert terminal(run_turn(client, sid, "hi"))["type"] == "turn.completed"
    assert elapsed < 30  # killed at the limit, not after the whole line or a grace period


def test_r6_malformed_lines_become_bounded_warnings_and_the_turn_goes_on(
    shared: FakeGateway,
) -> None:
    with shared.client() as client:
        sid = new_session(client, shared.workspace)
        events = run_turn(client, sid, "malformed")
    assert terminal(events)["type"] == "turn.completed"
    warnings = [e["data"] for e in events if e["type"] == "warning"]
    assert all(w["code"] == "parse_error" for w in warnings)
    # 24 bad lines: five reported one by one, the other nineteen counted once.
    assert len(warnings) == 6
    assert "19 more" in warnings[-1]["message"]
    assert all(len(w["message"]) < 400 for w in warnings)


def test_r7_t10_an_output_flood_is_stopped_while_another_session_keeps_answering(
    shared: FakeGateway,
) -> None:
    gateway = shared
    limit = gateway.config["limits"]["max_turn_output_bytes"]
    assert limit == 32 * MIB
    pid = gateway_pid(gateway)
    with gateway.client() as client:
        flooding, other = (
            new_session(client, gateway.workspace),
            new_session(client, gateway.workspace),
        )
        assert terminal(run_turn(client, other, "warm up"))["type"] == "turn.completed"
        rss_before = rss_bytes(pid)
        peak = [rss_before]
        round_trips: list[float] = []
        done = threading.Event()

        def converse() -> None:
            with gateway.client() as second:
                while not done.is_set():
                    started = time.monotonic()
                    end = terminal(run_turn(second, other, "hi"))
                    round_trips.append(time.monotonic() - started)
                    assert end["type"] == "turn.completed"
                    peak.append(rss_bytes(pid))

        with ThreadPoolExecutor(1) as pool:
            conversation = pool.submit(converse)
            try:
                started = time.monotonic()
                failed = terminal(run_turn(client, flooding, "flood"))
                flood_s = time.monotonic() - started
            finally:
                done.set()
            conversation.result(timeout=60)
    error = failed["data"]["error"]
    assert (error["kind"], error["reason"]) == ("resource_limit", "output_limit")
    assert "limits.max_turn_output_bytes" in error["message"]
    assert round_trips, "the other session never completed a turn"
    assert max(round_trips) < 10.0  # a generous liveness bound; measured values in the notes
    assert max(peak) - rss_before < 256 * MIB
    median_ms = statistics.median(round_trips) * 1000
    grown = (max(peak) - rss_before) / MIB
    print(
        f"\nR7: flood of {limit} bytes stopped after {flood_s:.2f} s; other session "
        f"{len(round_trips)} turns, round trip median {median_ms:.0f} ms, "
        f"max {max(round_trips) * 1000:.0f} ms; gateway RSS +{grown:.0f} MiB"
    )


def test_t10_events_over_the_turn_budget_fail_the_turn_across_attempts(
    make_gateway: FakeGatewayFactory,
) -> None:
    # Each attempt prints ~410 KB (under the 1 MiB raw budget of an attempt) and fails with a
    # retryable 529; the events of the whole turn cross 1 MiB on the third attempt.
    gateway = make_gateway(
        limits={"max_turn_output_bytes": MIB},
        retry={"strategies": {"default": {"delays_s": [0.05] * 6}}},
    ).start()
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        events = run_turn(client, sid, "spew-retry:400000")
        failed = terminal(events)
        turn = client.get(f"/v1/sessions/{sid}/turns").json()["turns"][0]
    error = failed["data"]["error"]
    assert (error["kind"], error["reason"], error["retryable"]) == (
        "resource_limit",
        "output_limit",
        False,
    )
    assert "bytes of events" in error["message"]
    assert "limits.max_turn_output_bytes" in error["message"]
    assert 2 <= turn["attempts"] < 6
    recorded = sum(len(json.dumps(e["data"])) for e in events if e["type"] == "message.delta")
    assert recorded <= MIB


# --- T10: memory and process count ------------------------------------------------------------


def test_t10_a_cli_over_the_memory_limit_is_killed_with_its_tree(shared: FakeGateway) -> None:
    gateway = shared
    assert gateway.config["limits"]["max_process_rss_bytes"] == 256 * MIB
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        failed = terminal(run_turn(client, sid, "allocate:1024", retry=NO_RETRY))
        error = failed["data"]["error"]
        assert (error["kind"], error["reason"]) == ("resource_limit", "memory_limit")
        assert "limits.max_process_rss_bytes" in error["message"]
        assert not alive(cli_pids(gateway, client, sid)[0])
        assert terminal(run_turn(client, sid, "hi"))["type"] == "turn.completed"


def test_t10_a_cli_over_the_process_limit_is_killed_with_its_tree(shared: FakeGateway) -> None:
    gateway = shared
    assert gateway.config["limits"]["max_process_count"] == 20
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        failed = terminal(run_turn(client, sid, "fork:100", retry=NO_RETRY))
        error = failed["data"]["error"]
        assert (error["kind"], error["reason"]) == ("resource_limit", "process_limit")
        assert "limits.max_process_count" in error["message"]
        cli = cli_pids(gateway, client, sid)[0]
        wait_until(lambda: not group_members(cli), timeout=10)
        assert client.get(f"/v1/sessions/{sid}").json()["status"] == "idle"


def test_t10_max_live_processes_closes_the_longest_idle_first_then_answers_503(
    make_gateway: FakeGatewayFactory,
) -> None:
    # Its own gateway: every live CLI process of the gateway counts against the cap.
    gateway = make_gateway(limits={"max_live_processes": 2}).start()
    with gateway.client() as client:
        first, second, third = (new_session(client, gateway.workspace) for _ in range(3))
        for sid in (first, second):
            assert terminal(run_turn(client, sid, "hi"))["type"] == "turn.completed"
        first_pid = client.get(f"/v1/sessions/{first}").json()["process"]["pid"]
        # A third process: the longest-idle one (the first session's) is closed for it.
        assert terminal(run_turn(client, third, "hi"))["type"] == "turn.completed"
        wait_until(lambda: not alive(first_pid))
        assert client.get(f"/v1/sessions/{first}").json()["process"] is None
        assert client.get(f"/v1/sessions/{second}").json()["process"] is not None
        # Both live processes busy: no room, and nothing is spawned for the refused turn.
        for sid in (second, third):
            after = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
            assert client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "slow"}).is_success
            follow(client, sid, lambda e: e["type"] == "message.delta", after=after)
        spawned = len(gateway.spawns())
        refused = client.post(f"/v1/sessions/{first}/turns", json={"prompt": "hi"})
        assert refused.status_code == 503, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert refused.json()["type"].endswith(":at_capacity")
        assert int(refused.headers["retry-after"]) >= 1
        assert "limits.max_live_processes" in refused.json()["detail"]
        assert len(gateway.spawns()) == spawned
        assert client.get(f"/v1/sessions/{first}/turns").json()["turns"][0]["prompt"] == "hi"
        assert len(client.get(f"/v1/sessions/{first}/turns").json()["turns"]) == 1
        # The first session resumes its thread once a process is free.
        assert client.post(f"/v1/sessions/{second}/interrupt").status_code == 202
        wait_until(lambda: client.get(f"/v1/sessions/{second}").json()["status"] == "idle")
        events = run_turn(client, first, "hi again")
        assert terminal(events)["type"] == "turn.completed"
    assert any(a.startswith("--resume=") for a in gateway.spawns()[-1]["argv"])


# --- T11 / R10 / R3: process trees ------------------------------------------------------------


def test_t11_r10_a_setsid_escapee_dies_with_its_session(shared: FakeGateway) -> None:
    gateway = shared
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
    make_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_gateway().start()
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


# --- R4 / R5: crashes and hangs -------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "exit_code", "words"),
    [("exit:3", 3, "exited with code 3"), ("segv", -11, "SIGSEGV"), ("sigkill", -9, "SIGKILL")],
)
def test_r4_a_crashed_cli_fails_the_turn_once_and_the_session_stays_usable(
    shared: FakeGateway, prompt: str, exit_code: int, words: str
) -> None:
    gateway = shared
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
    make_gateway: FakeGatewayFactory,
) -> None:
    # Its own gateway: a one-second idle timeout would fail the others' slow turns.
    gateway = make_gateway(claude_code={"turn_idle_timeout_s": 1.0, "stop_grace_s": 0.5})
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
    make_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_gateway(claude_code={"executable": "claude-not-installed-here"}).start()
    with gateway.client() as client:
        refused = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
        assert refused.status_code == 503
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert "claude-not-installed-here" in refused.text
        assert client.get("/v1/sessions").json()["sessions"] == []
    wait_until(lambda: not zombies_of(gateway_pid(gateway)))


def test_r14_a_cli_that_turned_unexecutable_or_a_removed_workspace_fail_clearly(
    shared: FakeGateway, tmp_path: Path
) -> None:
    gateway = shared
    executable = Path(gateway.config["providers"]["claude_code"]["executable"])
    pid = gateway_pid(gateway)
    logged = len(gateway.log())
    doomed = gateway.workspace.parent / f"doomed-{tmp_path.name}"
    doomed.mkdir()
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        try:  # the shared gateway's CLI: executable again whatever happens here
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


def test_r16_fifty_sessions_start_their_first_turn_at_once(shared: FakeGateway) -> None:
    gateway = shared
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
