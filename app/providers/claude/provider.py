"""The Claude Code provider: one long-lived ``claude`` process per live session.

The process runs in bidirectional stream-json mode (reference §1). A turn is one ``user``
line; the turn ends at the ``result`` line. Permission prompts arrive as ``can_use_tool``
control requests and are answered with ``control_response`` once the client decides (an
AskUserQuestion request becomes a question, answered with the client's answers). The
interrupt is the ``interrupt`` control request, with a stop of the process as the fallback.
A session whose process is gone is resumed on its next turn with ``--resume=<thread>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from app.events import FailureKind, TurnError
from app.process.childspec import child_environment
from app.process.managed import LineTooLong, ManagedProcess, ProcessError
from app.providers.base import (
    Answers,
    ApprovalAnswer,
    ApprovalRequest,
    Capabilities,
    ForkedThread,
    ForkFailed,
    ForkRequest,
    QuestionRequest,
    SessionSpec,
    ThreadFork,
    TurnHooks,
    TurnOutcome,
)
from app.providers.claude import protocol
from app.providers.claude.argv import build_argv
from app.providers.claude.classifier import error_for_exit
from app.providers.claude.forks import cut_point
from app.providers.claude.normalizer import (
    ApprovalAsked,
    ApprovalWithdrawn,
    ClaudeItem,
    ClaudeNormalizer,
    ControlReply,
    QuestionAsked,
    ThreadSeen,
    TurnEnded,
    UnsupportedControlRequest,
    UsageSoFar,
)
from app.providers.claude.questions import answers_response
from app.providers.hosting import HostedProvider
from app.providers.process_session import ProcessSession, Running
from app.providers.sandboxing import settings_credentials
from app.providers.transcripts import copy_transcript, find_transcript
from app.providers.turnloop import TurnLoop, failure, turn_error

log = logging.getLogger(__name__)

NAME = "claude_code"
CLI = "Claude Code"
ITEM_QUEUE_SIZE = 256
"""Items read ahead of the turn; a full queue stops the reader, so a CLI that prints faster
than its events are stored is held back by its stdout pipe instead of growing memory."""
READER_YIELD_LINES = 64
"""Lines read before the reader yields to the event loop (a flooding CLI must not stall it)."""

PASSTHROUGH_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "CLAUDE_CONFIG_DIR",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
)
"""Credentials and endpoints the CLI may need from the gateway's own environment."""

FIXED_ENV = {
    # The gateway decides about updates and network use, not the CLI (offline-testing.md).
    "CLAUDE_CODE_ENTRYPOINT": "sdk-py",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    # 2.1.330 offers TodoWrite only with the Task tools off and the todo tools on (its
    # `isEnabled`: tasks disabled and todo tools enabled; most current models have neither by
    # default: "TodoWrite is disabled for this session"). TodoWrite states the whole plan on
    # each call, which the gateway publishes as `plan.updated`; the Task tools change one
    # task at a time and would leave the gateway rebuilding a list it never saw whole.
    "CLAUDE_CODE_ENABLE_TASKS": "0",
    "CLAUDE_CODE_ENABLE_TODO_TOOLS": "1",
}


class _Exited:
    """The process's stdout ended (or broke); carries why."""

    def __init__(self, error: TurnError) -> None:
        self.error = error


@dataclass(eq=False, kw_only=True)
class _Live(Running):
    items: asyncio.Queue[ClaudeItem | _Exited]


