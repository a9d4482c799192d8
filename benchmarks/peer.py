"""OpenCode side by side: the same prompts through the gateway and straight against
``opencode serve``, in one run.

Gateway: ``python -m app serve`` with the OpenCode provider configured as the end-to-end
tests configure it (benchmarks/realcli.py); its client creates a session, opens the session's
SSE stream, starts a turn (``POST …/turns``) and reads until ``turn.completed``. Direct: the
same pinned ``opencode serve``, started by the benchmark on a free loopback port with the
environment and configuration the gateway gives its own (``child_environment`` over
``server_env``: ``FIXED_ENV``, ``OPENCODE_CONFIG_CONTENT`` with ``REQUIRED_CONFIG``, basic
auth), its own HOME and XDG directories and its own workspace; its client does what the
gateway does there and what an OpenCode user would otherwise run: ``POST /session`` (the same
title form and the same permission ruleset as a gateway session in ``ask`` mode), ``POST
/session/{id}/prompt_async`` (the same body and model) and the workspace's ``GET /event``
stream until the thread's ``session.idle``. Both servers run side by side against one
``tests/stub_llm/`` on 127.0.0.1, and the two ways take turns, so drift in the machine's
load falls on both.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from benchmarks.harness import Section, Table, Target, cpu_seconds, percentile, ratio, scratch
from benchmarks.peer_ways import REPLY_CHARS, ThroughGateway, Way, opencode_direct
from benchmarks.realcli import gateway_running, stub_setup
from benchmarks.settings import RunConfig
from benchmarks.ssetap import Turn
from tests.stub_llm import LONG_CHUNK, StubLLM

CONCURRENT = 10
MIB = 2**20

MEASURES = (
    "The pinned OpenCode against `tests/stub_llm/` on loopback, answering every prompt with "
    f"{REPLY_CHARS:,} characters of text in {REPLY_CHARS // LONG_CHUNK} deltas of "
    f"{LONG_CHUNK} characters sent back to back (`[[long:{REPLY_CHARS}]]`). **Gateway**: "
    "`python -m app serve` with the OpenCode provider (its own `opencode serve` child); the "
    "client opens the session's SSE stream, then times from just before `POST …/turns` to the "
    "answer of that POST (accepted), to the first `message.delta` (first text) and to "
    "`turn.completed` (done). **Direct**: a second `opencode serve` started by the benchmark "
    "with the environment and configuration the gateway gives its own; the client opens the "
    "workspace's `GET /event?directory=` stream, then times from just before `POST "
    "/session/{id}/prompt_async` to the thread's first text `message.part.delta` and to its "
    "`session.idle`; sessions are made as the gateway makes them (`POST /session`, the same "
    "permission ruleset). Model request: when the stub received the turn's request to the model"
    " (each server's requests name its workspace; in a concurrent round they are paired with "
    "the turns in order), i.e. OpenCode's own work before the model plus, for the gateway, its "
    "forwarding. Events and bytes: SSE messages and body bytes (HTTP chunk framing excluded) "
    "the client read between sending the prompt and the turn's end; for ten concurrent sessions"
    " all the client read in that time over all its streams (the gateway's ten, the direct "
    "client's one), per turn. Warm turns: a session's turns after its first, p50 over every "
    "session; a session's first turn is timed the same way (the gateway then also creates the "
    "OpenCode thread, which the direct client did before, in the `create ms` column). Before "
    "any of it each way runs a few untimed turns: OpenCode's first turns after its start are "
    "several times slower. Ten concurrent: ten sessions each way, one untimed turn each, then "
    "rounds of ten turns started together; wall time from the first prompt to the last end. CPU"
    " from /proc/<pid>/stat (user + system; the OpenCode tree's reaped children included) over "
    "the timed turns, per turn; RSS (VmRSS from /proc/<pid>/status) after the run, and its "
    "growth per session from before the ten sessions were made to after their last round. Both "
    "servers run side by side, and the ways alternate."
)


# --- /proc ---------------------------------------------------------------------------------


def _stat_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and of its reaped children."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def tree_cpu(pids: Sequence[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += _stat_cpu(pid)
    return total


def vm_rss(pids: Sequence[int]) -> int:
    """The summed ``VmRSS`` of ``pids`` (bytes), from ``/proc/<pid>/status``."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


