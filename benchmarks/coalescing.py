"""Delta coalescing with the real CLIs: what joining a CLI's small text deltas saves the
gateway, the wire and the browser, and that no text is lost doing it.

The pinned Claude Code and OpenCode against ``tests/stub_llm/`` on 127.0.0.1, which streams
each reply at a model's pace (``[[long:<chars>@<deltas_per_s>/<chars_per_delta>]]``), behind
the gateway configured as ``benchmarks/realcli.py`` configures it, once per
``server.coalesce_deltas_ms`` setting (0: every delta its own event; 5; 16: the default). The
settings' gateways run side by side (each with its own HOME, workspace and data directory) and
take turns, so drift in the machine's load falls on all of them. A client reads each session's
SSE stream (``benchmarks/ssetap.py``'s ``SseTap``); the web console, in Debian's headless
Chromium driven by Playwright, renders one more turn of each, its renderer's CPU read over the
Chrome DevTools Protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any

from benchmarks.harness import Api, Section, Table, Target, scratch
from benchmarks.realcli import Setup, gateway_for
from benchmarks.settings import RunConfig
from benchmarks.watched import START_LIMIT_S, TurnRecord, Watched
from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.gateway import TOKEN
from tests.stub_llm import Plan, StubLLM, plan_reply

if TYPE_CHECKING:
    from playwright.async_api import Browser

PROVIDERS = ("claude_code", "opencode")
LABELS = {"claude_code": "Claude Code", "opencode": "OpenCode"}
WINDOWS_MS = (0, 5, 16)
DEFAULT_MS = 16
"""The gateway's default ``server.coalesce_deltas_ms``."""
"""``server.coalesce_deltas_ms`` settings compared: off, the default, a wider window."""
DELTAS_PER_S = 150
"""OpenCode prints about 150 deltas a second; models stream 50-150 tokens a second."""
CHARS_PER_DELTA = 4
WARMUP_PROMPT = "Say hello"
BROWSER_METRICS = {
    "TaskDuration": "TaskDuration ms",
    "ScriptDuration": "ScriptDuration ms",
    "LayoutDuration": "LayoutDuration ms",
    "RecalcStyleDuration": "RecalcStyleDuration ms",
    "ProcessTime": "renderer process CPU ms",
}
"""``Performance.getMetrics`` names (seconds; with ``timeDomain: threadTicks`` the durations are
the main thread's CPU time, not wall time) and their columns."""


def prompt_for(chars: int) -> str:
    return f"Tell me a long story. [[long:{chars}@{DELTAS_PER_S}/{CHARS_PER_DELTA}]]"


