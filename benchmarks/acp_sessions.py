"""Start-up time and memory of one live session on each ACP agent, through the gateway.

    python -m benchmarks.acp_sessions [--runs N] [--out FILE]

For each ``acp:<name>`` provider the end-to-end tests wire to the stub model
(tests/e2e/providers.py), ``runs`` times: a fresh gateway (its real ``python -m app serve``) and
a fresh session; the first turn's ``POST`` is the start, ``session.thread_bound`` is the session
ready (the agent spawned, ``initialize`` and ``session/new`` answered, its ask mode set), and
the turn's end is the first answer. Then the resident memory of the session's whole process
tree (the agent and its children, from /proc), sampled for a second. As root it re-runs itself
in a private network namespace, so the agents can reach nothing but the stub on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.harness import descendants, tree_rss
from benchmarks.realcli import gateway_for, stub_setup
from tests.e2e.providers import CONFIGS

AGENTS = [name for name in CONFIGS if name.startswith("acp:")]
PROMPT = "Say hello"


def _events(client: httpx.Client, session: str) -> list[dict[str, Any]]:
    page = client.get(f"/v1/sessions/{session}/events", params={"after": 0, "limit": 1000})
    page.raise_for_status()
    events: list[dict[str, Any]] = page.json()["events"]
    return events


def one_run(provider: str, base: Path) -> dict[str, float]:
    with stub_setup(base) as setup:
        gateway = gateway_for(setup, provider).start(60.0)
        try:
            with gateway.client() as client:
                created = client.post("/v1/sessions", json={"workspace": str(setup.workspace)})
                created.raise_for_status()
                session = created.json()["id"]
                start = time.monotonic()
                client.post(
                    f"/v1/sessions/{session}/turns", json={"prompt": PROMPT}
                ).raise_for_status()
                ready = answered = None
                while answered is None:
                    if time.monotonic() - start > 120:
                        raise TimeoutError(f"{provider}: no answer in 120 s")
                    kinds = [e["type"] for e in _events(client, session)]
                    now = time.monotonic()
                    if ready is None and "session.thread_bound" in kinds:
                        ready = now
                    if {"turn.completed", "turn.failed"} & set(kinds):
                        if "turn.completed" not in kinds:
                            raise RuntimeError(f"{provider}: the turn failed: {kinds}")
                        answered = now
                    time.sleep(0.01)
                pid = client.get(f"/v1/sessions/{session}").json()["process"]["pid"]
                peak = 0
                for _ in range(10):
                    peak = max(peak, tree_rss([pid, *descendants(pid)]))
                    time.sleep(0.1)
                client.delete(f"/v1/sessions/{session}")
        finally:
            gateway.stop()
    assert ready is not None
    return {
        "ready_ms": (ready - start) * 1000,
        "first_answer_ms": (answered - start) * 1000,
        "rss_mib": peak / 2**20,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    unshare = shutil.which("unshare")
    if os.getuid() == 0 and not os.environ.get("ACP_BENCH_ISOLATED") and unshare:
        command = [sys.executable, "-m", "benchmarks.acp_sessions", *(argv or sys.argv[1:])]
        env = {**os.environ, "ACP_BENCH_ISOLATED": "1"}
        script = 'ip link set lo up && exec "$@"'
        argv_ = [unshare, "-n", "--", "sh", "-c", script, "sh", *command]
        os.execve(unshare, argv_, env)  # noqa: S606 (fixed programs, no shell input)
    results: dict[str, list[dict[str, float]]] = {}
    for provider in AGENTS:
        results[provider] = []
        for run in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="acp-bench-") as base:
                results[provider].append(one_run(provider, Path(base)))
            sys.stderr.write(f"{provider} run {run + 1}: {results[provider][-1]}\n")
    lines = [
        "| agent | session ready (ms, median) | first answer (ms, median) | tree RSS (MiB, max) |",
        "|---|---|---|---|",
    ]
    for provider, runs in results.items():
        ready = statistics.median(r["ready_ms"] for r in runs)
        answer = statistics.median(r["first_answer_ms"] for r in runs)
        rss = max(r["rss_mib"] for r in runs)
        lines.append(f"| `{provider}` | {ready:.0f} | {answer:.0f} | {rss:.0f} |")
    sys.stdout.write("\n".join(lines) + "\n")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
