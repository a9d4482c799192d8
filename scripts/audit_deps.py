#!/usr/bin/env python3
"""Fail when a runtime dependency of the gateway has a known vulnerability.

The check is offline, so it runs inside the loopback-only test run: it walks the installed
dependency closure of ``agent-gateway`` (what the service ships, not the dev tools) and
matches every version against ``security/advisories.json`` (OSV ranges from the PyPA and
GitHub advisory databases). ``--pins name==version ...`` checks the given pins instead of the
installed packages. ``--online`` runs ``pip-audit`` against PyPI's live advisory data
(needs network access to pypi.org, so it is for operators and release builds, not CI here).

Exit status: 0 clean, 1 a known advisory matches, 2 usage or data error.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parent.parent
ADVISORIES = ROOT / "security" / "advisories.json"


@dataclass(frozen=True)
class Finding:
    package: str
    version: str
    advisory: str
    aliases: tuple[str, ...]
    summary: str

    def __str__(self) -> str:
        aliases = f" ({', '.join(self.aliases)})" if self.aliases else ""
        return f"{self.package} {self.version}: {self.advisory}{aliases}: {self.summary}"


def runtime_closure(root: str = "agent-gateway") -> dict[str, str]:
    """Installed name → version for ``root`` and everything it needs, extras it asks for too."""
    found: dict[str, str] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    pending: list[tuple[str, frozenset[str]]] = [(canonicalize_name(root), frozenset())]
    while pending:
        name, extras = pending.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a dependency for another platform or Python
        found[name] = dist.version
        for raw in dist.requires or []:
            requirement = Requirement(raw)
            marker = requirement.marker
            if marker is not None and not any(
                marker.evaluate({"extra": extra}) for extra in {"", *extras}
            ):
                continue
            pending.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    found.pop(canonicalize_name(root), None)
    return found


def _in_range(version: Version, bounds: Mapping[str, str]) -> bool:
    introduced = bounds.get("introduced", "0")
    if introduced != "0" and version < Version(introduced):
        return False
    if "fixed" in bounds:
        return version < Version(bounds["fixed"])
    if "last_affected" in bounds:
        return version <= Version(bounds["last_affected"])
    return True


def load_advisories(path: Path = ADVISORIES) -> list[dict[str, Any]]:
    advisories: list[dict[str, Any]] = json.loads(path.read_text())["advisories"]
    return advisories


def audit(packages: Mapping[str, str], advisories: Iterable[Mapping[str, Any]]) -> list[Finding]:
    """Every advisory whose affected ranges contain an installed version."""
    findings = []
    for advisory in advisories:
        name = canonicalize_name(advisory["package"])
        if name not in packages:
            continue
        try:
            version = Version(packages[name])
        except InvalidVersion:
            continue
        if any(_in_range(version, bounds) for bounds in advisory["ranges"]):
            findings.append(
                Finding(
                    package=name,
                    version=packages[name],
                    advisory=advisory["id"],
                    aliases=tuple(advisory.get("aliases", ())),
                    summary=advisory.get("summary", ""),
                )
            )
    return findings


def _parse_pins(pins: Iterable[str]) -> dict[str, str]:
    parsed: dict[str, str] = {}
    for pin in pins:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==([A-Za-z0-9_.+!-]+)", pin.strip())
        if match is None:
            raise SystemExit(f"audit_deps: {pin!r} is not name==version")
        parsed[canonicalize_name(match[1])] = match[2]
    return parsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pins", nargs="+", metavar="NAME==VERSION", help="check these pins")
    parser.add_argument("--online", action="store_true", help="also run pip-audit (network)")
    args = parser.parse_args(argv)
    packages = _parse_pins(args.pins) if args.pins else runtime_closure()
    findings = audit(packages, load_advisories())
    for finding in findings:
        print(f"VULNERABLE {finding}")
    checked = ", ".join(f"{n} {v}" for n, v in sorted(packages.items()))
    print(f"audit_deps: {len(packages)} packages checked offline ({checked})")
    status = 1 if findings else 0
    if args.online:
        requirements = "\n".join(f"{n}=={v}" for n, v in sorted(packages.items()))
        online = subprocess.run(  # a fixed argv; the requirements go on stdin
            [sys.executable, "-m", "pip_audit", "--requirement", "/dev/stdin", "--no-deps"],
            input=requirements,
            text=True,
            check=False,
        )
        status = max(status, 1 if online.returncode else 0)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