def measures(chars: int) -> str:
    deltas = -(-chars // CHARS_PER_DELTA)
    return (
        "The pinned Claude Code and OpenCode against `tests/stub_llm/` on loopback, which "
        f"answers every measured prompt with {chars:,} characters in {deltas} text deltas of "
        f"{CHARS_PER_DELTA} characters, one every 1/{DELTAS_PER_S} s (`[[long:{chars}@"
        f"{DELTAS_PER_S}/{CHARS_PER_DELTA}]]`: a model's pace; each pause is a sleep, so a "
        "little slower), through `python -m app serve` configured as the end-to-end tests "
        "configure each CLI, once per `server.coalesce_deltas_ms` setting (0 = every delta its "
        "own event). The settings' gateways run side by side, each with its own HOME, workspace"
        " and data directory, and take turns (a round = one turn on each, in rotating order); "
        "each first runs untimed warm-up turns. **Gateway**: a client keeps the session's SSE "
        "stream open and counts, from just before `POST …/turns` to `turn.completed`, the SSE "
        "messages (events) and `message.delta` events it read and the SSE body bytes (HTTP "
        "chunk framing excluded); stream s is the first `message.delta` to `message.completed`;"
        " gateway CPU is user + system time of the gateway process alone (/proc/<pid>/stat, "
        "not its CLI children) over the same span. Medians over the measured turns. **Text "
        "intact**: in every turn (the browser's included), each message's `message.delta` texts"
        " joined equal its `message.completed` text and the stub's reply. **Browser**: the web "
        "console (`/console#session=…`, signed in) in Debian's headless Chromium (Playwright, "
        "as tests/browser runs it) follows the session live while one more such turn runs; "
        "its renderer's CPU from the Chrome DevTools Protocol (`Performance.enable` with "
        "`timeDomain: threadTicks`, so durations are the main thread's CPU time, not wall "
        "time; `Performance.getMetrics` just before `POST …/turns` and once the console shows"
        " the turn's end): TaskDuration = every task of the main thread, ScriptDuration = "
        "JavaScript, LayoutDuration and RecalcStyleDuration, and the renderer process's CPU "
        "(ProcessTime: all its threads, 10 ms steps). Console text intact: the console's "
        "message shows every delta and the completed event added nothing to them."
    )


# --- the gateways ----------------------------------------------------------------------------


def _setup(stub: StubLLM, base: Path) -> Setup:
    """Its own HOME (the CLIs' state), workspace and data directory for one gateway."""
    home, workspace = base / "home", base / "roots" / "project"
    home.mkdir(parents=True)
    workspace.mkdir(parents=True)
    return Setup(stub=stub, home=home, workspace=workspace, base=base)


@contextlib.asynccontextmanager
async def gateways(
    stub: StubLLM, base: Path, provider: str, windows: Sequence[int]
) -> AsyncIterator[dict[int, Api]]:
    """One gateway per coalescing window, started together, each with its own setup."""
    made = {}
    for window in windows:
        gateway = gateway_for(_setup(stub, base / f"{provider}-{window}ms"), provider)
        gateway.config["server"] = {"coalesce_deltas_ms": window}
        made[window] = gateway
    async with contextlib.AsyncExitStack() as stack:
        for gateway in made.values():
            stack.push_async_callback(asyncio.to_thread, gateway.stop)
        await asyncio.gather(*(asyncio.to_thread(g.start, START_LIMIT_S) for g in made.values()))
        apis = {}
        for window, gateway in made.items():
            apis[window] = await stack.enter_async_context(Api(gateway))  # type: ignore[arg-type]
        yield apis


# --- the browser -------------------------------------------------------------------------------


@dataclass
class BrowserTurn:
    metrics_ms: dict[str, float]
    console_intact: bool
    spans: int


CONSOLE_CHECK = """
(ids) => {
  let spans = 0;
  const intact = ids.every(([id, text]) => {
    const box = document.querySelector(`.msg.agent[data-message-id="${id}"] .text`);
    if (!box) return false;
    const parts = [...box.children];
    spans += parts.length;
    const deltas = parts.filter((p) => p.dataset.type === "message.delta" && !p.hidden);
    const last = parts[parts.length - 1];
    return deltas.map((p) => p.textContent).join("") === text
      && last?.dataset.type === "message.completed" && last.textContent === "";
  });
  return [intact, spans];
}
"""
"""Whether the console shows each message as its deltas (the completed event adding nothing),
and how many text spans it rendered for them."""


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[tuple[Browser | None, str]]:
    """Headless Chromium (Debian's, as tests/browser runs it), or None and why not."""
    try:
        from playwright.async_api import async_playwright  # noqa: PLC0415 - optional
    except ImportError as error:
        yield None, f"Playwright is not importable ({error}); `pip install -e '.[dev]'`"
        return
    if not await asyncio.to_thread(CHROMIUM.exists):
        yield None, f"{CHROMIUM} is missing; `sudo scripts/system-packages.sh chromium`"
        return
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
        )
        try:
            yield browser, ""
        finally:
            await browser.close()


