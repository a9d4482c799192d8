"""The chaos suite's harness: three replicas (gw-a, gw-b, gw-c) of the real gateway running
Claude Code against the stub model, on one private PostgreSQL database and one private Redis,
and what every scenario checks once its fault has played out.

Each session gets a workspace of its own under the shared root, so ``CliSampler``
(tests/e2e/chaos_faults.py) can tell its CLIs from another session's. ``Chaos.invariants``
reads the session through a replica still standing: its stored events have seqs 1..n, every
turn has exactly one terminal event and its row the status that event says, and no turn is
left unfinished. ``Chaos.expect`` records a failed check and goes on, so one run of a
scenario names every property it broke; ``Chaos.verdict`` fails the test with all of them.
Timings are collected in ``TIMINGS`` (printed as measured, listed at the end of the module).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.providers.catalog import executable, present_by_default
from app.settings import Settings
from tests.conftest import MIGRATED_TEMPLATE
from tests.dbservers import PostgresServer, RedisServer
from tests.e2e.chaos_faults import CliSampler, descendants, reap_clis, sampling, thaw
from tests.e2e.cli_harness import stored_events
from tests.e2e.providers import CONFIGS
from tests.gateway import CLUSTER_SECRET, GatewayProcess
from tests.stub_llm import StubLLM

REPLICAS = ("gw-a", "gw-b", "gw-c")
LEASE_TTL_S = 3.0
COMMAND_TIMEOUT_S = 10.0
SETTLE_S = 45.0
"""The longest a scenario waits for its turns to end once its fault has played out."""
POLL_S = 0.1
TERMINAL = {
    "turn.completed": "completed",
    "turn.failed": "failed",
    "turn.interrupted": "interrupted",
}
"""A terminal event's type → the status its turn's row must have."""
UNFINISHED = frozenset({"queued", "running", "retrying"})
CLI = executable("claude_code", Settings())
"""The Claude Code executable the replicas run (its path is in every CLI's command line)."""

TIMINGS: dict[str, float | str] = {}
"""What the scenarios measured, by name (seconds, unless a text says otherwise)."""


def measured(name: str, value: float | str) -> None:
    TIMINGS[name] = round(value, 2) if isinstance(value, float) else value
    print(f"chaos timing: {name} = {TIMINGS[name]}")


def is_end_of(turn_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["type"] in TERMINAL and e["turn_id"] == turn_id


def poll(condition: Callable[[], Any], timeout: float, what: str, *, period: float = POLL_S) -> Any:
    """``condition()`` once it is truthy (exceptions count as not yet); fails after
    ``timeout`` naming ``what`` and the last value or error seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = condition()
        except (httpx.HTTPError, AssertionError) as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s (last: {last!r})"[:2000])
        time.sleep(period)  # state in other processes; the poll is bounded by the deadline


@dataclass(frozen=True)
class Session:
    id: str
    workspace: Path


@dataclass
class Chaos:
    """The three replicas of one test, their shared servers and what watches them."""

    replicas: dict[str, GatewayProcess]
    root: Path
    stub: StubLLM
    postgres: PostgresServer
    redis: RedisServer
    sampler: CliSampler
    failures: list[str] = field(default_factory=list)
    _clients: dict[str, httpx.Client] = field(default_factory=dict)

    def api(self, name: str) -> httpx.Client:
        """A client of replica ``name`` (kept open for the test)."""
        if name not in self._clients:
            client = self.replicas[name].client()
            client.timeout = httpx.Timeout(30.0, connect=5.0)
            self._clients[name] = client
        return self._clients[name]

    def close_clients(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def pid(self, name: str) -> int:
        process = self.replicas[name].process
        assert process is not None, f"{name} is not running"
        return process.pid

    # --- checks ---------------------------------------------------------------------------

    def expect(self, condition: object, message: str) -> None:
        """Record ``message`` as a failure unless ``condition``; the scenario goes on."""
        if not condition and message not in self.failures:
            print(f"chaos check failed: {message}")
            self.failures.append(message)

    def verdict(self) -> None:
        assert not self.failures, "\n".join(f"- {f}" for f in self.failures)

    # --- sessions and turns ---------------------------------------------------------------

    def new_session(self, on: str, name: str) -> Session:
        workspace = self.root / name
        workspace.mkdir()
        created = self.api(on).post("/v1/sessions", json={"workspace": str(workspace)})
        assert created.status_code == 201, created.text
        return Session(id=created.json()["id"], workspace=workspace)

    def start_turn(self, on: str, session: Session, prompt: str) -> dict[str, Any]:
        started = self.api(on).post(f"/v1/sessions/{session.id}/turns", json={"prompt": prompt})
        assert started.status_code == 202, f"{on}: {started.status_code} {started.text}"
        turn: dict[str, Any] = started.json()
        return turn

    def session(self, on: str, session: Session) -> dict[str, Any]:
        got = self.api(on).get(f"/v1/sessions/{session.id}")
        assert got.status_code == 200, got.text
        body: dict[str, Any] = got.json()
        return body

    def thread_kept(self, on: str, session: Session) -> str:
        """The session's thread, once Claude Code has written it to disk. It may not have at
        the first delta, and a CLI stopped sooner rightly leaves the next turn context_lost;
        the scenarios stop it once there is a thread to resume."""
        thread = self.session(on, session)["thread_id"]
        assert thread, "no thread bound while the turn streams"
        home = self.root.parent / "home"
        poll(lambda: any(home.rglob(f"{thread}.jsonl")), 30, "Claude Code to keep the thread")
        kept: str = thread
        return kept

    def turns(self, on: str, session: Session) -> list[dict[str, Any]]:
        """The session's turns, oldest first."""
        got = self.api(on).get(f"/v1/sessions/{session.id}/turns", params={"limit": 500})
        assert got.status_code == 200, f"{got.status_code} {got.text}"
        turns: list[dict[str, Any]] = got.json()["turns"]
        assert len(turns) < 500
        return sorted(turns, key=lambda t: t["number"])

    def events(self, on: str, session: Session) -> list[dict[str, Any]]:
        """Every stored event of the session, page after page."""
        return stored_events(self.api(on), session.id)

    def turn_row(self, on: str, session: Session, turn_id: str) -> dict[str, Any]:
        got = self.api(on).get(f"/v1/sessions/{session.id}/turns/{turn_id}")
        assert got.status_code == 200, f"{got.status_code} {got.text}"
        row: dict[str, Any] = got.json()
        return row

    def finished(
        self, on: str, session: Session, turn_id: str, timeout: float = SETTLE_S
    ) -> dict[str, Any]:
        """The turn's row once its status is final (read from the store, not a stream)."""
        return poll(  # type: ignore[no-any-return]
            lambda: (
                (row := self.turn_row(on, session, turn_id))["status"] not in UNFINISHED and row
            ),
            timeout,
            f"turn {turn_id} to end (read on {on})",
        )

    def settled(self, on: str, session: Session, timeout: float = SETTLE_S) -> list[dict[str, Any]]:
        """The session's turns once none is queued or running any more."""
        return poll(  # type: ignore[no-any-return]
            lambda: (
                (rows := self.turns(on, session))
                and all(r["status"] not in UNFINISHED for r in rows)
                and rows
            ),
            timeout,
            f"every turn of session {session.id} to end (read on {on})",
        )

    @contextlib.contextmanager
    def stream(self, on: str, session: Session, *, after: int = 0) -> Iterator[Stream]:
        """The session's SSE stream on replica ``on``, from ``after``."""
        headers = {"Accept": "text/event-stream", "Last-Event-ID": str(after)}
        with self.api(on).stream(
            "GET", f"/v1/sessions/{session.id}/events", headers=headers
        ) as response:
            assert response.status_code == 200, response.read()
            yield Stream(response)

    def follow(
        self,
        on: str,
        session: Session,
        stop: Callable[[dict[str, Any]], bool],
        *,
        after: int = 0,
        timeout: float = SETTLE_S,
    ) -> list[dict[str, Any]]:
        """Events off replica ``on``'s SSE stream up to the first ``stop`` accepts."""
        with self.stream(on, session, after=after) as reader:
            return read_until(reader, stop, timeout)

    # --- what every scenario checks -------------------------------------------------------

    def invariants(self, on: str, session: Session) -> list[dict[str, Any]]:
        """Check (``expect``) the session's log and turn rows through replica ``on`` once its
        turns have ended; returns its events."""
        try:
            turns = self.settled(on, session)
        except AssertionError as exc:
            self.expect(False, f"session {session.workspace.name}: {exc}")
            turns = self.turns(on, session)
        events = self.events(on, session)
        for problem in log_problems(events, turns):
            self.expect(False, f"session {session.workspace.name}: {problem}")
        return events

    def next_turn_completes(
        self, on: str, session: Session, prompt: str = "hello again"
    ) -> dict[str, Any]:
        """A turn started on replica ``on`` after the scenario completes (the session does
        not wedge); its terminal event."""
        started = self.api(on).post(f"/v1/sessions/{session.id}/turns", json={"prompt": prompt})
        self.expect(
            started.status_code == 202,
            f"session {session.workspace.name}: the next turn on {on} answered "
            f"{started.status_code} {started.text[:300]}",
        )
        if started.status_code != 202:
            return {}
        return self.completes(on, session, started.json()["id"], "the next turn")

    def completes(self, on: str, session: Session, turn_id: str, what: str) -> dict[str, Any]:
        """Wait (through replica ``on``, in the store) until the turn has ended, which must be
        ``completed`` in its row and ``turn.completed`` in the log; its terminal event
        (empty when there is none)."""
        name = session.workspace.name
        try:
            row = self.finished(on, session, turn_id)
            end: dict[str, Any] = poll(
                lambda: next(filter(is_end_of(turn_id), self.events(on, session)), None),
                5,
                f"{what}'s terminal event (its row says {row['status']})",
            )
        except AssertionError as exc:
            self.expect(False, f"session {name}: {exc}")
            return {}
        self.expect(
            end["type"] == "turn.completed" and row["status"] == "completed",
            f"session {name}: {what} ended {end['type']} {json.dumps(end['data'])[:300]}",
        )
        return end

    def post_until_accepted(
        self, on: str, session: Session, prompt: str, *, timeout: float = 30.0
    ) -> tuple[dict[str, Any], list[int]]:
        """Start a turn on replica ``on``, asking again while it answers 409 (a turn still
        runs) or 503 (unavailable); the accepted turn and every status answered."""
        statuses: list[int] = []
        deadline = time.monotonic() + timeout
        while True:
            answer = self.api(on).post(
                f"/v1/sessions/{session.id}/turns", json={"prompt": prompt}, timeout=20.0
            )
            statuses.append(answer.status_code)
            if answer.status_code == 202:
                turn: dict[str, Any] = answer.json()
                return turn, statuses
            assert answer.status_code in (409, 503), f"{answer.status_code} {answer.text}"
            assert time.monotonic() < deadline, f"no turn accepted on {on}: {statuses}"
            time.sleep(POLL_S)  # the replicas recovering; bounded by the deadline

    def one_cli_at_a_time(self, session: Session) -> None:
        self.sampler.wait_sample()
        peak = self.sampler.peak(session.workspace)
        self.expect(peak >= 1, f"the sampler never saw a CLI of {session.workspace.name}")
        self.expect(
            peak <= 1,
            f"session {session.workspace.name}: {peak} CLIs ran at once on its thread "
            f"(pids {self.sampler.crowded(session.workspace)})",
        )


class Stream:
    """An open SSE response, read line by line across several ``read_until`` calls."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.iter_lines()


def read_until(
    reader: Stream, stop: Callable[[dict[str, Any]], bool], timeout: float
) -> list[dict[str, Any]]:
    """Envelopes up to the first ``stop`` accepts; control frames skipped. Fails once
    ``timeout`` has passed (checked on every line, heartbeats included; a silent stream
    fails on the client's read timeout)."""
    deadline = time.monotonic() + timeout
    seen: list[dict[str, Any]] = []
    data: list[str] = []
    named = False
    for line in reader.lines:
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"no such event within {timeout:g} s; last {[e['type'] for e in seen[-5:]]}"
            )
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line.startswith("event:"):
            named = True
        elif line == "" and data:
            if not named:
                seen.append(json.loads("\n".join(data)))
                if stop(seen[-1]):
                    return seen
            data, named = [], False
    raise AssertionError(f"the stream ended after {[e['type'] for e in seen[-5:]]}")


def log_problems(events: list[dict[str, Any]], turns: list[dict[str, Any]]) -> list[str]:
    """What breaks the log's invariants: seqs 1..n, one terminal event per turn whose type
    its row's status matches, no turn unfinished, no terminal event without its turn."""
    problems = []
    seqs = [e["seq"] for e in events]
    if seqs != list(range(1, len(seqs) + 1)):
        dupes = sorted({s for s in seqs if seqs.count(s) > 1})
        missing = sorted(set(range(1, max(seqs, default=0) + 1)) - set(seqs))
        problems.append(f"seqs not 1..n: duplicated {dupes[:10]}, missing {missing[:10]}")
    ends: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if event["type"] in TERMINAL:
            ends.setdefault(event["turn_id"], []).append(event)
    for turn in turns:
        got = ends.pop(turn["id"], [])
        name = f"turn {turn['number']} ({turn['prompt'][:20]!r}, row {turn['status']})"
        if turn["status"] in UNFINISHED:
            problems.append(f"{name} never ended")
        if len(got) != 1:
            problems.append(f"{name} has {len(got)} terminal events: {[e['type'] for e in got]}")
        elif TERMINAL[got[0]["type"]] != turn["status"]:
            problems.append(
                f"{name}: the log ended it {got[0]['type']} {json.dumps(got[0]['data'])[:200]}, "
                f"the row says {turn['status']} {json.dumps(turn['error'])[:200]}"
            )
    for turn_id, got in ends.items():
        problems.append(f"terminal events {[e['type'] for e in got]} of no turn ({turn_id})")
    return problems


def reasons(events: list[dict[str, Any]]) -> list[str]:
    """The ``error.reason`` of every ``turn.failed`` in ``events``."""
    return [
        str((e["data"].get("error") or {}).get("reason"))
        for e in events
        if e["type"] == "turn.failed"
    ]


# --- the cluster ------------------------------------------------------------------------------


def replica_config(
    name: str, *, root: Path, home: Path, stub: StubLLM, url: str, redis_url: str
) -> dict[str, Any]:
    providers: dict[str, Any] = {p: {"enabled": False} for p in present_by_default()}
    providers["claude_code"] = CONFIGS["claude_code"](stub, home)
    return {
        "workspaces": {"roots": [str(root)]},
        "sessions": {"approval_timeout_s": 120},
        "selection": {"default": "claude_code"},
        "providers": providers,
        "storage": {"url": url},
        # The sessions' CLI homes and workspace records on a volume every replica mounts,
        # like the threads in them.
        "sandbox": {"homes_dir": str(home / "sessions")},
        "snapshots": {"dir": str(home / "snapshots")},
        "cluster": {
            "redis_url": redis_url,
            "replica_id": name,
            "lease_ttl_s": LEASE_TTL_S,
            "command_timeout_s": COMMAND_TIMEOUT_S,
            "secret": CLUSTER_SECRET,
        },
    }


@contextlib.contextmanager
def three_replicas(
    tmp_path: Path, stub: StubLLM, postgres: PostgresServer, redis_server: RedisServer
) -> Iterator[Chaos]:
    """gw-a, gw-b and gw-c started on a fresh database and an empty Redis, a shared workspace
    root and CLI home; on the way out every replica is woken and stopped, the sampler
    stopped, and no CLI may be left under the root."""
    if not redis_server.running:  # a test before this one failed to bring it back
        redis_server.start()
    if not postgres.running:
        postgres.start()
    redis_server.command("FLUSHALL")
    redis_server.command("CONFIG", "SET", "notify-keyspace-events", "")
    url = postgres.create_database(f"chaos_{tmp_path.name.lower()}", MIGRATED_TEMPLATE)
    root = tmp_path / "roots"
    home = tmp_path / "home"
    root.mkdir()
    home.mkdir()
    replicas = {
        name: GatewayProcess(
            data_dir=tmp_path / name,
            config=replica_config(
                name, root=root, home=home, stub=stub, url=url, redis_url=redis_server.url
            ),
        )
        for name in REPLICAS
    }
    try:
        with sampling(root, CLI) as sampler:
            for gateway in replicas.values():
                gateway.launch()
            for gateway in replicas.values():
                gateway.wait_ready(60)
            chaos = Chaos(replicas, root, stub, postgres, redis_server, sampler)
            try:
                yield chaos
            finally:
                chaos.close_clients()
    finally:
        for gateway in replicas.values():
            if gateway.process is not None:
                thaw(sorted(descendants(gateway.process.pid)))
        for gateway in replicas.values():
            gateway.stop()
        left = reap_clis(root, CLI)
        assert not left, f"CLIs outlived every replica (killed): {left}"
