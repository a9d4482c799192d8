"""The pure parts of a fork: where Claude Code's transcript is cut, the fork's command line,
the hand-off a fork's first prompt is told, and the command's encoding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.providers.base import ForkFailed, SessionSpec, ThreadFork
from app.providers.claude.argv import build_argv
from app.providers.claude.forks import cut_point
from app.providers.transcripts import copy_transcript, find_transcript
from app.runtime.commands import Fork, decode, encode
from app.runtime.handoff import build_fork_handoff

# A real Claude Code 2.1.332 transcript of three turns ("first/second/third [[echo]]"), its
# request blobs left out.
TRANSCRIPT = Path(__file__).parent.parent / "fixtures" / "claude" / "transcript_three_turns.jsonl"


def entries() -> list[dict[str, object]]:
    return [json.loads(line) for line in TRANSCRIPT.read_text().splitlines()]


def test_the_cut_is_the_last_entry_before_the_next_prompt() -> None:
    lines = TRANSCRIPT.read_text().splitlines()
    prompts = [e for e in entries() if e.get("type") == "user"]
    assert [p["message"]["content"] for p in prompts] == [  # type: ignore[index]
        "first [[echo]]",
        "second [[echo]]",
        "third [[echo]]",
    ]
    assert cut_point(lines, 1) == prompts[1]["parentUuid"]
    assert cut_point(lines, 2) == prompts[2]["parentUuid"]
    assert cut_point(lines, 3) is None  # nothing after: the whole thread
    with pytest.raises(ForkFailed, match="3 prompts, fewer than the 4"):
        cut_point(lines, 4)


def test_a_copy_for_another_home_ends_at_the_cut(tmp_path: Path) -> None:
    lines = TRANSCRIPT.read_text().splitlines()
    source = tmp_path / "a" / "projects" / "-work-x" / "thread.jsonl"
    source.parent.mkdir(parents=True)
    source.write_text(TRANSCRIPT.read_text())
    cut = cut_point(lines, 1)

    copied = copy_transcript(source, tmp_path / "b", cut)

    assert find_transcript(tmp_path / "b", "thread") == copied
    kept = [json.loads(line) for line in copied.read_text().splitlines()]
    assert kept[-1]["uuid"] == cut
    assert "second [[echo]]" not in copied.read_text()
    assert copied.stat().st_mode & 0o777 == 0o600


def test_a_forks_first_process_forks_the_thread_at_the_cut() -> None:
    spec = SessionSpec(
        session_id="ses_1",
        workspace=Path("/w"),
        model=None,
        approval_mode="ask",
        fork_from=ThreadFork(thread_id="parent-thread", at="entry-uuid"),
    )
    argv = build_argv(executable="claude", spec=spec)
    assert argv[-3:] == [
        "--resume=parent-thread",
        "--fork-session",
        "--resume-session-at=entry-uuid",
    ]
    bound = build_argv(executable="claude", spec=SessionSpec(**{**vars(spec), "thread_id": "t"}))
    assert "--fork-session" not in bound
    assert "--resume=t" in bound


def test_a_forks_handoff_carries_the_turns_and_ends_at_now() -> None:
    events = [
        {"type": "turn.started", "turn_id": "t1", "data": {"prompt": "make it blue"}},
        {"type": "turn.completed", "turn_id": "t1", "data": {"final_text": "it is blue"}},
    ]
    handoff = build_fork_handoff(events, from_provider="codex", max_chars=10_000)
    assert handoff.turns == 1
    assert "(codex)" in handoff.prompt
    assert "## Turn 1\nUser: make it blue\nAgent: it is blue" in handoff.prompt
    assert handoff.prompt.endswith("## Now")
    assert build_fork_handoff(events, from_provider="codex", max_chars=50).prompt == ""


def test_fork_is_a_command_with_one_encoding() -> None:
    command = Fork(session_id="ses_1", at_turn="trn_1")
    assert decode(*encode(command)) == command
    assert decode(*encode(Fork(session_id="ses_1"))) == Fork(session_id="ses_1")