async def browser_turn(browser: Browser, watched: Watched, prompt: str) -> BrowserTurn:
    """One turn of ``watched`` while the console follows it; the renderer's time meanwhile."""
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = await context.new_page()
        page.set_default_timeout(START_LIMIT_S * 1000)
        await page.goto(f"{watched.api.gateway.base_url}/console#session={watched.session_id}")
        await page.get_by_label("Gateway key").fill(TOKEN)
        await page.get_by_role("button", name="Sign in").click()
        await page.wait_for_function(
            "() => document.getElementById('stream-state')?.textContent === 'stream: live'",
            polling=100,
        )
        cdp = await context.new_cdp_session(page)
        await cdp.send("Performance.enable", {"timeDomain": "threadTicks"})
        before = await _metrics(cdp)
        turn = await watched.run_turn(prompt)
        await page.wait_for_function(
            "(n) => document.querySelectorAll('#log .turn-end').length >= n",
            arg=watched.turns,
            polling=100,
        )
        after = await _metrics(cdp)
        intact, spans = await page.evaluate(CONSOLE_CHECK, list(turn.completed.items()))
        return BrowserTurn(
            metrics_ms={
                column: round((after[name] - before[name]) * 1000, 1)
                for name, column in BROWSER_METRICS.items()
                if name in after and name in before
            },
            console_intact=bool(intact),
            spans=int(spans),
        )
    finally:
        await context.close()


async def _metrics(cdp: Any) -> dict[str, float]:
    answer = await cdp.send("Performance.getMetrics")
    return {m["name"]: float(m["value"]) for m in answer["metrics"]}


# --- the run ---------------------------------------------------------------------------------


@dataclass
class Measured:
    turns: list[TurnRecord] = field(default_factory=list)
    browser: BrowserTurn | None = None
    browser_turn: TurnRecord | None = None


def _med(values: Sequence[float], digits: int = 1) -> float:
    return round(median(values), digits) if values else float("nan")


async def one_cli(
    stub: StubLLM,
    base: Path,
    provider: str,
    windows: Sequence[int],
    plan: tuple[int, int, int],
    browser: Browser | None,
) -> tuple[dict[int, Measured], dict[str, float]]:
    """Each window's turns, and the seconds each phase of the run took."""
    warmups, rounds, chars = plan
    prompt = prompt_for(chars)
    results = {window: Measured() for window in windows}
    phases: dict[str, float] = {}
    mark = time.monotonic()

    def lap(phase: str) -> None:
        nonlocal mark
        now = time.monotonic()
        phases[phase] = round(now - mark, 1)
        mark = now

    async with gateways(stub, base, provider, windows) as apis:
        lap("start")
        async with contextlib.AsyncExitStack() as stack:
            opened = await asyncio.gather(*(Watched.open(api, stack) for api in apis.values()))
            sessions = dict(zip(apis, opened, strict=True))
            lap("sessions")

            async def warm(watched: Watched) -> None:
                for _ in range(warmups):
                    await watched.run_turn(WARMUP_PROMPT)

            # Untimed, the gateways together: the CLI starts (OpenCode's first turns are slow).
            await asyncio.gather(*(warm(watched) for watched in opened))
            lap("warm-up")
            order = list(windows)
            for _ in range(rounds):
                for window in order:
                    results[window].turns.append(await sessions[window].run_turn(prompt))
                order = order[1:] + order[:1]
            lap("rounds")
            if browser is not None:
                for window in windows:
                    result = results[window]
                    result.browser = await browser_turn(browser, sessions[window], prompt)
                    result.browser_turn = sessions[window].turn
                lap("browser")
    lap("stop")
    return results, phases


def _expected(chars: int) -> str:
    """The stub's reply to ``prompt_for(chars)``."""
    plan = plan_reply(prompt_for(chars))
    assert isinstance(plan, Plan)
    return plan.text


