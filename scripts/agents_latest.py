"""Try the newest release of every pinned agent against the contract suite (``make agents-latest``).

Installs the newest version of each package of agents/package.json into a scratch prefix (never
into agents/node_modules), runs tests/e2e/test_contract.py for each provider against those
installs (``AGENT_GATEWAY_AGENTS_DIR``), and prints per provider: the package, the pinned and
the newest version, pass/fail, the tests that failed, and for an ACP agent how its protocol
differs from the recorded traffic (tests/fixtures/acp): methods, update kinds, tool-call
statuses, stop reasons and permission option kinds it sent that the recording does not have,
and the other way round. Bumping a pin is then a lockfile change plus this report.

Needs the npm registry (to read and install the newest versions); the tests themselves run in
the private network namespace of scripts/run-tests.sh, as always.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.providers.catalog import CATALOG  # noqa: E402 (after the path is set)
from tests.e2e.providers import CONFIGS  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "acp"
CONTRACT = "tests/e2e/test_contract.py"


def newest(package: str) -> str:
    result = subprocess.run(
        ["npm", "view", package, "version"], capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def install(prefix: Path, versions: dict[str, str]) -> None:
    prefix.mkdir(parents=True, exist_ok=True)
    manifest = {"name": "agents-latest", "private": True, "dependencies": versions}
    (prefix / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    subprocess.run(
        ["npm", "install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=prefix,
        check=True,
    )


def contract_ids(provider: str) -> list[str]:
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", CONTRACT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in collected.stdout.splitlines() if line.endswith(f"[{provider}]")]


def run_contract(provider: str, modules: Path, trace: Path, report: Path) -> dict[str, str]:
    """Test id → "passed" or the first line of its failure."""
    trace.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "AGENT_GATEWAY_AGENTS_DIR": str(modules),
        "AGENT_GATEWAY_ACP_TRACE": str(trace),
    }
    ids = contract_ids(provider)
    subprocess.run(
        [str(ROOT / "scripts" / "run-tests.sh"), "-q", f"--junitxml={report}", *ids],
        cwd=ROOT,
        env=env,
        check=False,
    )
    results: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if failure is None:
            results[str(case.get("name"))] = "passed"
        else:
            results[str(case.get("name"))] = (failure.get("message") or "failed").splitlines()[0]
    return results


def shape(lines: Iterable[str]) -> set[str]:
    """What an ACP conversation is made of, in words: its methods, update kinds, tool-call
    statuses, stop reasons and permission option kinds."""
    found: set[str] = set()
    for line in lines:
        record = json.loads(line)
        message: dict[str, Any] = record.get("msg", {})
        method = message.get("method")
        raw = message.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if method:
            found.add(f"{record.get('dir')} {method}")
        update = params.get("update")
        if isinstance(update, dict):
            kind = update.get("sessionUpdate")
            found.add(f"update {kind}")
            if kind in ("tool_call", "tool_call_update") and update.get("status"):
                found.add(f"{kind} status {update['status']}")
        if method == "session/request_permission":
            kinds = sorted({o.get("kind") for o in params.get("options", [])})
            found.add(f"permission options {','.join(kinds)}")
        result = message.get("result")
        if isinstance(result, dict) and "stopReason" in result:
            found.add(f"stopReason {result['stopReason']}")
        if "error" in message and "id" in message:
            found.add(f"error code {message['error'].get('code')}")
    return found


def protocol_diff(member: str, trace: Path) -> tuple[set[str], set[str]]:
    def lines(paths: Iterable[Path]) -> Iterable[str]:
        for path in paths:
            yield from path.read_text().splitlines()

    recorded = shape(lines(FIXTURES.glob(f"acp-{member}-*.jsonl")))
    seen = shape(lines(trace.glob("*.jsonl")))
    return seen - recorded, recorded - seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefix", type=Path, help="scratch install prefix (default: temp)")
    parser.add_argument("--only", nargs="*", help="providers to try (default: all contracted)")
    args = parser.parse_args(argv)
    manifest = json.loads((ROOT / "agents" / "package.json").read_text())
    pins: dict[str, str] = manifest["dependencies"]
    prefix = args.prefix or Path(tempfile.mkdtemp(prefix="agents-latest-"))
    agents = {d.npm_package for d in CATALOG.values() if d.npm_package}
    # The runtimes (Node 22) stay at their pins: only the agents are tried newer.
    latest = {p: newest(p) if p in agents else pin for p, pin in pins.items()}
    print(f"installing the newest releases into {prefix}", flush=True)
    install(prefix, latest)
    providers = [p for p in (args.only or list(CONFIGS)) if p in CONFIGS]
    failed = False
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for provider in providers:
        package = CATALOG[provider].npm_package or "?"
        trace = prefix / "traces" / provider.replace(":", "-")
        results = run_contract(provider, prefix / "node_modules", trace, prefix / f"{provider}.xml")
        broken = {name: why for name, why in results.items() if why != "passed"}
        failed |= bool(broken) or not results
        verdict = (
            f"passed {len(results)}"
            if results and not broken
            else f"FAILED {len(broken)}/{len(results)}"
        )
        rows.append((provider, package, pins.get(package, "?"), latest.get(package, "?"), verdict))
        for name, why in broken.items():
            test = re.sub(r"\[.*\]$", "", name)
            notes.append(f"{provider}: {test}: {why}")
        if broken and provider.startswith("acp:"):
            new, gone = protocol_diff(provider.partition(":")[2], trace)
            notes += [f"{provider}: sends what the recording lacks: {x}" for x in sorted(new)]
            notes += [f"{provider}: no longer sends: {x}" for x in sorted(gone)]
    header = ("provider", "package", "pinned", "newest", "contract")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    for note in notes:
        print(f"- {note}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