@dataclass
class Usage:
    """CPU seconds and turns, summed over the timed stretches of one way."""

    relay_s: float = 0.0
    server_s: float = 0.0
    turns: int = 0

    def ms_per_turn(self, seconds: float) -> float:
        return round(seconds * 1000 / self.turns, 1) if self.turns else float("nan")


@contextlib.contextmanager
def metered(way: Way, usage: Usage, turns: int) -> Iterator[None]:
    relay, server = way.relay_pid(), way.server_pids()
    relay_0 = cpu_seconds(relay) if relay is not None else 0.0
    server_0 = tree_cpu(server)
    yield
    if relay is not None:
        usage.relay_s += cpu_seconds(relay) - relay_0
    usage.server_s += tree_cpu(way.server_pids()) - server_0
    usage.turns += turns


# --- the runs --------------------------------------------------------------------------------


@dataclass
class Results:
    first: list[Turn] = field(default_factory=list)
    warm: list[Turn] = field(default_factory=list)
    created_ms: list[float] = field(default_factory=list)
    rounds: list[list[Turn]] = field(default_factory=list)
    walls_ms: list[float] = field(default_factory=list)
    concurrent_events: int = 0
    concurrent_bytes: int = 0
    warm_usage: Usage = field(default_factory=Usage)
    concurrent_usage: Usage = field(default_factory=Usage)
    relay_rss: int = 0
    server_rss: int = 0
    relay_growth: float = float("nan")
    server_growth: float = float("nan")


def stamp_model_requests(stub: StubLLM, way: Way, turns: Sequence[Turn]) -> None:
    """Pair ``turns`` (by start) with the model requests ``way``'s server sent meanwhile
    (by arrival; the request names its workspace in its system prompt)."""
    marker = str(way.workspace).encode()
    first, last = min(t.start_ns for t in turns) / 1e9, max(t.end_ns for t in turns) / 1e9
    arrived = sorted(
        r.received_at
        for r in stub.requests
        if r.is_openai and not r.is_side and marker in r.raw_body
        if first <= r.received_at <= last
    )
    if len(arrived) != len(turns):
        raise RuntimeError(f"{len(turns)} turns sent {len(arrived)} model requests")
    for turn, received in zip(sorted(turns, key=lambda t: t.start_ns), arrived, strict=True):
        turn.model_ns = round(received * 1e9)


async def one_session(stub: StubLLM, way: Way, warm_turns: int, results: Results) -> None:
    session_id, created_ms = await way.new_session()
    results.created_ms.append(created_ms)
    results.first.append(await way.turn(session_id))
    with metered(way, results.warm_usage, warm_turns):
        for _ in range(warm_turns):
            results.warm.append(await way.turn(session_id))
    for turn in results.first[-1:] + results.warm[-warm_turns:]:
        stamp_model_requests(stub, way, [turn])


def _counters(way: Way) -> tuple[int, int]:
    taps = way.taps()
    return sum(t.messages for t in taps), sum(t.bytes for t in taps)


async def concurrent_round(stub: StubLLM, way: Way, sessions: list[str], results: Results) -> None:
    messages, size = _counters(way)
    with metered(way, results.concurrent_usage, len(sessions)):
        turns = await asyncio.gather(*(way.turn(s) for s in sessions))
    stamp_model_requests(stub, way, turns)
    results.rounds.append(turns)
    results.walls_ms.append((max(t.end_ns for t in turns) - min(t.start_ns for t in turns)) / 1e6)
    after_messages, after_size = _counters(way)
    results.concurrent_events += after_messages - messages
    results.concurrent_bytes += after_size - size