class ClaudeCodeProvider(HostedProvider["ClaudeSession"]):
    name = NAME
    capabilities = Capabilities(
        text_deltas=True,
        approvals=True,
        interrupt=True,
        resume=True,
        usage=True,
        cost=True,
        shared_process=False,
        approval_edits=True,
        model_choice=True,
        fork=True,
    )

    def child_env(self, workspace: Path) -> dict[str, str]:
        """The CLI's environment: passthrough, ``FIXED_ENV``, the retry budget, then ``env``.

        ``CLAUDE_CODE_MAX_RETRIES`` is ``retry.cli_request_retries`` (the CLI's own default is
        10 retries, ~3 minutes of backoff); the provider's ``env`` overlay still wins.
        """
        env = child_environment(
            self.parent_env,
            passthrough=PASSTHROUGH_ENV,
            overlay={
                **FIXED_ENV,
                "CLAUDE_CODE_MAX_RETRIES": str(self.retry.cli_request_retries),
                "PWD": str(workspace),
                **self.settings.env,
            },
        )
        if self.sandbox.on:
            # The session's own home has no settings.json: the key the operator keeps there
            # (the container's entrypoint puts it there) comes along, and nothing else of it.
            env = {**settings_credentials(env), **env}
        return env

    def new_session(self, spec: SessionSpec) -> ClaudeSession:
        return ClaudeSession(provider=self, spec=spec)

    async def fork_thread(self, request: ForkRequest) -> ForkedThread:
        """A fork the CLI makes on the new session's first run (``forks``): the cut is found
        in the parent's transcript now, and the transcript copied into the new session's
        config dir when it has its own."""
        return await asyncio.to_thread(self._fork, request)

    def _fork(self, request: ForkRequest) -> ForkedThread:
        thread_id = request.parent.thread_id
        assert thread_id is not None
        parent_dir = self.config_dir(request.parent)
        transcript = find_transcript(parent_dir, thread_id)
        if transcript is None:
            raise ForkFailed(f"no transcript of thread {thread_id} under {parent_dir}")
        with transcript.open(encoding="utf-8") as lines:
            cut = cut_point(lines, request.keep_turns)
        child_dir = self.config_dir(request.child)
        if child_dir != parent_dir:
            if self.sandbox.on:
                self.sandbox.home(request.child.session_id).mkdir(mode=0o700, exist_ok=True)
            copy_transcript(transcript, child_dir, cut)
        return ForkedThread(pending=ThreadFork(thread_id=thread_id, at=cut))

    def config_dir(self, spec: SessionSpec) -> Path:
        """Where the CLI of ``spec``'s session keeps its threads (``~/.claude``)."""
        if self.sandbox.on:
            return self.sandbox.home(spec.session_id) / ".claude"
        env = self.child_env(spec.workspace)
        if env.get("CLAUDE_CONFIG_DIR"):
            return Path(env["CLAUDE_CONFIG_DIR"])
        return Path(env.get("HOME") or os.path.expanduser("~")) / ".claude"


