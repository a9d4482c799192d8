"""Three replicas running the real Claude Code against the stub model meet what replicas meet:
the owner of a session killed or stopped mid-turn, Redis restarted empty, PostgreSQL gone for
10 s, the owner frozen past its lease and thawed, a forwarded command's answer lost.

In every scenario, read through a replica still standing once the fault has played out: the
session's seqs are 1..n, every turn ended exactly once with the same status in the log and
its row, no two CLIs ran on the session's thread at any time (a sampler watches /proc), its
next turn completes, and no CLI outlives the replicas. What each fault costs is measured and
listed at the end of the module (``chaos timing:`` lines, and chaos-timings.json in the run's
temp directory).
"""

from __future__ import annotations

import contextlib
import functools
import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dbservers import PostgresServer, RedisServer
from tests.e2e.chaos import (
    COMMAND_TIMEOUT_S,
    LEASE_TTL_S,
    REPLICAS,
    TIMINGS,
    Chaos,
    Session,
    is_end_of,
    measured,
    poll,
    read_until,
    reasons,
    three_replicas,
)
from tests.e2e.chaos_faults import AnswerThief, alive, freeze, thaw
from tests.stub_llm import StubLLM

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

POSTGRES_OUTAGE_S = 10.0


@pytest.fixture(scope="module", autouse=True)
def _report_timings(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    yield
    path = tmp_path_factory.getbasetemp() / "chaos-timings.json"
    path.write_text(json.dumps(TIMINGS, indent=2))
    reporter: Any = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("")
        for name, value in TIMINGS.items():
            reporter.write_line(f"chaos timing: {name} = {value}")
        reporter.write_line(f"chaos timings written to {path}")


@pytest.fixture
def chaos(
    tmp_path: Path, stub: StubLLM, postgres: PostgresServer, redis_server: RedisServer
) -> Iterator[Chaos]:
    with three_replicas(tmp_path, stub, postgres, redis_server) as started:
        yield started


def is_delta(event: dict[str, Any]) -> bool:
    return bool(event["type"] == "message.delta")


def streaming(
    chaos: Chaos, name: str, prompt: str, *, owner: str = "gw-a", observer: str = "gw-b"
) -> tuple[Session, str]:
    """A session created on ``owner`` whose turn ``prompt`` runs there; returns once it
    streams (seen on ``observer``)."""
    session = chaos.new_session(owner, name)
    turn = chaos.start_turn(owner, session, prompt)
    chaos.follow(observer, session, is_delta)
    holder = chaos.session(observer, session)["owner"]
    assert holder == owner, f"the turn runs on {holder}"
    return session, turn["id"]


def test_the_owner_killed_mid_turn(chaos: Chaos) -> None:
    """SIGKILL: another replica ends the turn once (replica_lost); the next turn, on
    another replica, resumes the same CLI thread."""
    session = chaos.new_session("gw-a", "sigkill")
    turn = chaos.start_turn("gw-a", session, "[[slow:30]]")
    with chaos.stream("gw-b", session) as reader:
        read_until(reader, is_delta, 60)
        thread = chaos.thread_kept("gw-b", session)
        gateway = chaos.replicas["gw-a"].process
        assert gateway is not None
        killed = time.monotonic()
        gateway.send_signal(signal.SIGKILL)
        gateway.wait(timeout=10)
        end = read_until(reader, is_end_of(turn["id"]), 30)[-1]
    measured(
        "sigkill: owner killed -> turn.failed replica_lost on another replica",
        time.monotonic() - killed,
    )
    chaos.expect(
        end["type"] == "turn.failed" and reasons([end]) == ["replica_lost"],
        f"the killed owner's turn ended {end['type']} {json.dumps(end['data'])[:300]}",
    )
    began = time.monotonic()
    chaos.next_turn_completes("gw-c", session)
    measured("sigkill: next turn (posted on gw-c) completed in", time.monotonic() - began)
    after = chaos.session("gw-c", session)["thread_id"]
    chaos.expect(after == thread, f"the thread changed from {thread} to {after}")
    chaos.invariants("gw-c", session)
    chaos.one_cli_at_a_time(session)
    chaos.verdict()


def stamp_exit(process: subprocess.Popen[bytes], exited: list[float]) -> None:
    """Append when ``process`` exits (within a minute)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=60)
        exited.append(time.monotonic())


def test_the_owner_stopped_mid_turn(chaos: Chaos) -> None:
    """SIGTERM: the owner ends its turn once (interrupted, gateway_shutdown), exits, and
    another replica runs the next turn."""
    session = chaos.new_session("gw-a", "sigterm")
    turn = chaos.start_turn("gw-a", session, "[[slow:30]]")
    gateway = chaos.replicas["gw-a"].process
    assert gateway is not None
    exited: list[float] = []
    with chaos.stream("gw-b", session) as reader:
        read_until(reader, is_delta, 60)
        assert chaos.session("gw-b", session)["owner"] == "gw-a"
        chaos.thread_kept("gw-b", session)
        stopped = time.monotonic()
        gateway.send_signal(signal.SIGTERM)
        watcher = threading.Thread(target=stamp_exit, args=(gateway, exited))
        watcher.start()
        end = read_until(reader, is_end_of(turn["id"]), 30)[-1]
    measured(
        "sigterm: SIGTERM -> the turn's end seen on another replica", time.monotonic() - stopped
    )
    chaos.expect(
        end["type"] == "turn.interrupted"
        and str(end["data"].get("reason", "")).startswith("gateway_shutdown"),
        f"the stopped owner's turn ended {end['type']} {json.dumps(end['data'])[:300]}",
    )
    row = chaos.turn_row("gw-b", session, turn["id"])
    chaos.expect(
        row["status"] == "interrupted" and (row["error"] or {}).get("reason") == "gateway_shutdown",
        f"the stopped owner's turn row: {row['status']} {json.dumps(row['error'])[:300]}",
    )
    next_turn, statuses = chaos.post_until_accepted("gw-b", session, "after the hand-back")
    measured("sigterm: SIGTERM -> next turn posted on gw-b accepted", time.monotonic() - stopped)
    measured("sigterm: answers until then", " ".join(map(str, statuses)))
    watcher.join(timeout=60)
    chaos.expect(exited, "the stopped replica did not exit within 60 s")
    if exited:
        measured("sigterm: SIGTERM -> the replica exited", exited[0] - stopped)
    chaos.completes("gw-b", session, next_turn["id"], "the turn posted after SIGTERM")
    later = [c for c in chaos.sampler.clis(session.workspace) if c.first >= stopped]
    chaos.expect(
        not [c.pid for c in later if c.ppid == gateway.pid],
        f"gw-a started a CLI after its SIGTERM (CLIs since: {later})",
    )
    others = {chaos.pid("gw-b"), chaos.pid("gw-c")}
    chaos.expect(
        any(c.ppid in others for c in later),
        f"no other replica started a CLI for the next turn (CLIs since SIGTERM: {later})",
    )
    chaos.invariants("gw-b", session)
    chaos.next_turn_completes("gw-c", session)
    chaos.invariants("gw-c", session)
    chaos.one_cli_at_a_time(session)
    chaos.verdict()


def owner_of(chaos: Chaos, session: Session) -> str | None:
    """The session's owner, as gw-c tells it."""
    owner: str | None = chaos.session("gw-c", session)["owner"]
    return owner


def test_redis_restarted_empty_mid_turn(chaos: Chaos) -> None:
    """Redis restarts empty (down for one lease TTL) while each replica runs a turn: no
    running turn ends because of it, every owner being alive; each keeps its session."""
    running = {
        owner: streaming(chaos, f"redis-{owner}", "[[slow:15]]", owner=owner, observer=other)
        for owner, other in zip(REPLICAS, (*REPLICAS[1:], REPLICAS[0]), strict=True)
    }
    began = time.monotonic()
    chaos.redis.stop()
    try:
        time.sleep(LEASE_TTL_S)  # the restart's length, not a race
    finally:
        chaos.redis.start()
    back = time.monotonic()
    measured("redis: down (stop -> accepting connections again)", back - began)
    for owner, (session, _) in running.items():
        try:
            holder = poll(functools.partial(owner_of, chaos, session), 10, "an owner")
        except AssertionError as exc:
            chaos.expect(False, f"session {session.workspace.name} after the restart: {exc}")
            continue
        measured(f"redis: back -> {owner}'s session has an owner again", time.monotonic() - back)
        chaos.expect(holder == owner, f"after the restart {owner}'s session is {holder}'s")
    for owner, (session, turn_id) in running.items():
        row = chaos.finished("gw-c", session, turn_id)
        chaos.expect(
            row["status"] == "completed",
            f"{owner}'s turn running across the restart ended {row['status']} "
            f"{json.dumps(row['error'])[:300]}",
        )
        lost = [
            e["type"]
            for e in chaos.events("gw-c", session)
            if "replica_lost" in json.dumps(e["data"])
        ]
        chaos.expect(not lost, f"{owner}'s session: replica_lost events though it lived: {lost}")
    began = time.monotonic()
    for owner, other in zip(REPLICAS, (*REPLICAS[1:], REPLICAS[0]), strict=True):
        chaos.next_turn_completes(other, running[owner][0])
    measured(
        "redis: next turn of each session (on another replica), all done in",
        time.monotonic() - began,
    )
    for session, _ in running.values():
        chaos.invariants("gw-c", session)
        chaos.one_cli_at_a_time(session)
    chaos.verdict()


def test_postgres_gone_for_ten_seconds_mid_turn(chaos: Chaos) -> None:
    """PostgreSQL stopped for 10 s while a turn runs (and ends): every turn ends once, the
    same in the log and the row, and the next turn completes once it is back."""
    session, turn_id = streaming(chaos, "postgres", "[[slow:6]]")
    probes: list[tuple[int | str, float]] = []
    began = time.monotonic()
    chaos.postgres.stop()
    try:
        # The outage lasts POSTGRES_OUTAGE_S; meanwhile a replica is asked about the session.
        while time.monotonic() - began < POSTGRES_OUTAGE_S:
            asked = time.monotonic()
            try:
                code: int | str = (
                    chaos.api("gw-c").get(f"/v1/sessions/{session.id}", timeout=5.0).status_code
                )
            except Exception as exc:  # what the probe saw is the result
                code = type(exc).__name__
            probes.append((code, time.monotonic() - asked))
            time.sleep(0.5)  # the outage's length, not a race
    finally:
        chaos.postgres.start()
    back = time.monotonic()
    measured("postgres: down for", back - began)
    measured(
        "postgres: answers during the outage (status, seconds)",
        " ".join(f"{code}/{seconds:.2f}" for code, seconds in probes),
    )
    row = chaos.finished("gw-c", session, turn_id)
    measured("postgres: back -> the running turn's row final", time.monotonic() - back)
    error = row["error"] or {}
    measured(
        "postgres: that turn ended", f"{row['status']} {error.get('kind')} {error.get('reason')}"
    )
    next_turn, statuses = chaos.post_until_accepted("gw-c", session, "after the outage")
    measured("postgres: back -> next turn accepted on gw-c", time.monotonic() - back)
    measured("postgres: answers until then", " ".join(map(str, statuses)))
    chaos.completes("gw-c", session, next_turn["id"], "the turn after the outage")
    chaos.invariants("gw-b", session)
    chaos.next_turn_completes("gw-b", session)
    chaos.invariants("gw-b", session)
    chaos.one_cli_at_a_time(session)
    chaos.verdict()


def test_the_owner_frozen_past_its_lease_then_thawed(chaos: Chaos) -> None:
    """The owner and its CLI SIGSTOPped (a frozen VM) until another replica adopts the
    session, then SIGCONTed while the next turn starts elsewhere: the old owner stops its
    CLI, writes nothing more, and the session goes on."""
    session = chaos.new_session("gw-a", "paused")
    turn = chaos.start_turn("gw-a", session, "[[slow:30]]")
    with chaos.stream("gw-b", session) as reader:
        read_until(reader, is_delta, 60)
        assert chaos.session("gw-b", session)["owner"] == "gw-a"
        thread = chaos.session("gw-b", session)["thread_id"]
        chaos.sampler.wait_sample()
        old_clis = chaos.sampler.running(session.workspace)
        assert len(old_clis) == 1, f"CLIs of the session before the freeze: {old_clis}"
        frozen = freeze(chaos.pid("gw-a"))
        paused = time.monotonic()
        try:
            end = read_until(reader, is_end_of(turn["id"]), 30)[-1]
            measured(
                "pause: owner frozen -> turn.failed replica_lost on another replica",
                time.monotonic() - paused,
            )
        finally:
            thaw(frozen)
        thawed = time.monotonic()
    chaos.expect(
        end["type"] == "turn.failed" and reasons([end]) == ["replica_lost"],
        f"the frozen owner's turn ended {end['type']} {json.dumps(end['data'])[:300]}",
    )
    next_turn = chaos.start_turn("gw-c", session, "[[slow:2]]")
    try:
        poll(lambda: not any(alive(pid) for pid in old_clis), 10, "the old owner's CLI to go")
    except AssertionError as exc:
        chaos.expect(False, f"after the thaw: {exc}")
    else:
        measured("pause: thawed -> the old owner's CLI gone", time.monotonic() - thawed)
    chaos.completes("gw-c", session, next_turn["id"], "the turn posted at the thaw")
    after = chaos.session("gw-c", session)["thread_id"]
    chaos.expect(after == thread, f"the thread changed from {thread} to {after}")
    chaos.invariants("gw-c", session)
    chaos.next_turn_completes("gw-b", session)
    chaos.invariants("gw-b", session)
    chaos.one_cli_at_a_time(session)
    chaos.verdict()


def probe_turns(chaos: Chaos, session: Session, prompt: str) -> list[dict[str, Any]]:
    return [t for t in chaos.turns("gw-c", session) if t["prompt"] == prompt]


def test_a_forwarded_turn_whose_answer_is_lost(chaos: Chaos) -> None:
    """The owner's answer to a forwarded turn never reaches the forwarder: the request says
    202 with the turn, or 503 with no turn at all; either way the turn ran at most once."""
    session = chaos.new_session("gw-a", "lost-answer")
    first = chaos.start_turn("gw-a", session, "hello")
    chaos.follow("gw-b", session, is_end_of(first["id"]))
    assert chaos.session("gw-b", session)["owner"] == "gw-a"
    probe = "a forwarded turn whose answer is lost"
    with AnswerThief(
        url=chaos.redis.operator_url,
        redis_port=chaos.redis.port,
        owner="gw-a",
        owner_pid=chaos.pid("gw-a"),
        forwarder="gw-b",
        forwarder_pid=chaos.pid("gw-b"),
    ) as thief:
        began = time.monotonic()
        answer = chaos.api("gw-b").post(
            f"/v1/sessions/{session.id}/turns",
            json={"prompt": probe},
            timeout=3 * COMMAND_TIMEOUT_S + 10,
        )
        took = time.monotonic() - began
    measured("lost answer: the forwarded POST answered", f"{answer.status_code} in {took:.2f} s")
    assert not thief.errors, thief.errors
    assert thief.pushed_at is not None, "the turn was never forwarded to gw-a"
    chaos.expect(thief.killed, "no connection of gw-b waiting for answers was killed")
    print(f"answers deleted: {thief.deleted}; connections killed: {thief.killed}")
    measured("lost answer: the owner held (SIGSTOP) until the kill", thief.owner_held_s or 0.0)
    chaos.expect(
        answer.status_code in (202, 503), f"answered {answer.status_code} {answer.text[:300]}"
    )
    if answer.status_code != 202:
        # A command the forwarder gave up on could still start on the owner until its
        # deadline (cluster.command_timeout_s after it was sent): watch that long.
        with contextlib.suppress(AssertionError):
            poll(lambda: probe_turns(chaos, session, probe), COMMAND_TIMEOUT_S, "a late turn")
    # The next turn goes to the owner too, after the lost one: then everything has run.
    chaos.next_turn_completes("gw-c", session)
    probes = probe_turns(chaos, session, probe)
    ran = [r for r in chaos.stub.main_message_requests() if probe in r.last_user_text]
    if answer.status_code == 202:
        chaos.expect(
            [t["id"] for t in probes] == [answer.json()["id"]],
            f"answered 202 with turn {answer.json()['id']}, the store has {probes}",
        )
        chaos.expect(len(ran) == 1, f"the turn reached the model {len(ran)} times")
    else:
        chaos.expect(
            not probes and not ran,
            f"answered {answer.status_code} yet {len(probes)} turn(s) were created "
            f"({[t['status'] for t in probes]}) and reached the model {len(ran)} time(s)",
        )
    chaos.invariants("gw-c", session)
    chaos.one_cli_at_a_time(session)
    chaos.verdict()
