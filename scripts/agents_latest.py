"""Try the newest release of every pinned agent against the contract suite (``make agents-latest``).

The rows come from agents/package.json itself: one per pinned package and provider it serves
(``opencode-ai`` serves ``opencode`` and ``acp:opencode``), and one for a package no provider
names (a runtime such as Node 22), so no pin goes unreported. Installs the newest version of
each agent package into a scratch prefix (never into agents/node_modules; runtimes at their
pins, since the agents need them there), runs tests/e2e/test_contract.py for each provider the
suite has wiring for (tests/e2e/providers.py ``CONFIGS``) against those installs
(``AGENT_GATEWAY_AGENTS_DIR``), and prints per row: the package, the provider, the pinned and
the newest version, and pass/fail (or why it was not run: the ACP adapters of Claude Code,
Codex and OpenCode have no contract wiring; their mapping is checked on recorded traffic), the
tests that failed, and for an ACP agent how its protocol differs from the recorded traffic
(tests/fixtures/acp): methods, update kinds, tool-call statuses, stop reasons and permission
option kinds it sent that the recording does not have, and the other way round. Bumping a pin
is then a lockfile change plus this report. ``--list`` prints the rows and what would be run
for each, with nothing installed and no registry asked.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.providers.catalog import CATALOG  # noqa: E402 (after the path is set)
from app.providers.descriptor import ProviderDescriptor  # noqa: E402
from tests.e2e.providers import CONFIGS  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "acp"
CONTRACT = "tests/e2e/test_contract.py"
MANIFEST = ROOT / "agents" / "package.json"
NO_WIRING = "not run: no contract wiring (recorded traffic only, tests/unit/test_acp_updates.py)"
RUNTIME = "runtime: kept at its pin"


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    """One line of the report: a pinned package and one provider it serves (None: a runtime
    no provider names, installed at its pin for the agents that need it)."""

    package: str
    pinned: str
    provider: str | None
    contracted: bool
    """Whether the contract suite has wiring for the provider (so it can be tried)."""


def pins(manifest: Mapping[str, Any]) -> dict[str, str]:
    """Every pinned package of an agents/package.json: its dependencies, then its optional
    dependencies (the runtimes)."""
    return {**manifest.get("dependencies", {}), **manifest.get("optionalDependencies", {})}


def rows(
    manifest: Mapping[str, Any],
    catalog: Mapping[str, ProviderDescriptor] = CATALOG,
    configs: Iterable[str] = CONFIGS,
) -> list[Row]:
    """The report's rows, in package.json order: one per package and provider serving it,
    one for a package no provider serves. Derived from the manifest, so a new pin has a row
    without an edit here."""
    contracted = set(configs)
    found: list[Row] = []
    for package, pinned in pins(manifest).items():
        providers = [name for name, d in catalog.items() if d.npm_package == package]
        if not providers:
            found.append(Row(package=package, pinned=pinned, provider=None, contracted=False))
        found += [
            Row(package=package, pinned=pinned, provider=name, contracted=name in contracted)
            for name in providers
        ]
    return found


def newest(package: str) -> str:
    result = subprocess.run(
        ["npm", "view", package, "version"], capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def install(prefix: Path, versions: dict[str, str], runtimes: dict[str, str]) -> None:
    prefix.mkdir(parents=True, exist_ok=True)
    manifest = {
        "name": "agents-latest",
        "private": True,
        "dependencies": versions,
        # Where the pinned tree has them (Node 22 for Qwen Code and the Claude adapter), so
        # the agents find them under AGENT_GATEWAY_AGENTS_DIR as they do in agents/.
        "optionalDependencies": runtimes,
    }
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


def table(header: tuple[str, ...], lines: list[tuple[str, ...]]) -> None:
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    for line in [header, *lines]:
        cells = (cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        print("  ".join(cells).rstrip())


def listing(plan: list[Row]) -> None:
    """``--list``: the rows and what would be run for each; nothing installed or asked."""
    table(
        ("package", "provider", "pinned", "check"),
        [
            (
                row.package,
                row.provider or "-",
                row.pinned,
                CONTRACT if row.contracted else NO_WIRING if row.provider else RUNTIME,
            )
            for row in plan
        ],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefix", type=Path, help="scratch install prefix (default: temp)")
    parser.add_argument("--only", nargs="*", help="providers to try (default: every one)")
    parser.add_argument(
        "--list", action="store_true", help="print the rows and their checks, install nothing"
    )
    args = parser.parse_args(argv)
    plan = rows(json.loads(MANIFEST.read_text()))
    if args.only:
        plan = [row for row in plan if row.provider is None or row.provider in args.only]
    if args.list:
        listing(plan)
        return 0
    prefix = args.prefix or Path(tempfile.mkdtemp(prefix="agents-latest-"))
    # The runtimes (Node 22) stay at their pins: only the agents are tried newer.
    agents = dict.fromkeys(row.package for row in plan if row.provider is not None)
    latest = {package: newest(package) for package in agents}
    runtimes = {row.package: row.pinned for row in plan if row.provider is None}
    print(f"installing the newest releases into {prefix}", flush=True)
    install(prefix, latest, runtimes)
    failed = False
    lines: list[tuple[str, ...]] = []
    notes: list[str] = []
    for row in plan:
        provider = row.provider
        if provider is None or not row.contracted:
            verdict = NO_WIRING if provider else RUNTIME
            newer = latest.get(row.package, row.pinned)
            lines.append((row.package, provider or "-", row.pinned, newer, verdict))
            continue
        trace = prefix / "traces" / provider.replace(":", "-")
        results = run_contract(provider, prefix / "node_modules", trace, prefix / f"{provider}.xml")
        broken = {name: why for name, why in results.items() if why != "passed"}
        failed |= bool(broken) or not results
        verdict = (
            f"passed {len(results)}"
            if results and not broken
            else f"FAILED {len(broken)}/{len(results)}"
        )
        lines.append((row.package, provider, row.pinned, latest.get(row.package, "?"), verdict))
        for name, why in broken.items():
            test = re.sub(r"\[.*\]$", "", name)
            notes.append(f"{provider}: {test}: {why}")
        if broken and provider.startswith("acp:"):
            new, gone = protocol_diff(provider.partition(":")[2], trace)
            notes += [f"{provider}: sends what the recording lacks: {x}" for x in sorted(new)]
            notes += [f"{provider}: no longer sends: {x}" for x in sorted(gone)]
    table(("package", "provider", "pinned", "newest", "contract"), lines)
    for note in notes:
        print(f"- {note}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