def _rows(provider: str, results: dict[int, Measured], expected: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for window, result in results.items():
        turns = result.turns
        every = turns + ([result.browser_turn] if result.browser_turn else [])
        rows.append(
            {
                "CLI": LABELS[provider],
                "coalesce ms": window,
                "turns": len(turns),
                "stream s": _med([t.stream_s for t in turns], 2),
                "events/turn": _med([t.events for t in turns]),
                "message.delta/turn": _med([t.deltas for t in turns]),
                "chars/delta": _med([len(expected) / t.deltas for t in turns if t.deltas]),
                "SSE KiB/turn": _med([t.bytes / 1024 for t in turns]),
                "gateway CPU ms/turn": _med([t.cpu_ms for t in turns]),
                "text intact": all(t.intact(expected) for t in every),
            }
        )
    return rows


def _browser_rows(
    provider: str, results: dict[int, Measured], expected: str
) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for window, result in results.items():
        if result.browser is None or result.browser_turn is None:
            continue
        turn = result.browser_turn
        rows.append(
            {
                "CLI": LABELS[provider],
                "coalesce ms": window,
                "events": turn.events,
                "message.delta": turn.deltas,
                "text spans rendered": result.browser.spans,
                **result.browser.metrics_ms,
                "text intact": turn.intact(expected),
                "console text intact": result.browser.console_intact,
            }
        )
    return rows


def _target(provider: str, results: dict[int, Measured], expected: str) -> Target | None:
    off, on = results.get(0), results.get(DEFAULT_MS)
    if off is None or on is None:
        return None
    events = {w: median(t.events for t in r.turns) for w, r in results.items() if r.turns}
    intact = all(t.intact(expected) for r in results.values() for t in r.turns)
    others = "; ".join(
        f"{w} ms: {n:g} ({n / events[0]:.2f}x)"
        for w, n in events.items()
        if w not in (0, DEFAULT_MS)
    )
    return Target(
        name=f"events per turn with coalescing (default) vs without ({LABELS[provider]})",
        goal="fewer, text intact",
        value=f"{events[DEFAULT_MS]:g} vs {events[0]:g} ({events[DEFAULT_MS] / events[0]:.2f}x)"
        + (f"; {others}" if others else "")
        + f"; text intact: {'yes' if intact else 'NO'}",
        met=events[DEFAULT_MS] < events[0] and intact,
    )


async def run(config: RunConfig) -> Section:
    warmups = config.pick(quick=2, full=2)
    rounds = config.pick(quick=2, full=3)
    chars = config.pick(quick=900, full=1500)
    section = Section(
        name="coalescing",
        title="13. Delta coalescing with the real CLIs",
        measures=measures(chars),
    )
    expected = _expected(chars)
    rows: list[dict[str, object]] = []
    browser_rows: list[dict[str, object]] = []
    with scratch("coalescing") as base, StubLLM() as stub:
        async with chromium() as (browser, why_not):
            for provider in PROVIDERS:
                results, phases = await one_cli(
                    stub, base, provider, WINDOWS_MS, (warmups, rounds, chars), browser
                )
                rows += _rows(provider, results, expected)
                browser_rows += _browser_rows(provider, results, expected)
                if (target := _target(provider, results, expected)) is not None:
                    section.targets.append(target)
                section.notes.append(
                    f"{LABELS[provider]}, seconds: "
                    + ", ".join(f"{phase} {s}" for phase, s in phases.items())
                    + f" (its {len(WINDOWS_MS)} gateways together; {warmups} warm-up turns "
                    f"each, then {rounds} rounds"
                    + (", then one browser turn each)." if browser is not None else ").")
                )
    section.tables.append(
        Table(
            title=f"per turn, through the gateway, by `server.coalesce_deltas_ms` (median of "
            f"{rounds} turns of {chars:,} characters at {DELTAS_PER_S} deltas/s)",
            rows=rows,
        )
    )
    if browser_rows:
        section.tables.append(
            Table(
                title="the web console in headless Chromium following one turn each: the "
                "renderer's CPU (Chrome DevTools Protocol `Performance.getMetrics`, thread time)",
                rows=browser_rows,
            )
        )
    else:
        section.notes.append(f"No browser column: {why_not}.")
    section.notes += [
        "The coalescer numbers the first delta after a pause at once and joins the ones that "
        "follow within the window of the last one numbered (app/runtime/coalesce.py): deltas "
        "that come evenly further apart than the window are never joined: at 150 deltas/s "
        "(6.7 ms apart) a 5 ms window joins only what the CLI and the pipes bunch together, "
        "the default 16 ms about every second or third.",
        "Gateway CPU is the gateway process only (the CLIs' own work is the same whatever the "
        "setting), read in 10 ms ticks; with a few turns per setting on a shared machine it "
        "varies by tens of percent from run to run, the event and byte counts do not.",
    ]
    return section
