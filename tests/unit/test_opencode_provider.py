"""The OpenCode provider against a fake ``opencode serve``: one shared server, threads,
approvals, interrupts, idle turns, crashes, restarts and a cut event stream."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from app.events import (
    MessageCompleted,
    MessageDelta,
    RetryScheduled,
    ToolCompleted,
    ToolStarted,
    Usage,
    UsageReported,
    Warning,
)
from app.process.runner import ProcessRunner
from app.providers.base import ApprovalAnswer, ApprovalRequest, SessionSpec, TurnOutcome
from app.providers.descriptor import BuildContext
from app.providers.opencode.provider import OpenCodeProvider
from app.providers.opencode.session import OpenCodeSession
from app.settings import ProviderSettings
from tests.fakes.hooks import RecordingHooks as Hooks

FAKE = Path(__file__).resolve().parent.parent / "fakes" / "fake_opencode_serve.py"
KNOBS = (
    "OPENCODE_DISABLE_AUTOUPDATE",
    "OPENCODE_DISABLE_MODELS_FETCH",
    "OPENCODE_DISABLE_SHARE",
    "OPENCODE_DISABLE_LSP_DOWNLOAD",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS",
)
FAKE_USAGE = Usage(
    input_tokens=12, output_tokens=9, cached_input_tokens=3, cache_creation_input_tokens=1,
    cost_usd=0.001,
)  # fmt: skip


@pytest.fixture
def executable(tmp_path: Path) -> Path:
    # The fake needs this interpreter's packages (starlette, uvicorn), whatever is on PATH.
    path = tmp_path / "opencode"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    path.chmod(0o755)
    return path


@pytest.fixture
async def runner() -> AsyncIterator[ProcessRunner]:
    runner = ProcessRunner()
    yield runner
    await runner.aclose(grace_s=1)


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "fake.log"


ProviderFactory = Callable[..., OpenCodeProvider]


@pytest.fixture
async def make_provider(
    runner: ProcessRunner, log_path: Path, tmp_path: Path, executable: Path
) -> AsyncIterator[ProviderFactory]:
    made: list[OpenCodeProvider] = []

    def make(env: dict[str, str] | None = None, **settings: Any) -> OpenCodeProvider:
        values: dict[str, Any] = {
            "startup_timeout_s": 20,
            "stop_grace_s": 2,
            "interrupt_grace_s": 5,
            "env": {
                "FAKE_OPENCODE_LOG": str(log_path),
                "XDG_DATA_HOME": str(tmp_path / "data"),
                **(env or {}),
            },
            **settings,
        }
        provider = OpenCodeProvider(
            BuildContext(
                name="opencode",
                settings=ProviderSettings(**values),
                executable=str(executable),
                runner=runner,
                parent_env={"PATH": os.environ["PATH"], "OPENAI_API_KEY": "sk-x", "SECRET": "no"},
            )
        )
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.aclose()


@pytest.fixture
def provider(make_provider: ProviderFactory) -> OpenCodeProvider:
    return make_provider()


def open_session(
    provider: OpenCodeProvider,
    tmp_path: Path,
    *,
    name: str = "s1",
    thread_id: str | None = None,
    model: str | None = "stub/stub-model",
) -> OpenCodeSession:
    workspace = tmp_path / "workspaces" / name
    workspace.mkdir(parents=True, exist_ok=True)
    return provider.open_session(
        SessionSpec(
            session_id=name,
            workspace=workspace,
            model=model,
            approval_mode="ask",
            thread_id=thread_id,
        )
    )


def log_lines(log_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log_path.read_text().splitlines()]


def requests(log_path: Path, method: str, path_end: str) -> list[dict[str, Any]]:
    return [
        line
        for line in log_lines(log_path)
        if line.get("method") == method and line["path"].endswith(path_end)
    ]


def spawns(log_path: Path) -> list[dict[str, Any]]:
    return [line for line in log_lines(log_path) if "argv" in line]


def error_of(outcome: TurnOutcome) -> tuple[str, bool]:
    assert outcome.error is not None, outcome
    return outcome.error.kind, outcome.error.retryable


# --- one server, many sessions -----------------------------------------------------------------


async def test_one_server_serves_every_session_each_on_its_own_thread(
    provider: OpenCodeProvider, tmp_path: Path, log_path: Path
) -> None:
    first, second = open_session(provider, tmp_path), open_session(provider, tmp_path, name="s2")
    assert first.process is None  # nothing is spawned before the first turn
    hooks_a, hooks_b = Hooks(), Hooks()
    a, b = await asyncio.gather(
        first.run_turn("Say hello", hooks_a), second.run_turn("Say hello", hooks_b)
    )
    for outcome, hooks in ((a, hooks_a), (b, hooks_b)):
        assert outcome.status == "completed", outcome
        assert outcome.final_text == "Hello from fake."
        assert outcome.usage == FAKE_USAGE
        assert outcome.stop_reason == "stop"
        assert [d.text for d in hooks.of(MessageDelta)] == ["Hello", " from", " fake."]
        assert [c.text for c in hooks.of(MessageCompleted)] == ["Hello from fake."]
        assert hooks.of(UsageReported) == [UsageReported(usage=FAKE_USAGE)]
    assert hooks_a.threads != hooks_b.threads
    assert [first.thread_id, second.thread_id] == [*hooks_a.threads, *hooks_b.threads]
    assert len(spawns(log_path)) == 1
    assert provider.server_pid is not None
    assert first.process is not None
    assert second.process is not None
    assert first.process.pid == second.process.pid == provider.server_pid
    assert first.process.spawns == 1

    again = Hooks()
    assert (await first.run_turn("[[echo]]", again)).final_text == "Echo: 2"
    assert again.threads == []  # same thread, nothing to bind
    assert len(requests(log_path, "POST", "/session")) == 2  # one thread per session


async def test_the_server_runs_on_loopback_with_a_password_and_hermetic_settings(
    make_provider: ProviderFactory, tmp_path: Path, log_path: Path
) -> None:
    provider = make_provider(
        config={"model": "stub/stub-model", "share": "auto"},
        env={"OPENCODE_DISABLE_SHARE": "0"},
        extra_args=["--print-logs"],
    )
    assert await provider.ping() is None
    (spawn,) = spawns(log_path)
    argv, env = spawn["argv"], spawn["env"]
    assert argv[1:5] == ["serve", "--hostname", "127.0.0.1", "--port"]
    assert argv[-1] == "--print-logs"
    assert all(env[knob] == "1" for knob in KNOBS)  # the knobs win over the operator's env
    assert env["OPENCODE_DISABLE_PROJECT_CONFIG"] == "1"
    assert len(env["OPENCODE_SERVER_PASSWORD"]) >= 32
    config = json.loads(env["OPENCODE_CONFIG_CONTENT"])
    assert config == {"model": "stub/stub-model", "share": "disabled", "autoupdate": False}
    assert env["OPENAI_API_KEY"] == "sk-x"
    assert "SECRET" not in env


async def test_a_thread_is_created_in_its_workspace_with_the_modes_ruleset_and_a_title(
    provider: OpenCodeProvider, tmp_path: Path, log_path: Path
) -> None:
    session = open_session(provider, tmp_path)
    await session.run_turn("Say hello", Hooks())
    (created,) = requests(log_path, "POST", "/session")
    workspace = str(tmp_path / "workspaces" / "s1")
    assert created["query"] == f"directory={workspace.replace('/', '%2F')}"
    assert created["body"]["title"] == "Agent Gateway s1"
    rules = {r["permission"]: r["action"] for r in created["body"]["permission"]}
    assert rules["bash"] == rules["edit"] == "ask"
    (prompt,) = requests(log_path, "POST", "/prompt_async")
    assert prompt["query"] == created["query"]
    assert prompt["body"] == {
        "parts": [{"type": "text", "text": "Say hello"}],
        "model": {"providerID": "stub", "modelID": "stub-model"},
    }


async def test_a_model_without_a_provider_is_left_to_the_server_with_a_warning(
    provider: OpenCodeProvider, tmp_path: Path, log_path: Path
) -> None:
    session = open_session(provider, tmp_path, model="gpt-5")
    hooks = Hooks()
    assert (await session.run_turn("Say hello", hooks)).status == "completed"
    assert [w.code for w in hooks.of(Warning)] == ["model_ignored"]
    (prompt,) = requests(log_path, "POST", "/prompt_async")
    assert "model" not in prompt["body"]


# --- approvals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "reply", "status", "said"),
    [
        (ApprovalAnswer(decision="allow"), {"reply": "once"}, "completed", "ran: touch x"),
        (ApprovalAnswer(decision="allow_session"), {"reply": "always"}, "completed", "ran:"),
        (
            ApprovalAnswer(decision="deny", message="not here"),
            {"reply": "reject", "message": "not here"},
            "denied",
            "feedback: not here",
        ),
    ],
)
async def test_an_approval_answer_reaches_opencode_and_decides_the_tool(
    provider: OpenCodeProvider,
    tmp_path: Path,
    log_path: Path,
    answer: ApprovalAnswer,
    reply: dict[str, str],
    status: str,
    said: str,
) -> None:
    session = open_session(provider, tmp_path)
    hooks = Hooks(answer)
    outcome = await session.run_turn("[[tool:touch x]]", hooks)
    assert outcome.status == "completed", outcome
    (request,) = hooks.approvals
    assert request.tool == "bash"
    assert request.input == {"command": "touch x", "patterns": ["touch x"]}
    assert request.options == ("allow", "deny", "allow_session")
    (started,) = hooks.of(ToolStarted)
    assert (started.name, started.kind, started.input) == (
        "bash",
        "command",
        {"command": "touch x"},
    )
    assert request.tool_id == started.tool_id
    (completed,) = hooks.of(ToolCompleted)
    assert (completed.tool_id, completed.status) == (started.tool_id, status)
    assert said in outcome.final_text
    (sent,) = requests(log_path, "POST", "/reply")
    assert sent["path"] == f"/permission/{request.request_id}/reply"
    assert sent["body"] == reply


async def test_a_permission_answered_elsewhere_withdraws_the_approval(
    provider: OpenCodeProvider, tmp_path: Path, log_path: Path
) -> None:
    session = open_session(provider, tmp_path)
    hooks = Hooks()  # never answers
    outcome = await session.run_turn("[[withdraw:touch y]]", hooks)
    assert outcome.status == "completed", outcome
    assert hooks.withdrawn == [hooks.approvals[0].request_id]
    assert requests(log_path, "POST", "/reply") == []


# --- interrupts and timeouts -------------------------------------------------------------------


async def test_interrupt_aborts_the_turn_and_the_next_turn_is_not_confused_by_stragglers(
    provider: OpenCodeProvider, tmp_path: Path, log_path: Path
) -> None:
    session = open_session(provider, tmp_path)
    hooks = Hooks()
    turn = asyncio.create_task(session.run_turn("[[slow]]", hooks))
    await hooks.streaming.wait()
    await session.interrupt()
    outcome = await turn
    assert outcome.status == "interrupted", outcome
    assert error_of(outcome) == ("interrupted", False)
    (completed,) = hooks.of(MessageCompleted)  # what streamed before the abort
    assert completed.text.startswith("tick 1 ")
    assert len(requests(log_path, "POST", "/abort")) == 1
    # The abort's second session.idle must not end the next turn early.
    after = await session.run_turn("[[echo]]", Hooks())
    assert (after.status, after.final_text) == ("completed", "Echo: 2")


async def test_an_abort_opencode_does_not_confirm_ends_the_turn_after_the_grace(
    make_provider: ProviderFactory, tmp_path: Path, log_path: Path
) -> None:
    session = open_session(make_provider(interrupt_grace_s=0.3), tmp_path)
    hooks = Hooks()
    turn = asyncio.create_task(session.run_turn("[[stubborn]]", hooks))
    await hooks.streaming.wait()
    await session.interrupt()
    outcome = await turn
    assert outcome.status == "interrupted"
    assert outcome.error is not None
    assert "did not confirm" in outcome.error.message
    assert len(requests(log_path, "POST", "/abort")) == 1


async def test_a_cancelled_turn_aborts_its_thread(
    provider: OpenCodeProvider, tmp_path: Path, log_path: Path
) -> None:
    session = open_session(provider, tmp_path)
    hooks = Hooks()
    turn = asyncio.create_task(session.run_turn("[[slow]]", hooks))
    await hooks.streaming.wait()
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    assert len(requests(log_path, "POST", "/abort")) == 1


async def test_a_silent_turn_fails_as_idle_timeout_and_is_aborted(
    make_provider: ProviderFactory, tmp_path: Path, log_path: Path
) -> None:
    session = open_session(make_provider(turn_idle_timeout_s=0.5), tmp_path)
    outcome = await session.run_turn("[[hang]]", Hooks())
    assert error_of(outcome) == ("idle_timeout", True)
    assert len(requests(log_path, "POST", "/abort")) == 1


async def test_the_idle_watchdog_waits_while_an_approval_is_pending(
    make_provider: ProviderFactory, tmp_path: Path
) -> None:
    # The timeout is long enough for the fake server's own steps on a loaded machine; the
    # person thinks for well over two of them.
    session = open_session(make_provider(turn_idle_timeout_s=1.0), tmp_path)

    class SlowHuman(Hooks):
        async def request_approval(self, request: ApprovalRequest) -> ApprovalAnswer:
            await asyncio.sleep(2.5)  # the scenario: a person thinks longer than the timeout
            return ApprovalAnswer(decision="allow")

    outcome = await session.run_turn("[[tool:touch z]]", SlowHuman())
    assert outcome.status == "completed", outcome


# --- failures, restarts, recovery --------------------------------------------------------------


async def test_server_death_fails_the_turn_and_the_next_turn_continues_the_thread(
    provider: OpenCodeProvider, tmp_path: Path, log_path: Path
) -> None:
    session = open_session(provider, tmp_path)
    assert (await session.run_turn("Say hello", Hooks())).status == "completed"
    first_pid, thread = provider.server_pid, session.thread_id
    died = await session.run_turn("[[die]]", Hooks())
    assert error_of(died) == ("cli_crashed", True)
    assert died.error is not None
    assert died.error.exit_code == 3
    assert "simulated crash" in (died.error.stderr_tail or "")
    hooks = Hooks()
    again = await session.run_turn("[[echo]]", hooks)
    assert (again.status, again.final_text) == ("completed", "Echo: 3")
    assert session.thread_id == thread
    assert hooks.threads == []
    assert provider.server_pid not in (None, first_pid)
    assert session.process is not None
    assert session.process.spawns == 2


async def test_a_server_killed_between_turns_is_replaced_and_the_turn_succeeds(
    provider: OpenCodeProvider, tmp_path: Path
) -> None:
    session = open_session(provider, tmp_path)
    assert (await session.run_turn("Say hello", Hooks())).status == "completed"
    pid = provider.server_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    outcome = await session.run_turn("[[echo]]", Hooks())  # at once: the death is not seen yet
    assert (outcome.status, outcome.final_text) == ("completed", "Echo: 2")
    assert provider.server_pid not in (None, pid)


async def test_a_restarted_gateway_prompts_the_bound_thread_without_creating_one(
    make_provider: ProviderFactory, tmp_path: Path, log_path: Path
) -> None:
    before = make_provider()
    session = open_session(before, tmp_path)
    await session.run_turn("Say hello", Hooks())
    await before.aclose()
    assert before.server_pid is None
    after = make_provider()
    resumed = open_session(after, tmp_path, thread_id=session.thread_id)
    outcome = await resumed.run_turn("[[echo]]", Hooks())
    assert (outcome.status, outcome.final_text) == ("completed", "Echo: 2")
    assert len(requests(log_path, "POST", "/session")) == 1


async def test_a_thread_opencode_no_longer_knows_is_context_lost_then_replaced(
    provider: OpenCodeProvider, tmp_path: Path
) -> None:
    session = open_session(provider, tmp_path, thread_id="ses_gone")
    outcome = await session.run_turn("Say hello", Hooks())
    assert error_of(outcome) == ("context_lost", False)
    assert session.thread_id is None
    hooks = Hooks()
    assert (await session.run_turn("Say hello", hooks)).status == "completed"
    assert hooks.threads == [session.thread_id]


async def test_a_cut_event_stream_is_reconnected_and_the_turn_still_ends(
    provider: OpenCodeProvider, tmp_path: Path
) -> None:
    session = open_session(provider, tmp_path)
    hooks = Hooks()
    outcome = await session.run_turn("[[drop]]", hooks)
    assert (outcome.status, outcome.final_text) == ("completed", "Hello from fake."), outcome
    assert [w.code for w in hooks.of(Warning)] == ["event_stream_gap"]
    assert (await session.run_turn("[[echo]]", Hooks())).final_text == "Echo: 2"


async def test_a_retry_notice_and_a_model_api_error_are_classified(
    provider: OpenCodeProvider, tmp_path: Path
) -> None:
    session = open_session(provider, tmp_path)
    hooks = Hooks()
    assert (await session.run_turn("[[retry]]", hooks)).status == "completed"
    (retry,) = hooks.of(RetryScheduled)
    assert (retry.source, retry.attempt, retry.kind) == ("cli", 1, "overloaded")
    assert retry.delay_s is not None
    assert 0 <= retry.delay_s <= 0.5
    failed = await session.run_turn("[[error:401]]", Hooks())
    assert failed.status == "failed"
    assert error_of(failed) == ("auth", False)


async def test_a_server_that_cannot_start_is_reported_with_its_stderr(
    make_provider: ProviderFactory, tmp_path: Path
) -> None:
    provider = make_provider(env={"FAKE_OPENCODE_START": "exit"})
    reason = await provider.ping()
    assert reason is not None
    assert "refusing to start" in reason
    outcome = await open_session(provider, tmp_path).run_turn("Say hello", Hooks())
    assert error_of(outcome) == ("cli_crashed", True)


async def test_a_missing_executable_is_cli_missing(runner: ProcessRunner, tmp_path: Path) -> None:
    provider = OpenCodeProvider(
        BuildContext(
            name="opencode",
            settings=ProviderSettings(),
            executable=str(tmp_path / "nope"),
            runner=runner,
        )
    )
    outcome = await open_session(provider, tmp_path).run_turn("Say hello", Hooks())
    assert error_of(outcome) == ("cli_missing", False)
    await provider.aclose()


async def test_suspend_releases_the_session_not_the_shared_server(
    provider: OpenCodeProvider, tmp_path: Path
) -> None:
    session, other = open_session(provider, tmp_path), open_session(provider, tmp_path, name="b")
    await asyncio.gather(session.run_turn("hi", Hooks()), other.run_turn("hi", Hooks()))
    await session.suspend()
    assert session.process is None
    assert other.process is not None
    assert other.process.pid == provider.server_pid
    assert (await session.run_turn("[[echo]]", Hooks())).final_text == "Echo: 2"
    assert session.process is not None


async def test_aclose_stops_the_server(
    provider: OpenCodeProvider, runner: ProcessRunner, tmp_path: Path
) -> None:
    assert await provider.ping() is None
    pid = provider.server_pid
    assert pid is not None
    await provider.aclose()
    assert provider.server_pid is None
    assert runner.live == ()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert await provider.ping() is not None
