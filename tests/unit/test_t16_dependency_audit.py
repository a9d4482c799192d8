"""T16: a known-vulnerable dependency fails the build; the floors keep resolution above them."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "audit_deps.py"

sys.path.insert(0, str(SCRIPT.parent))
import audit_deps  # noqa: E402


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_t16_installed_runtime_dependencies_have_no_known_advisory() -> None:
    result = _run()
    assert result.returncode == 0, result.stdout + result.stderr
    closure = audit_deps.runtime_closure()
    # The closure is the shipped stack, extras included (uvicorn[standard] brings httptools).
    for name in ("fastapi", "starlette", "uvicorn", "h11", "httptools", "sqlalchemy"):
        assert name in closure
    assert "pytest" not in closure  # dev tools are not shipped


def test_t16_known_vulnerable_pin_fails_the_audit() -> None:
    result = _run("--pins", "starlette==0.39.2", "h11==0.14.0", "fastapi==0.165.0")
    assert result.returncode == 1
    flagged = [line for line in result.stdout.splitlines() if line.startswith("VULNERABLE")]
    assert any("starlette 0.39.2: GHSA-f96h-pmfr-66vw" in line for line in flagged)
    assert any("h11 0.14.0: GHSA-vqfr-h8mv-ghfj" in line for line in flagged)
    assert not any(line.startswith("VULNERABLE fastapi") for line in flagged)


def test_t16_floors_are_above_every_advisory_of_the_http_stack() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floors: dict[str, Version] = {}
    for raw in project["dependencies"]:
        requirement = Requirement(raw)
        for spec in requirement.specifier:
            if spec.operator == ">=":
                floors[canonicalize_name(requirement.name)] = Version(spec.version)
    for name in ("starlette", "fastapi", "uvicorn", "h11", "protobuf", "requests", "urllib3"):
        assert name in floors, f"pyproject.toml must set a floor for {name}"
        hits = audit_deps.audit({name: str(floors[name])}, audit_deps.load_advisories())
        assert hits == [], f"the floor of {name} still admits {hits}"
