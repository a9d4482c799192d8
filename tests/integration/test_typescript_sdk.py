"""The TypeScript SDK's own tests (clients/typescript, node:test against real loopback HTTP
servers), run from the suite so `make test` covers them; they include the check that the
generated types and the package version follow docs/openapi.json."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.gateway import ROOT

SDK = ROOT / "clients" / "typescript"


def test_the_typescript_sdk_passes_its_tests() -> None:
    npm = shutil.which("npm")
    if npm is None or not (SDK / "node_modules" / ".package-lock.json").exists():
        pytest.fail("the TypeScript SDK's packages are missing: run `make setup`")
    result = subprocess.run(
        [npm, "test", "--silent"],
        cwd=SDK,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert re.search(r"^\S+ fail 0$", result.stdout, re.M), result.stdout[-3000:]
