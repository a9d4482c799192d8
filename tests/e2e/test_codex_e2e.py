"""Codex-specific behaviour through the running gateway (the provider contract, which Codex
passes too, is in test_contract.py): how the approval modes map onto Codex's policies."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import GatewayFactory
from tests.e2e.test_contract import SSE, create_session, run_turn, start_turn, types
from tests.gateway import SseReader, is_turn_end

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["system-bwrap", "no-bwrap"])
def codex_path(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The ``PATH`` Codex runs with: the gateway's own, on which Debian's ``bwrap`` must be
    found (Codex then runs its sandbox helper by name); or every program on it but ``bwrap``
    (Codex then uses the copy it bundles)."""
    path = os.environ.get("PATH", os.defpath)
    if request.param == "system-bwrap":
        if shutil.which("bwrap", path=path) is None:
            pytest.fail("bubblewrap is not installed (Debian: apt-get install bubblewrap)")
        return path
    programs = tmp_path / "programs-but-bwrap"
    programs.mkdir()
    for directory in reversed(path.split(os.pathsep)):  # the first on PATH wins
        for program in Path(directory).glob("*") if Path(directory).is_dir() else ():
            if program.name != "bwrap":
                (programs / program.name).unlink(missing_ok=True)
                (programs / program.name).symlink_to(program)
    assert shutil.which("bwrap", path=str(programs)) is None
    return str(programs)


@pytest.mark.parametrize("sandbox", ["none", "auto"])
def test_read_only_never_asks_and_auto_edits_still_asks_for_commands(
    make_gateway: GatewayFactory, workspace: Path, codex_path: str, sandbox: str
) -> None:
    # CODEX_HOME lies in the temporary directory (tests/e2e/providers.py): Codex makes no
    # helper links of its own there; the gateway's must do.
    gateway = make_gateway("codex", sandbox={"mode": sandbox})
    gateway.config["providers"]["codex"]["env"]["PATH"] = codex_path
    gateway.start()
    with gateway.client() as client:
        reader_only = create_session(client, workspace, approval_mode="read_only")
        events = run_turn(client, reader_only["id"], "[[tool:bash touch ro.txt]]")
        assert "approval.requested" not in types(events)
        assert events[-1]["type"] == "turn.completed", events[-1]
        assert "Read-only file system" in events[-1]["data"]["final_text"]
        assert not (workspace / "ro.txt").exists()

        editor = create_session(client, workspace, approval_mode="auto_edits")
        headers = {**SSE, "Last-Event-ID": str(editor["last_seq"])}
        with client.stream(
            "GET", f"/v1/sessions/{editor['id']}/events", headers=headers
        ) as response:
            reader = SseReader(response)
            start_turn(client, editor["id"], "[[tool:bash touch cmd.txt]]")
            asked = reader.until(lambda e: e["type"] == "approval.requested")[-1]["data"]
            assert asked["tool"] == "command"
            client.post(
                f"/v1/sessions/{editor['id']}/approvals/{asked['approval_id']}",
                json={"decision": "allow"},
            )
            assert reader.until(is_turn_end)[-1]["type"] == "turn.completed"
        assert (workspace / "cmd.txt").exists()
