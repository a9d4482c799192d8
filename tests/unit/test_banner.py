"""The start-up block ``serve`` writes once it listens (app/banner.py), built from facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.banner import AgentState, Banner, late_line
from app.serve import program

TOKEN = "Op2HVLPll95JkvGVuYhqneOYgc2QWNcNEGTkcvcMlNo"
AGENTS = (
    AgentState(name="claude_code", ready=True, reason=None, version="2.1.3"),
    AgentState(
        name="codex", ready=False, reason="no credential: run `codex login`", needs_login=True
    ),
    AgentState(name="opencode", ready=None, reason=None),
    AgentState(name="acp:gemini", ready=False, reason="'gemini' was not found"),
)


def banner(**changes: object) -> Banner:
    facts: dict[str, object] = {
        "url": "http://127.0.0.1:8765",
        "source": "file",
        "token_file": "/data/token",
        "token_command": "agent-gateway token show",
        "agents": AGENTS,
        "version": "9.9.9",
    }
    return Banner(**{**facts, **changes})  # type: ignore[arg-type]


def test_the_block_names_the_console_the_token_each_agent_and_the_docs() -> None:
    assert banner().text().splitlines() == [
        "Agent Gateway 9.9.9 is ready.",
        "  Console  http://127.0.0.1:8765/console/ (sign in with the admin token)",
        "  Token    in /data/token; print it with: agent-gateway token show",
        "  Agents   claude_code  ready (2.1.3)",
        "           codex        needs login: no credential: run `codex login`",
        "           opencode     still being checked (the console and GET /v1/providers show "
        "the result)",
        "           acp:gemini   not ready: 'gemini' was not found",
        "  Docs     README.md and docs/ in the source; agent-gateway --help; API: GET "
        "/openapi.json",
        "Stop it with Ctrl-C.",
    ]


def test_a_token_made_just_now_is_in_the_block_only_when_given() -> None:
    made = banner(source="generated", token=TOKEN).text().splitlines()
    assert made[2:4] == [
        f"  Token    {TOKEN}",
        "           (new, saved in /data/token; print it with: agent-gateway token show)",
    ]
    assert TOKEN not in banner(source="generated").text()


def test_the_log_line_has_the_same_facts_and_never_the_token() -> None:
    shown = banner(source="configured", token=TOKEN)
    fields = shown.fields()
    assert TOKEN not in json.dumps(fields) + shown.summary()
    assert fields["console_url"] == "http://127.0.0.1:8765/console/"
    assert fields["token_file"] is None  # a configured token is in no file of ours
    assert fields["agents"]["codex"] == {
        "ready": False,
        "needs_login": True,
        "reason": "no credential: run `codex login`",
        "version": None,
    }
    assert shown.summary().endswith(
        "agents ready: claude_code; not ready: codex, acp:gemini; still being checked: opencode"
    )


def test_a_late_agent_gets_a_line_of_its_own() -> None:
    assert late_line(AGENTS[0]) == "Agent claude_code: ready (2.1.3)"
    assert late_line(AGENTS[1]) == "Agent codex: needs login: no credential: run `codex login`"


def test_the_command_to_print_the_token_is_the_one_that_runs_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed = tmp_path / "bin" / "agent-gateway"
    installed.parent.mkdir()
    installed.write_text("#!/bin/sh\n")
    installed.chmod(0o755)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert program(str(installed)) == str(installed)  # not on PATH: the path it was run by
    monkeypatch.setenv("PATH", str(installed.parent))
    assert program(str(installed)) == "agent-gateway"
    assert program("/src/app/__main__.py") == "agent-gateway"