class ClaudeSession(ProcessSession[_Live, ClaudeItem | _Exited]):
    """One gateway session on Claude Code; spawns (or resumes) its process on demand."""

    def __init__(self, *, provider: ClaudeCodeProvider, spec: SessionSpec) -> None:
        super().__init__(host=provider, spec=spec, cli=CLI)
        self._provider = provider
        self._request_ids = itertools.count(1)
        self._replies: dict[str, asyncio.Future[ControlReply]] = {}

    # --- process lifecycle ----------------------------------------------------------------

    async def _ensure_process(self, hooks: TurnHooks) -> _Live | TurnOutcome:
        live = await self._serving()
        if live is not None:
            return live
        settings = self._provider.settings
        spec = dataclasses.replace(self._spec, thread_id=self._thread_id)
        argv = build_argv(
            executable=self._provider.executable,
            spec=spec,
            extra_args=settings.extra_args,
            project_config=settings.project_config,
        )
        items: asyncio.Queue[ClaudeItem | _Exited] = asyncio.Queue(ITEM_QUEUE_SIZE)
        spawned = await self._spawn(
            argv,
            self._provider.child_env(spec.workspace),
            lambda process: self._read(process, items),
            task="claude-reader",
        )
        if isinstance(spawned, TurnOutcome):
            return spawned
        process, reader, info = spawned
        live = self._live = _Live(process=process, follower=reader, items=items, info=info)
        reply = await self._control(live, protocol.initialize_request, settings.startup_timeout_s)
        if isinstance(reply, ControlReply) and reply.ok:
            return live
        if isinstance(reply, ControlReply):
            message = reply.error or "initialize was refused"
        else:
            message = reply.error.message if reply.error else "no answer"
        await self._release(live)
        if spec.thread_id is not None:
            # Claude Code 2.1.330 answers --resume of an unknown thread with an error `result`
            # ("No conversation found with session ID: …") and exit 1, before it answers
            # initialize. The conversation is gone for good: say so, and let the next turn
            # start a new thread rather than fail the same way forever.
            self._thread_id = None
            return _failed(
                "context_lost",
                f"Claude Code could not resume thread {spec.thread_id}; the next turn starts "
                f"a new conversation. {message}",
            )
        return _failed("cli_crashed", f"Claude Code did not start: {message}")

    async def _read(
        self, process: ManagedProcess, items: asyncio.Queue[ClaudeItem | _Exited]
    ) -> None:
        normalizer = ClaudeNormalizer(report_parse_errors=True)
        lines = 0
        try:
            while process.exceeded is None:
                batch = await process.read_lines()
                if batch is None:
                    break
                for line in batch:
                    if process.exceeded is not None:
                        break  # what it printed after a limit is dropped
                    lines += 1
                    if lines % READER_YIELD_LINES == 0:
                        # read_lines does not suspend while lines are buffered: let others run.
                        await asyncio.sleep(0)
                    for item in normalizer.feed(line):
                        if isinstance(item, ControlReply):
                            future = self._replies.pop(item.request_id, None)
                            if future is not None and not future.done():
                                future.set_result(item)
                            continue
                        if items.full():
                            await items.put(item)
                        else:  # no coroutine per item while the follower keeps up
                            items.put_nowait(item)
        except LineTooLong:
            pass  # the process recorded the limit it broke and was killed for it
        except ProcessError as exc:
            await items.put(_Exited(_error("cli_crashed", f"lost the CLI's output: {exc}")))
            return
        exceeded = self._exceeded(process)
        if exceeded is not None:
            # Whatever it printed after the limit is dropped; its end is the turn's end.
            await items.put(_Exited(exceeded))
            return
        returncode = await process.wait()
        await items.put(_Exited(error_for_exit(returncode, process.stderr_tail)))

    async def _control(
        self, live: _Live, encode: Callable[[str], bytes], timeout_s: float
    ) -> ControlReply | TurnOutcome:
        request_id = f"req_{next(self._request_ids)}_{os.urandom(4).hex()}"
        future: asyncio.Future[ControlReply] = asyncio.get_running_loop().create_future()
        self._replies[request_id] = future
        try:
            await live.process.write_line(encode(request_id))
            async with asyncio.timeout(timeout_s):
                waits: set[asyncio.Future[Any]] = {future, live.follower}
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        except (ProcessError, TimeoutError):
            pass
        finally:
            self._replies.pop(request_id, None)
        if future.done():
            return future.result()
        future.cancel()
        stderr = live.process.stderr_tail.strip()
        return _failed("cli_crashed", f"no answer to a control request; stderr: {stderr[-2000:]}")

    # --- turns ----------------------------------------------------------------------------

    async def _prompt(
        self, live: _Live, prompt: str, loop: TurnLoop[ClaudeItem | _Exited]
    ) -> TurnOutcome:
        with self._output_limited(live):
            try:
                await live.process.write_line(protocol.user_message(prompt))
            except ProcessError as exc:
                await self._release(live)
                return _failed("cli_crashed", f"could not send the prompt: {exc}")
            return await self._follow(live, loop, live.items)

    async def _handle(
        self, live: _Live, loop: TurnLoop[ClaudeItem | _Exited], item: ClaudeItem | _Exited
    ) -> TurnOutcome | None:
        match item:
            case _Exited(error=error):
                await self._release(live)
                if loop.interrupted:
                    return loop.interrupted_outcome()
                return TurnOutcome(status="failed", error=error)
            case TurnEnded(outcome=outcome, thread_id=thread):
                if thread:
                    await self._bind(thread, loop.hooks)
                return outcome
            case ThreadSeen(thread_id=thread):
                await self._bind(thread, loop.hooks)
            case ApprovalAsked(request=request, suggestions=suggestions):
                loop.ask(request, self._answerer(live, request, suggestions))
            case QuestionAsked(request=question, input=tool_input):
                loop.ask_question(question, self._question_answerer(live, question, tool_input))
            case ApprovalWithdrawn(request_id=request_id):
                loop.withdraw(request_id)
            case UnsupportedControlRequest(request_id=request_id, subtype=subtype):
                with contextlib.suppress(ProcessError):
                    await live.process.write_line(
                        protocol.error_response(
                            request_id, f"{subtype} is not supported by Agent Gateway"
                        )
                    )
            case ControlReply():
                pass  # routed to its waiter by the reader; never queued
            case UsageSoFar(usage=usage):
                await loop.hooks.report_usage(usage)
            case _:
                await loop.hooks.emit(item)
        return None

    async def _bind(self, thread_id: str, hooks: TurnHooks) -> None:
        if thread_id != self._thread_id:
            self._thread_id = thread_id
        await hooks.bind_thread(thread_id)

    def _answerer(
        self, live: _Live, request: ApprovalRequest, suggestions: list[JsonValue]
    ) -> Callable[[ApprovalAnswer], Awaitable[None]]:
        async def send(answer: ApprovalAnswer) -> None:
            line = protocol.permission_response(
                request.request_id, answer, request.input, suggestions=suggestions
            )
            with contextlib.suppress(ProcessError):
                await live.process.write_line(line)

        return send

    def _question_answerer(
        self, live: _Live, request: QuestionRequest, tool_input: dict[str, JsonValue]
    ) -> Callable[[Answers], Awaitable[None]]:
        async def send(answers: Answers) -> None:
            line = answers_response(request.request_id, request, tool_input, answers)
            with contextlib.suppress(ProcessError):
                await live.process.write_line(line)

        return send

    async def interrupt(self) -> None:
        if self._loop is not None:  # also seen by a turn whose process is still starting
            self._loop.interrupt()
        live = self._live
        if live is None:
            return
        request_id = f"req_{next(self._request_ids)}_{os.urandom(4).hex()}"
        with contextlib.suppress(ProcessError):
            await live.process.write_line(protocol.interrupt_request(request_id))


def _error(kind: FailureKind, message: str, *, retryable: bool = False) -> TurnError:
    return turn_error(NAME, kind, message, retryable=retryable)


def _failed(kind: FailureKind, message: str, *, retryable: bool = False) -> TurnOutcome:
    return failure(NAME, kind, message, retryable=retryable)