def _rss(way: Way) -> tuple[int, int]:
    relay = way.relay_pid()
    return (vm_rss([relay]) if relay is not None else 0), vm_rss(way.server_pids())


# --- the report ------------------------------------------------------------------------------


def _p(values: Sequence[float], q: float) -> float:
    return round(percentile(values, q), 1)


def _sequential_rows(label: str, results: Results) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for kind, turns in (("first turn", results.first), ("warm turns", results.warm)):
        rows.append(
            {
                "way": label,
                "turns": kind,
                "n": len(turns),
                "create ms": round(median(results.created_ms), 1) if kind == "first turn" else None,
                "accepted p50 ms": _p([t.accepted_ms for t in turns], 50),
                "model request p50 ms": _p([t.model_ms for t in turns], 50),
                "first text p50 ms": _p([t.first_text_ms for t in turns], 50),
                "first text max ms": _p([t.first_text_ms for t in turns], 100),
                "done p50 ms": _p([t.done_ms for t in turns], 50),
                "done max ms": _p([t.done_ms for t in turns], 100),
                "events/turn": round(median(t.events for t in turns), 1),
                "KiB/turn": round(median(t.bytes for t in turns) / 1024, 1),
            }
        )
    return rows


def _concurrent_row(label: str, results: Results) -> dict[str, object]:
    turns = [t for r in results.rounds for t in r]
    return {
        "way": label,
        "rounds": len(results.rounds),
        "wall p50 ms": round(median(results.walls_ms), 1),
        "accepted p50 ms": _p([t.accepted_ms for t in turns], 50),
        "model request p50 ms": _p([t.model_ms for t in turns], 50),
        "model request p99 ms": _p([t.model_ms for t in turns], 99),
        "first text p50 ms": _p([t.first_text_ms for t in turns], 50),
        "first text p99 ms": _p([t.first_text_ms for t in turns], 99),
        "done p50 ms": _p([t.done_ms for t in turns], 50),
        "done p99 ms": _p([t.done_ms for t in turns], 99),
        "events/turn": round(results.concurrent_events / len(turns), 1),
        "KiB/turn": round(results.concurrent_bytes / len(turns) / 1024, 1),
    }


def _resource_rows(gateway: Results, direct: Results) -> list[dict[str, object]]:
    def row(way: str, process: str, results: Results, relay: bool) -> dict[str, object]:
        warm, busy = results.warm_usage, results.concurrent_usage
        return {
            "way": way,
            "process": process,
            "CPU ms/warm turn": warm.ms_per_turn(warm.relay_s if relay else warm.server_s),
            f"CPU ms/turn, {CONCURRENT} concurrent": busy.ms_per_turn(
                busy.relay_s if relay else busy.server_s
            ),
            "RSS MiB": round((results.relay_rss if relay else results.server_rss) / MIB, 1),
            "RSS growth KiB/session": round(
                (results.relay_growth if relay else results.server_growth) / 1024, 1
            ),
        }

    return [
        row("gateway", "gateway (python -m app serve)", gateway, relay=True),
        row("gateway", "its opencode serve", gateway, relay=False),
        row("direct", "opencode serve", direct, relay=False),
    ]


