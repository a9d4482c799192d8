"""Turn latency with the real CLIs against the stub model, gateway vs the CLI run directly."""

from __future__ import annotations

from statistics import median

from benchmarks.harness import Section, Table, Target, scratch
from benchmarks.realcli import (
    PROVIDERS,
    TurnTiming,
    claude_warm_direct,
    direct_once,
    gateway_running,
    stub_setup,
    timed_turn,
)
from benchmarks.settings import RunConfig

MEASURES = (
    "The pinned CLIs against `tests/stub_llm/` on loopback (it answers `Hello from stub.` "
    "at once). Gateway: from just before `POST …/turns` to the first event of the turn on the "
    "session's SSE stream (`turn.started`, written by the gateway itself), to the first "
    "`message.delta` (the model's first text: the number to compare) and to "
    "`turn.completed`; a new session's first turn (the CLI process starts, or for Codex and "
    "OpenCode the shared server's thread) and its second (the process is live). Direct: the "
    "CLI started by the benchmark on the same prompt, environment and stub: time to its first "
    "stdout line, to the first line holding the model's text, and to its exit (`claude -p "
    "--output-format stream-json --include-partial-messages`, `codex exec --json`, `opencode "
    "run --format json`); for Claude Code also warm: one stream-json process as the gateway "
    "runs it, the second message timed. Codex and OpenCode have no comparable warm direct "
    "form (the gateway drives their app-server / HTTP server). Median of the repetitions."
)


def _median(timings: list[TurnTiming]) -> dict[str, float]:
    return {
        "first event ms": round(median(t.first_event_ms for t in timings), 1),
        "first text ms": round(median(t.first_text_ms for t in timings), 1),
        "done ms": round(median(t.completed_ms for t in timings), 1),
    }


async def run(config: RunConfig) -> Section:
    repeats = config.pick(quick=1, full=2)
    section = Section(name="turns", title="4. Turn latency with the real CLIs", measures=MEASURES)
    rows: list[dict[str, object]] = []
    warm_gap: float | None = None
    with scratch("turns") as base, stub_setup(base) as setup:
        for provider in PROVIDERS if not config.quick else ("claude_code",):
            cold: list[TurnTiming] = []
            warm: list[TurnTiming] = []
            async with gateway_running(setup, provider) as api:
                for _ in range(repeats):
                    session = await api.create_session()
                    cold.append(await timed_turn(api, session))
                    warm.append(await timed_turn(api, session))
                    await api.delete_session(session)
            direct = [await direct_once(setup, provider) for _ in range(repeats)]
            rows += [
                {"provider": provider, "path": "gateway, first turn", **_median(cold)},
                {"provider": provider, "path": "gateway, second turn (live)", **_median(warm)},
                {"provider": provider, "path": "direct, one-shot", **_median(direct)},
            ]
            if provider == "claude_code":
                direct_warm = [await claude_warm_direct(setup) for _ in range(repeats)]
                rows.append(
                    {"provider": provider, "path": "direct, second message", **_median(direct_warm)}
                )
                warm_gap = round(
                    _median(warm)["first text ms"] - _median(direct_warm)["first text ms"], 1
                )
    section.tables.append(Table(title=f"median of {repeats}", rows=rows))
    if warm_gap is not None:
        section.targets.append(
            Target(
                name="warm turn's first text vs the CLI itself (Claude Code)",
                goal="<= +20 ms",
                value=f"{warm_gap:+} ms",
                met=warm_gap <= 20,
            )
        )
    return section
