"""The TypeScript packages' own tests, run from the suite so `make test` covers them: the SDK's
(clients/typescript, node:test against real loopback HTTP servers, with the check that its
generated types and version follow docs/openapi.json) and the console's pure parts (console/:
how each agent's edits are read, diffs, the transcript's one-place-per-event folding)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.gateway import ROOT


@pytest.mark.parametrize("package", ["clients/typescript", "console"])
def test_the_package_passes_its_tests(package: str) -> None:
    directory: Path = ROOT / package
    npm = shutil.which("npm")
    if npm is None or not (directory / "node_modules" / ".package-lock.json").exists():
        pytest.fail(f"{package}'s npm packages are missing: run `make setup`")
    result = subprocess.run(
        [npm, "test", "--silent"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert re.search(r"^\S+ fail 0$", result.stdout, re.M), result.stdout[-3000:]
    assert not re.search(r"^\S+ pass 0$", result.stdout, re.M), "no test ran"
