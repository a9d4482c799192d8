"""The generated reference pages of the documentation site (scripts/gen_docs.py): committed
as generated, and complete: every setting described, every event type and operation shown."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import get_args

import pytest
from pydantic import BaseModel, Field

from app.events import EventType
from app.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import gen_docs
from docpages import configuration, events

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"


def test_the_committed_reference_pages_are_what_the_code_generates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert gen_docs.main(["--check"]) == 0, capsys.readouterr().err


def test_a_stale_page_is_found_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gen_docs.main(["--output", str(tmp_path)]) == 0
    page = tmp_path / "configuration.md"
    page.write_text(page.read_text().replace("`GATEWAY_SERVER__PORT`", "`GATEWAY_PORT`"))
    assert gen_docs.main(["--check", "--output", str(tmp_path)]) == 1
    assert "configuration.md" in capsys.readouterr().err


def test_every_setting_has_a_description_and_a_row() -> None:
    page = (REFERENCE / "configuration.md").read_text()
    rows = [row for _, _, section in configuration.settings_rows(Settings) for row in section]
    assert len(rows) > 140
    for row in rows:
        assert row.description, row.path
        assert f'<span id="{configuration.anchor(row.path)}"></span>`{row.path}`' in page
        if row.env is not None:
            assert f"`{row.env}`" in page


def test_an_undocumented_setting_stops_the_generator() -> None:
    class Quiet(BaseModel):
        """A section."""

        said: int = 1
        """Documented."""
        unsaid: int = Field(default=2, ge=0)

    class Top(BaseModel):
        quiet: Quiet = Quiet()

    with pytest.raises(configuration.Undocumented, match=r"quiet\.unsaid") as refused:
        configuration.settings_rows(Top)
    assert "quiet.said" not in str(refused.value)


def test_defaults_that_depend_on_the_machine_are_shown_as_their_rule() -> None:
    page = (REFERENCE / "configuration.md").read_text()
    assert str(Path.home()) not in page
    assert "`$XDG_DATA_HOME/agent-gateway`" in page


def test_every_event_type_has_its_section() -> None:
    page = (REFERENCE / "events.md").read_text()
    types = get_args(EventType)
    assert [name for name, _ in events.event_types()] == list(types)
    for name in types:
        assert f"### `{name}` {{#{name}}}" in page


def test_every_operation_and_schema_of_the_contract_is_on_the_api_page() -> None:
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    page = (REFERENCE / "api.md").read_text()
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            assert f"### `{method.upper()} {path}` {{#{operation['operationId']}}}" in page
    for name in document["components"]["schemas"]:
        assert f"{{#schema-{name.lower()}}}" in page
    assert "| 409 | `turn_in_progress` |" in page
