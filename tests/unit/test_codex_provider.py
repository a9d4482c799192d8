"""The Codex provider against a fake app-server: one shared process, threads, approvals,
interrupts, crashes and restarts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from app.events import RetryScheduled, ToolCompleted, ToolStarted
from app.process.runner import ProcessRunner
from app.providers.base import ApprovalAnswer, ApprovalRequest, SessionSpec, TurnOutcome
from app.providers.codex.argv import thread_config
from app.providers.codex.provider import CodexProvider
from app.providers.codex.session import CodexSession
from app.providers.descriptor import BuildContext
from app.settings import ConfigError, ProviderSettings
from tests.fakes.hooks import RecordingHooks as Hooks

FAKE = Path(__file__).resolve().parent.parent / "fakes" / "fake_codex_app_server.py"


@pytest.fixture
async def runner() -> AsyncIterator[ProcessRunner]:
    runner = ProcessRunner()
    yield runner
    await runner.aclose(grace_s=1)


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "fake.log"


ProviderFactory = Callable[..., CodexProvider]


@pytest.fixture
async def make_provider(runner: ProcessRunner, log_path: Path) -> AsyncIterator[ProviderFactory]:
    made: list[CodexProvider] = []

    def make(
        executable: Path = FAKE, env: dict[str, str] | None = None, **settings: Any
    ) -> CodexProvider:
        values: dict[str, Any] = {
            "startup_timeout_s": 5,
            "stop_grace_s": 1,
            "interrupt_grace_s": 5,
            "env": {"FAKE_CODEX_LOG": str(log_path), **(env or {})},
            **settings,
        }
        provider = CodexProvider(
            BuildContext(
                name="codex",
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
def provider(make_provider: ProviderFactory) -> CodexProvider:
    return make_provider()


def session(
    provider: CodexProvider, tmp_path: Path, *, thread_id: str | None = None, name: str = "s1"
) -> CodexSession:
    workspace = tmp_path / name
    workspace.mkdir(exist_ok=True)
    return provider.open_session(
        SessionSpec(
            session_id=name,
            workspace=workspace,
            model="gpt-5.5",
            approval_mode="ask",
            thread_id=thread_id,
        )
    )


def sent(log_path: Path, method: str) -> list[dict[str, Any]]:
    """What the gateway sent the fake (any of its processes), by method."""
    lines = [json.loads(line) for line in log_path.read_text().splitlines()]
    return [line["in"] for line in lines if line.get("in", {}).get("method") == method]


def spawns(log_path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log_path.read_text().splitlines()]
    return [line for line in lines if "argv" in line]


def error_of(outcome: TurnOutcome) -> tuple[str, bool]:
    assert outcome.error is not None, outcome
    return outcome.error.kind, outcome.error.retryable


async def test_one_server_serves_every_session_each_on_its_own_thread(
    provider: CodexProvider, runner: ProcessRunner, tmp_path: Path, log_path: Path
) -> None:
    first, second = session(provider, tmp_path, name="a"), session(provider, tmp_path, name="b")
    hooks_a, hooks_b = Hooks(), Hooks()
    assert provider.server_pid is None  # nothing runs before the first need
    outcomes = await asyncio.gather(first.run_turn("hi", hooks_a), second.run_turn("hi", hooks_b))
    assert [o.status for o in outcomes] == ["completed", "completed"]
    threads = {first.thread_id, second.thread_id}
    assert threads == {"thr_1", "thr_2"}
    assert hooks_a.threads == [first.thread_id]
    assert outcomes[0].final_text == f"thread {first.thread_id} turn 1"
    assert outcomes[1].final_text == f"thread {second.thread_id} turn 1"
    # The fake also streams for "thr_other": none of it reached either session.
    assert all(getattr(event, "text", "") != "x" for event in hooks_a.events + hooks_b.events)
    pid = provider.server_pid
    assert pid is not None
    assert first.process is not None
    assert first.process == second.process
    assert first.process.pid == pid

    again = await first.run_turn("hi", Hooks())
    assert again.final_text == f"thread {first.thread_id} turn 2"
    assert provider.server_pid == pid
    assert runner.spawn_count == 1
    assert len(sent(log_path, "thread/start")) == 2

    (initialize,) = sent(log_path, "initialize")
    assert initialize["params"]["clientInfo"]["name"] == "agent-gateway"
    assert sent(log_path, "initialized") == [{"method": "initialized"}]
    start = sent(log_path, "thread/start")[0]["params"]
    assert start["approvalPolicy"] == "untrusted"
    assert start["sandbox"] == "read-only"
    assert start["model"] == "gpt-5.5"
    assert start["config"]["projects"][start["cwd"]] == {"trust_level": "untrusted"}
    assert Path(start["cwd"]).name in {"a", "b"}
    argv = spawns(log_path)[0]["argv"]
    assert argv[1:4] == ["app-server", "--listen", "stdio://"]
    assert "features.plugins=false" in argv


async def test_the_child_environment_is_allow_listed(
    make_provider: ProviderFactory, tmp_path: Path, log_path: Path
) -> None:
    provider = make_provider(env={"CODEX_HOME": str(tmp_path)})
    assert await provider.ping() is None
    env = spawns(log_path)[0]["env"]
    assert env["OPENAI_API_KEY"] == "sk-x"
    assert env["CODEX_HOME"] == str(tmp_path)
    assert "SECRET" not in env


def test_config_codex_cannot_take_is_a_config_error(make_provider: ProviderFactory) -> None:
    with pytest.raises(ConfigError, match=r"providers\.codex\.config: a: TOML has no null"):
        make_provider(config={"a": None})


async def test_a_crash_fails_the_turn_then_a_new_server_resumes_the_thread(
    provider: CodexProvider, tmp_path: Path, log_path: Path
) -> None:
    codex = session(provider, tmp_path)
    assert (await codex.run_turn("hi", Hooks())).status == "completed"
    thread, pid = codex.thread_id, provider.server_pid

    crashed = await codex.run_turn("[[crash]]", Hooks())
    assert error_of(crashed) == ("cli_crashed", True)
    assert crashed.error is not None
    assert crashed.error.exit_code == 3
    assert crashed.error.stderr_tail == "fake codex: crashing as asked"

    hooks = Hooks()
    resumed = await codex.run_turn("hi", hooks)
    assert resumed.status == "completed"
    assert resumed.final_text == f"thread {thread} turn 1"  # a fresh server, the same thread
    assert provider.server_pid not in (None, pid)
    assert codex.thread_id == thread
    assert hooks.threads == []  # the binding did not change
    (resume,) = sent(log_path, "thread/resume")
    assert resume["params"]["threadId"] == thread
    assert resume["params"]["excludeTurns"] is True
    assert resume["params"]["approvalPolicy"] == "untrusted"
    assert resume["params"]["config"] == thread_config(Path(resume["params"]["cwd"]))


async def test_killing_the_npm_wrapper_ends_the_server_it_started(
    make_provider: ProviderFactory, tmp_path: Path
) -> None:
    provider = make_provider(env={"FAKE_CODEX_WRAPPER": "1"})
    codex = session(provider, tmp_path)
    hooks = Hooks()
    turn = asyncio.create_task(codex.run_turn("[[slow]]", hooks))
    await hooks.streaming.wait()
    wrapper = provider.server_pid
    assert wrapper is not None
    os.kill(wrapper, signal.SIGKILL)  # the server itself (its child) is not touched
    outcome = await turn
    assert error_of(outcome) == ("cli_crashed", True)
    assert outcome.error is not None
    assert outcome.error.exit_code == -signal.SIGKILL
    resumed = await codex.run_turn("hi", Hooks())
    assert resumed.final_text == f"thread {codex.thread_id} turn 1"  # on a new server
    assert provider.server_pid not in (None, wrapper)


async def test_a_session_with_a_bound_thread_resumes_it(
    provider: CodexProvider, tmp_path: Path, log_path: Path
) -> None:
    codex = session(provider, tmp_path, thread_id="thr_77")
    outcome = await codex.run_turn("hi", Hooks())
    assert outcome.final_text == "thread thr_77 turn 1"
    assert sent(log_path, "thread/start") == []


async def test_a_thread_codex_lost_fails_once_then_a_new_thread_starts(
    provider: CodexProvider, tmp_path: Path
) -> None:
    codex = session(provider, tmp_path, thread_id="gone-1")
    lost = await codex.run_turn("hi", Hooks())
    assert error_of(lost) == ("context_lost", False)
    assert codex.thread_id is None
    hooks = Hooks()
    assert (await codex.run_turn("hi", hooks)).status == "completed"
    assert hooks.threads == ["thr_1"]


@pytest.mark.parametrize(
    ("decision", "sent_decision", "tool_status"),
    [
        ("allow", "accept", "completed"),
        ("deny", "decline", "denied"),
        ("allow_session", "accept", "completed"),  # acceptForSession is not offered
    ],
)
async def test_command_approvals_reach_the_client_and_its_decision_reaches_codex(
    provider: CodexProvider, tmp_path: Path, decision: Any, sent_decision: str, tool_status: str
) -> None:
    hooks = Hooks(ApprovalAnswer(decision=decision))
    outcome = await session(provider, tmp_path).run_turn("[[approve]]", hooks)
    (request,) = hooks.approvals
    assert (request.request_id, request.tool, request.tool_id) == ("0", "command", "call_1")
    assert request.input["command"] == "/bin/bash -lc 'touch x'"
    assert request.options == ("allow", "deny")
    assert outcome.final_text == f'answer: {{"id": 0, "result": {{"decision": "{sent_decision}"}}}}'
    tool_done = [e for e in hooks.events if isinstance(e, ToolCompleted)]
    assert [t.status for t in tool_done] == [tool_status]


async def test_a_file_change_approval_shows_the_diff(
    provider: CodexProvider, tmp_path: Path
) -> None:
    hooks = Hooks(ApprovalAnswer(decision="allow_session"))
    outcome = await session(provider, tmp_path).run_turn("[[approve_file]]", hooks)
    (request,) = hooks.approvals
    assert request.tool == "file_change"
    assert request.input["changes"] == [
        {"path": str(tmp_path / "s1" / "a.txt"), "kind": {"type": "add"}, "diff": "+hello\n"}
    ]
    assert outcome.final_text == 'answer: {"id": 0, "result": {"decision": "acceptForSession"}}'


async def test_auto_edits_accepts_workspace_edits_without_asking(
    provider: CodexProvider, tmp_path: Path, log_path: Path
) -> None:
    (tmp_path / "ws").mkdir()
    spec = SessionSpec(
        session_id="s", workspace=tmp_path / "ws", model=None, approval_mode="auto_edits"
    )
    codex = provider.open_session(spec)
    hooks = Hooks()  # would wait forever if asked
    outcome = await codex.run_turn("[[approve_file]]", hooks)
    assert outcome.final_text == 'answer: {"id": 0, "result": {"decision": "accept"}}'
    assert hooks.approvals == []
    start = sent(log_path, "thread/start")[0]["params"]
    assert (start["approvalPolicy"], start["sandbox"]) == ("untrusted", "workspace-write")
    assert "model" not in start


async def test_an_approval_codex_withdraws_is_cancelled(
    provider: CodexProvider, tmp_path: Path
) -> None:
    hooks = Hooks()  # never answers
    turn = asyncio.create_task(session(provider, tmp_path).run_turn("[[withdraw]]", hooks))
    await hooks.asked.wait()
    assert await provider.ping() is None  # the fake withdraws its request on this ping
    outcome = await turn
    assert outcome.final_text == "withdrawn"
    assert hooks.withdrawn == ["0"]


@pytest.mark.parametrize(
    ("method", "answer"),
    [
        ("item/permissions/requestApproval", {"result": {"permissions": {}, "scope": "turn"}}),
        ("mcpServer/elicitation/request", {"result": {"action": "decline"}}),
        (
            "item/tool/requestUserInput",
            {
                "error": {
                    "code": -32601,
                    "message": "item/tool/requestUserInput is not supported by Agent Gateway",
                }
            },
        ),
    ],
)
async def test_requests_the_gateway_does_not_serve_are_refused_not_left_waiting(
    provider: CodexProvider, tmp_path: Path, method: str, answer: dict[str, Any]
) -> None:
    hooks = Hooks()
    outcome = await session(provider, tmp_path).run_turn(f"[[ask:{method}]]", hooks)
    assert outcome.final_text == "answer: " + json.dumps({"id": 0, **answer}, sort_keys=True)
    assert hooks.approvals == []


async def test_a_request_arriving_between_turns_is_refused_at_once(
    provider: CodexProvider, tmp_path: Path
) -> None:
    codex = session(provider, tmp_path)
    hooks = Hooks()
    assert (await codex.run_turn("[[late_ask]]", hooks)).status == "completed"
    assert await provider.ping() is None  # the fake now asks, with no turn of ours running
    report = await codex.run_turn("[[late_report]]", hooks)
    assert report.final_text == 'late: {"id": 0, "result": {"decision": "decline"}}'
    assert hooks.approvals == []


async def test_interrupt_ends_the_turn_and_the_thread_goes_on(
    provider: CodexProvider, tmp_path: Path, log_path: Path
) -> None:
    codex = session(provider, tmp_path)
    hooks = Hooks()
    turn = asyncio.create_task(codex.run_turn("[[slow]]", hooks))
    await hooks.streaming.wait()
    await codex.interrupt()
    outcome = await turn
    assert outcome.status == "interrupted"
    (interrupt,) = sent(log_path, "turn/interrupt")
    assert interrupt["params"] == {
        "threadId": codex.thread_id,
        "turnId": f"turn_{codex.thread_id}_1",
    }
    assert (await codex.run_turn("hi", Hooks())).status == "completed"
    await codex.interrupt()  # no turn: nothing to do


async def test_an_interrupt_codex_never_confirms_is_given_up_without_killing_the_server(
    make_provider: ProviderFactory, tmp_path: Path
) -> None:
    provider = make_provider(interrupt_grace_s=0.2)
    codex = session(provider, tmp_path)
    hooks = Hooks()
    turn = asyncio.create_task(codex.run_turn("[[stubborn]]", hooks))
    await hooks.streaming.wait()
    pid = provider.server_pid
    await codex.interrupt()
    outcome = await turn
    assert outcome.status == "interrupted"
    assert outcome.error is not None
    assert "did not confirm" in outcome.error.message
    assert provider.server_pid == pid
    assert await provider.ping() is None


async def test_an_unresponsive_server_is_stopped_on_interrupt_and_replaced(
    make_provider: ProviderFactory, tmp_path: Path
) -> None:
    provider = make_provider(interrupt_grace_s=0.3)
    codex = session(provider, tmp_path)
    hooks = Hooks()
    turn = asyncio.create_task(codex.run_turn("[[freeze]]", hooks))
    await hooks.bound.wait()  # the turn is under way (turn/start sent, or about to be)
    pid = provider.server_pid
    # The fake answers turn/start, then nothing: turn/interrupt times out, the server is stopped.
    await codex.interrupt()
    assert (await turn).status == "interrupted"
    assert (await codex.run_turn("hi", Hooks())).status == "completed"
    assert provider.server_pid not in (None, pid)


async def test_a_silent_turn_fails_as_idle_timeout(
    make_provider: ProviderFactory, tmp_path: Path, log_path: Path
) -> None:
    provider = make_provider(turn_idle_timeout_s=0.3)
    codex = session(provider, tmp_path)
    outcome = await codex.run_turn("[[hang]]", Hooks())
    assert error_of(outcome) == ("idle_timeout", True)
    pid = provider.server_pid
    assert (await codex.run_turn("hi", Hooks())).status == "completed"
    assert provider.server_pid == pid  # one quiet turn does not cost the shared server
    # The quiet turn was interrupted in the background; a round trip puts it in the log.
    assert await provider.ping() is None
    assert len(sent(log_path, "turn/interrupt")) == 1


async def test_a_pending_approval_pauses_the_idle_watchdog(
    make_provider: ProviderFactory, tmp_path: Path
) -> None:
    provider = make_provider(turn_idle_timeout_s=0.2)

    class SlowHuman(Hooks):
        async def request_approval(self, request: ApprovalRequest) -> ApprovalAnswer:
            await asyncio.sleep(0.5)  # a human thinking longer than the idle timeout
            return ApprovalAnswer(decision="allow")

    outcome = await session(provider, tmp_path).run_turn("[[approve]]", SlowHuman())
    assert outcome.status == "completed", outcome


async def test_cli_retries_usage_and_failures(provider: CodexProvider, tmp_path: Path) -> None:
    codex = session(provider, tmp_path)
    hooks = Hooks()
    retried = await codex.run_turn("[[retry]]", hooks)
    assert retried.final_text == "ok"
    retries = [e for e in hooks.events if isinstance(e, RetryScheduled)]
    assert [(r.attempt, r.max_attempts, r.kind) for r in retries] == [
        (1, 2, "network"),
        (2, 2, "network"),
    ]
    counted = await codex.run_turn("[[usage]]", Hooks())
    assert counted.usage is not None
    assert counted.usage.input_tokens == 300  # 100 + 200; the replayed 100 is not this turn's
    failed = await codex.run_turn("[[fail:usageLimitExceeded]]", Hooks())
    assert error_of(failed) == ("usage_limit", False)
    tools = Hooks()
    await codex.run_turn("[[tools]]", tools)
    started = [e.tool_id for e in tools.events if isinstance(e, ToolStarted)]
    done = [
        (e.tool_id, e.status, e.exit_code) for e in tools.events if isinstance(e, ToolCompleted)
    ]
    assert started == ["call_1", "patch_1"]
    assert done == [("call_1", "failed", 2), ("patch_1", "completed", None)]


async def test_ping_starts_the_server_and_reports_why_it_cannot(
    make_provider: ProviderFactory, tmp_path: Path
) -> None:
    provider = make_provider()
    assert await provider.ping() is None
    assert provider.server_pid is not None

    refusing = make_provider(env={"FAKE_CODEX_START": "exit"})
    reason = await refusing.ping()
    assert reason is not None
    assert "did not start" in reason
    assert "fake codex: refusing to start" in reason

    mute = make_provider(env={"FAKE_CODEX_START": "mute"}, startup_timeout_s=0.3)
    reason = await mute.ping()
    assert reason is not None
    assert "initialize: no answer within 0.3 s" in reason


async def test_a_missing_cli_fails_the_turn_as_cli_missing(
    make_provider: ProviderFactory, tmp_path: Path
) -> None:
    provider = make_provider(executable=tmp_path / "no-codex")
    outcome = await session(provider, tmp_path).run_turn("hi", Hooks())
    assert error_of(outcome) == ("cli_missing", False)
    assert await provider.ping() is not None


async def test_close_unloads_the_thread_and_aclose_stops_the_server(
    provider: CodexProvider, runner: ProcessRunner, tmp_path: Path, log_path: Path
) -> None:
    codex = session(provider, tmp_path)
    await codex.run_turn("hi", Hooks())
    await codex.suspend()  # nothing to release: the thread stays loaded
    assert sent(log_path, "thread/unsubscribe") == []
    await codex.close()
    (unsubscribe,) = sent(log_path, "thread/unsubscribe")
    assert unsubscribe["params"] == {"threadId": "thr_1"}
    closed = await codex.run_turn("hi", Hooks())
    assert error_of(closed) == ("invalid_request", False)
    await provider.aclose()
    assert provider.server_pid is None
    assert runner.live == ()
