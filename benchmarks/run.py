"""Run the benchmarks and write docs/benchmarks.{json,md,png}.

    python -m benchmarks.run [--quick] [--only NAME ...] [--out DIR]

Each benchmark starts its own gateway (``python -m app serve`` on loopback, a fresh SQLite
file) and measures a floor in the same run; see docs/benchmarks.md for what each measures.
As root it re-runs itself in a private network namespace with only loopback up (``unshare -n``,
as ``scripts/run-tests.sh`` runs the tests), so no packet of a run can leave 127.0.0.1;
elsewhere it says so and runs in the current namespace.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import machine, report
from benchmarks.settings import RunConfig

BENCHMARKS = (
    "throughput",
    "latency",
    "fanout",
    "turns",
    "memory",
    "persistence",
    "spawn",
    "replay",
    "slow_consumer",
    "soak",
    "replicas",
    "peer",
    "coalescing",
    "snapshots",
    "acp_latency",
    "tracing",
    "webhooks",
)
"""In run order; ``persistence`` reuses the floor that ``throughput`` measured."""


ISOLATED = "AGENT_GATEWAY_BENCH_ISOLATED"
"""Set in the environment of the run re-executed in its own network namespace."""


def say(message: str) -> None:
    sys.stderr.write(f"[bench] {message}\n")
    sys.stderr.flush()


def _unshare() -> str | None:
    """``unshare``'s path if this process can make a network namespace: root, ``unshare`` and
    ``ip`` there, and a trial namespace made (root in a container may still lack the right)."""
    unshare = shutil.which("unshare")
    if os.getuid() != 0 or unshare is None or shutil.which("ip") is None:
        return None
    trial = subprocess.run([unshare, "-n", "true"], capture_output=True, check=False)  # noqa: S603 (a fixed program)
    return unshare if trial.returncode == 0 else None


def isolate(argv: list[str]) -> None:
    """Replace this process with the same run inside a private network namespace whose only
    interface is loopback (up); return, to run here, once inside it or when none can be made."""
    if os.environ.get(ISOLATED):
        return
    unshare = _unshare()
    if unshare is None:
        say(
            "warning: no private network namespace here (needs root, unshare and ip); "
            "running in the current one"
        )
        return
    command = [sys.executable, "-m", "benchmarks.run", *argv]
    script = 'ip link set lo up && exec "$@"'
    env = {**os.environ, ISOLATED: "1"}
    os.execve(unshare, [unshare, "-n", "--", "sh", "-c", script, "sh", *command], env)  # noqa: S606 (fixed programs, no shell input)


async def run_all(names: list[str], config: RunConfig) -> dict[str, Any]:
    sections: dict[str, Any] = {}
    for name in names:
        say(f"{name} …")
        started = time.monotonic()
        module = importlib.import_module(f"benchmarks.{name}")
        try:
            section = await module.run(config)
        except Exception:  # one broken benchmark must not lose the others
            sections[name] = {"name": name, "error": traceback.format_exc()}
            say(sections[name]["error"])
            continue
        section.seconds = round(time.monotonic() - started, 1)
        sections[name] = section.as_json()
        say(f"{name} done in {section.seconds} s")
    return sections


def merged(previous: dict[str, Any], rerun: dict[str, Any]) -> dict[str, Any]:
    """``previous`` with the sections of ``rerun`` in place of its own, each saying when and
    under what load it was run again."""
    for name, section in rerun["benchmarks"].items():
        note = (
            f"Run again on its own (`{rerun['command']} --merge`) at {rerun['started_at']}, "
            f"load {rerun['load_start']} → {rerun['load_end']}."
        )
        section.setdefault("notes", []).append(note)
        previous["benchmarks"][name] = section
    order = [n for n in BENCHMARKS if n in previous["benchmarks"]]
    previous["benchmarks"] = {n: previous["benchmarks"][n] for n in order}
    return previous


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller counts (about 2 minutes)")
    parser.add_argument(
        "--only", nargs="+", choices=BENCHMARKS, metavar="NAME", help=", ".join(BENCHMARKS)
    )
    parser.add_argument("--out", type=Path, default=machine.ROOT / "docs", help="where to write")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="replace only these benchmarks' sections in the existing results (noted in them)",
    )
    args = parser.parse_args(argv)
    isolate(sys.argv[1:] if argv is None else argv)
    names = [n for n in BENCHMARKS if not args.only or n in args.only]
    command = "python -m benchmarks.run" + (" --quick" if args.quick else "")
    if args.only:
        command += " --only " + " ".join(args.only)
    results: dict[str, Any] = {
        "command": command,
        "quick": args.quick,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_start": machine.load(),
        "machine": machine.describe(),
        "network": "private namespace, loopback only"
        if os.environ.get(ISOLATED)
        else "the machine's own (not isolated)",
    }
    started = time.monotonic()
    runner = asyncio.run
    try:
        import uvloop  # noqa: PLC0415 - the clients run on uvloop when it is there, like uvicorn

        runner = uvloop.run
        results["client_loop"] = "uvloop"
    except ImportError:
        results["client_loop"] = "asyncio"
    results["benchmarks"] = runner(run_all(names, RunConfig(quick=args.quick)))
    results["load_end"] = machine.load()
    results["seconds"] = round(time.monotonic() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    existing = args.out / "benchmarks.json"
    if args.merge and existing.exists():
        results = merged(json.loads(existing.read_text()), results)
    (args.out / "benchmarks.json").write_text(json.dumps(results, indent=1) + "\n")
    report.write(args.out)
    say(f"wrote {args.out}/benchmarks.{{json,md,png}} in {results['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
