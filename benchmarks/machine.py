"""The machine a run happened on, and the versions that ran."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("fastapi", "uvicorn", "uvloop", "starlette", "sqlalchemy", "aiosqlite", "websockets")


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _ram_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 2**20, 1)
    return float("nan")


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "-"


def _git(*args: str) -> str:
    # Fixed git arguments; git from PATH, as a developer runs it.
    result = subprocess.run(  # noqa: S603
        ["git", *args],  # noqa: S607
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=10,
    )
    return result.stdout.strip()


def _clis() -> dict[str, str]:
    package = ROOT / "agents" / "package.json"
    if not package.exists():
        return {}
    dependencies: dict[str, str] = json.loads(package.read_text()).get("dependencies", {})
    return dependencies


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def describe() -> dict[str, Any]:
    dirty = bool(_git("status", "--porcelain", "--", "app"))
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": _ram_gib(),
        "kernel": platform.release(),
        "os": platform.platform(terse=True),
        "python": sys.version.split()[0],
        "packages": {name: _version(name) for name in PACKAGES},
        "clis": _clis(),
        "commit": _git("rev-parse", "--short", "HEAD")
        + (" + uncommitted app/ changes" if dirty else ""),
    }
