"""Limits on the CLI processes, with the real gateway and the fake ``claude``
(tests/fakes/fake_claude.py, whose fault modes are chosen by the prompt text): an oversize
line, malformed lines and an output flood (T10, R6, R7), the events budget of a turn, memory,
process count and the number of live processes (T10). Limits are set small so that each fault
is caught quickly and nothing can take the machine down.

Most tests share the module's ``cli_gateway`` (tests/integration/conftest.py), each in sessions
of its own; a test gets a gateway of its own (``make_cli_gateway``) only when it needs settings
that would change what the others see.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import follow
from tests.integration.callers import new_session
from tests.integration.cliprocs import (
    MIB,
    NO_RETRY,
    alive,
    cli_pids,
    gateway_pid,
    group_members,
    rss_bytes,
    run_turn,
    terminal,
    wait_until,
)

# --- T10 / R6: lines and output ---------------------------------------------------------------


def test_t10_r6_an_oversize_line_fails_the_turn_as_line_too_long(cli_gateway: FakeGateway) -> None:
    gateway = cli_gateway
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
    cli_gateway: FakeGateway,
) -> None:
    with cli_gateway.client() as client:
        sid = new_session(client, cli_gateway.workspace)
        events = run_turn(client, sid, "malformed")
    assert terminal(events)["type"] == "turn.completed"
    warnings = [e["data"] for e in events if e["type"] == "warning"]
    assert all(w["code"] == "parse_error" for w in warnings)
    # 24 bad lines: five reported one by one, the other nineteen counted once.
    assert len(warnings) == 6
    assert "19 more" in warnings[-1]["message"]
    assert all(len(w["message"]) < 400 for w in warnings)


def test_r7_t10_an_output_flood_is_stopped_while_another_session_keeps_answering(
    cli_gateway: FakeGateway,
) -> None:
    gateway = cli_gateway
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
    make_cli_gateway: FakeGatewayFactory,
) -> None:
    # Each attempt prints ~410 KB (under the 1 MiB raw budget of an attempt) and fails with a
    # retryable 529; the events of the whole turn cross 1 MiB on the third attempt.
    gateway = make_cli_gateway(
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


def test_t10_a_cli_over_the_memory_limit_is_killed_with_its_tree(cli_gateway: FakeGateway) -> None:
    gateway = cli_gateway
    assert gateway.config["limits"]["max_process_rss_bytes"] == 256 * MIB
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        failed = terminal(run_turn(client, sid, "allocate:1024", retry=NO_RETRY))
        error = failed["data"]["error"]
        assert (error["kind"], error["reason"]) == ("resource_limit", "memory_limit")
        assert "limits.max_process_rss_bytes" in error["message"]
        assert not alive(cli_pids(gateway, client, sid)[0])
        assert terminal(run_turn(client, sid, "hi"))["type"] == "turn.completed"


def test_t10_a_cli_over_the_process_limit_is_killed_with_its_tree(cli_gateway: FakeGateway) -> None:
    gateway = cli_gateway
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


def test_the_kernel_stops_a_cli_over_the_memory_limit_before_any_watchdog_looks(
    make_cli_gateway: FakeGatewayFactory,
) -> None:
    # Its own gateway: a watchdog that never looks, so only the cgroup or the rlimit can stop
    # the allocation (limits.enforcement auto: whichever this machine offers).
    limits = {"max_process_rss_bytes": 256 * MIB, "watch_interval_s": 3600}
    gateway = make_cli_gateway(limits=limits, sandbox={"mode": "none"}).start()
    with gateway.client() as client:
        ready = client.get("/readyz").json()
        assert ready["limits"]["memory"] in ("cgroup", "rlimit"), ready["limits"]
        assert ready["limits"]["processes"] in ("cgroup", "watchdog")
        sid = new_session(client, gateway.workspace)
        started = time.monotonic()
        failed = terminal(run_turn(client, sid, "allocate:1024", retry=NO_RETRY))
        assert time.monotonic() - started < 20
        error = failed["data"]["error"]
        assert (error["kind"], error["reason"]) == ("resource_limit", "memory_limit")
        assert "limits.max_process_rss_bytes" in error["message"]
        assert not alive(cli_pids(gateway, client, sid)[0])


def test_t10_max_live_processes_closes_the_longest_idle_first_then_answers_503(
    make_cli_gateway: FakeGatewayFactory,
) -> None:
    # Its own gateway: every live CLI process of the gateway counts against the cap.
    gateway = make_cli_gateway(limits={"max_live_processes": 2}).start()
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