def _targets(gateway: Results, direct: Results) -> list[Target]:
    def gap(values: Callable[[Results], list[float]], q: float) -> float:
        return round(percentile(values(gateway), q) - percentile(values(direct), q), 1)

    def warm_first(r: Results) -> list[float]:
        return [t.first_text_ms for t in r.warm]

    def warm_done(r: Results) -> list[float]:
        return [t.done_ms for t in r.warm]

    def busy_first(r: Results) -> list[float]:
        return [t.first_text_ms for round_ in r.rounds for t in round_]

    first, done, busy = gap(warm_first, 50), gap(warm_done, 50), gap(busy_first, 99)
    usage = gateway.warm_usage
    cpu = ratio(usage.relay_s, direct.warm_usage.server_s)
    return [
        Target(
            name="warm turn's first text vs opencode serve directly (p50)",
            goal="<= +20 ms",
            value=f"{first:+} ms",
            met=first <= 20,
        ),
        Target(
            name="warm turn's end vs opencode serve directly (p50)",
            goal="<= +20 ms",
            value=f"{done:+} ms",
            met=done <= 20,
        ),
        Target(
            name=f"first text, {CONCURRENT} concurrent turns, vs opencode serve directly (p99)",
            goal="<= +50 ms",
            value=f"{busy:+} ms",
            met=busy <= 50,
        ),
        Target(
            name="gateway CPU per warm turn vs opencode serve's own (direct)",
            goal="<= 0.5x",
            value=f"{cpu}x",
            met=cpu <= 0.5,
        ),
    ]


async def run(config: RunConfig) -> Section:
    warmup = config.pick(quick=3, full=5)
    blocks = config.pick(quick=1, full=5)
    warm_turns = config.pick(quick=4, full=8)
    rounds = config.pick(quick=1, full=8)
    section = Section(name="peer", title="12. OpenCode side by side", measures=MEASURES)
    results = {"gateway": Results(), "direct": Results()}
    with scratch("peer") as base, stub_setup(base) as setup:
        async with (
            gateway_running(setup, "opencode") as api,
            contextlib.AsyncExitStack() as stack,  # the gateway's SSE streams, closed first
            opencode_direct(setup) as direct,
        ):
            ways: list[Way] = [ThroughGateway(api, stack, setup.workspace), direct]
            for way in ways:  # the gateway starts its opencode serve now; both warm up
                session_id, _ = await way.new_session()
                for _ in range(warmup):
                    await way.turn(session_id)
            for _ in range(blocks):
                for way in ways:
                    await one_session(setup.stub, way, warm_turns, results[way.label])
            rss_before = {way.label: _rss(way) for way in ways}
            sessions: dict[str, list[str]] = {}
            for way in ways:
                made = [await way.new_session() for _ in range(CONCURRENT)]
                sessions[way.label] = [session_id for session_id, _ in made]
                await asyncio.gather(*(way.turn(s) for s in sessions[way.label]))
            for _ in range(rounds):
                for way in ways:
                    await concurrent_round(setup.stub, way, sessions[way.label], results[way.label])
            for way in ways:
                result = results[way.label]
                result.relay_rss, result.server_rss = _rss(way)
                result.relay_growth = (result.relay_rss - rss_before[way.label][0]) / CONCURRENT
                result.server_growth = (result.server_rss - rss_before[way.label][1]) / CONCURRENT
    gateway, direct_results = results["gateway"], results["direct"]
    section.tables += [
        Table(
            title=f"one session at a time: a first turn, then {warm_turns} warm turns per "
            f"session; sessions per way: {blocks}",
            rows=_sequential_rows("gateway", gateway) + _sequential_rows("direct", direct_results),
        ),
        Table(
            title=f"{CONCURRENT} concurrent sessions per way, their {CONCURRENT} turns started "
            f"together; rounds: {rounds}",
            rows=[_concurrent_row("gateway", gateway), _concurrent_row("direct", direct_results)],
        ),
        Table(title="CPU and memory", rows=_resource_rows(gateway, direct_results)),
    ]
    section.targets += _targets(gateway, direct_results)
    section.notes += [
        "The gateway's numbers are end to end: they hold its own `opencode serve` (the same "
        "binary and configuration as the direct one), so the gap between the rows is what "
        "the gateway adds; its CPU row is the gateway process alone.",
        "The direct client reads OpenCode's per-directory `/event` stream (what the SDK's "
        "`event.subscribe` reads); the gateway reads `/global/event`, which also carries "
        "`sync` copies of every session event and wraps each in `{directory, payload}`.",
    ]
    return section
