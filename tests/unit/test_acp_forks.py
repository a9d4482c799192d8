"""An ACP agent's own fork (``AgentRecipe.forks``): a whole thread, so only at the parent's
latest turn, with the parent's transcript copied into a sandboxed fork's home."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.process.runner import ProcessRunner
from app.providers.acp.provider import AcpProvider
from app.providers.base import ForkedThread, ForkFailed, ForkRequest, SessionSpec, ThreadFork
from app.providers.descriptor import BuildContext
from app.providers.sandboxing import Sandbox, SandboxStatus
from app.settings import ProviderSettings, RetrySettings


def adapter(name: str = "acp:claude", homes: Path | None = None) -> AcpProvider:
    status = SandboxStatus(mode="none" if homes is None else "bwrap", reason="test")
    return AcpProvider(
        BuildContext(
            name=name,
            settings=ProviderSettings(),
            executable="agent",
            runner=ProcessRunner(),
            parent_env={"PATH": "/usr/bin"},
            retry=RetrySettings(),
            sandbox=Sandbox(status=status, homes_dir=homes),
        )
    )


def request(workspace: Path, keep_turns: int, turns: int = 2) -> ForkRequest:
    def spec(session_id: str, thread_id: str | None) -> SessionSpec:
        return SessionSpec(
            session_id=session_id,
            workspace=workspace,
            model=None,
            approval_mode="ask",
            thread_id=thread_id,
        )

    return ForkRequest(
        parent=spec("ses_parent", "thread-1"),
        child=spec("ses_child", None),
        keep_turns=keep_turns,
        turns=turns,
    )


def test_only_the_agents_whose_fork_is_known_offer_one() -> None:
    assert adapter("acp:claude").capabilities.fork is True
    assert adapter("acp:gemini").capabilities.fork is False
    assert adapter("acp:my-agent").capabilities.fork is False


def test_a_fork_before_the_latest_turn_is_handed_over(tmp_path: Path) -> None:
    assert asyncio.run(adapter().fork_thread(request(tmp_path, keep_turns=1))) is None


def test_an_agent_without_a_known_fork_is_handed_over(tmp_path: Path) -> None:
    forked = asyncio.run(adapter("acp:gemini").fork_thread(request(tmp_path, keep_turns=2)))

    assert forked is None


def test_unsandboxed_the_agent_forks_the_thread_in_the_home_both_share(tmp_path: Path) -> None:
    forked = asyncio.run(adapter().fork_thread(request(tmp_path, keep_turns=2)))

    assert forked == ForkedThread(pending=ThreadFork(thread_id="thread-1", at=None))


def test_sandboxed_the_parents_transcript_is_copied_into_the_forks_home(tmp_path: Path) -> None:
    homes = tmp_path / "homes"
    project = homes / "ses_parent" / ".claude" / "projects" / "-work-repo"
    project.mkdir(parents=True)
    (project / "thread-1.jsonl").write_text('{"uuid":"a"}\n{"uuid":"b"}')

    forked = asyncio.run(adapter(homes=homes).fork_thread(request(tmp_path, keep_turns=2)))

    assert forked == ForkedThread(pending=ThreadFork(thread_id="thread-1", at=None))
    copy = homes / "ses_child" / ".claude" / "projects" / "-work-repo" / "thread-1.jsonl"
    assert copy.read_text() == '{"uuid":"a"}\n{"uuid":"b"}\n'
    assert copy.stat().st_mode & 0o777 == 0o600


def test_sandboxed_a_parent_without_its_transcript_cannot_be_forked(tmp_path: Path) -> None:
    homes = tmp_path / "homes"
    (homes / "ses_parent").mkdir(parents=True)

    with pytest.raises(ForkFailed, match="no transcript of thread thread-1"):
        asyncio.run(adapter(homes=homes).fork_thread(request(tmp_path, keep_turns=2)))
    assert not (homes / "ses_child").exists()
