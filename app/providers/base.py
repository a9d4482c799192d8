"""The provider seam: what the runtime asks of every agent CLI integration.

A ``Provider`` is built once per configured provider name. For each gateway session it hands
out a ``ProviderSession``, which owns that session's link to the CLI (a live process, or a
thread on a shared server) and runs one turn at a time. While a turn runs, the provider
reports through ``TurnHooks``: it emits normalized events, reveals the thread id, and asks for
approvals; it returns a ``TurnOutcome`` and never emits the terminal ``turn.*`` event itself,
so that the turn coordinator decides what the client sees when an attempt fails.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import ClassVar, Literal, Protocol

from pydantic import JsonValue

from app.events import (
    ApprovalDecision,
    ApprovalMode,
    EventData,
    Question,
    QuestionAnswer,
    TurnError,
    Usage,
)


@dataclass(frozen=True, kw_only=True)
class ThreadFork:
    """A thread to start as a copy of another one, made by the CLI as the session first runs
    (Claude Code forks a thread as it resumes it: ``--fork-session``)."""

    thread_id: str
    """The thread copied."""
    at: str | None = None
    """Where the copy ends, in the CLI's terms (Claude Code: a transcript entry's uuid);
    None: the whole thread."""


@dataclass(frozen=True, kw_only=True)
class SessionSpec:
    """What a provider needs to start or resume a session's conversation."""

    session_id: str
    workspace: Path
    model: str | None
    approval_mode: ApprovalMode
    thread_id: str | None = None
    """The CLI's thread from the binding; set when the conversation must be resumed."""
    thread_bound_at: datetime | None = None
    """When the binding was made (for the CLIs that care how old a thread is)."""
    git_dir: Path | None = None
    """For a session on a Git worktree: the repository's Git directory, which its agent
    needs writable to commit (``Sandbox.confine``)."""
    fork_from: ThreadFork | None = None
    """A fork whose CLI makes its thread on its first run: used while ``thread_id`` is
    None (``Provider.fork_thread`` returned it)."""


@dataclass(frozen=True, kw_only=True)
class ForkRequest:
    """Fork the parent session's thread for a new session: its first ``keep_turns`` turns
    (of ``turns`` it has), in the new session's workspace."""

    parent: SessionSpec
    """The session forked, with its thread (``thread_id``)."""
    child: SessionSpec
    """The new session (no thread yet): its id, workspace, model and approval mode."""
    keep_turns: int
    """Turns of the parent's thread the fork keeps, from its first (at least 1)."""
    turns: int
    """Turns the parent's thread has (``keep_turns == turns``: a fork at its latest point)."""


@dataclass(frozen=True, kw_only=True)
class ForkedThread:
    """The provider's fork of a thread: made now (``thread_id``), or made by the CLI as the
    new session first runs (``pending``)."""

    thread_id: str | None = None
    pending: ThreadFork | None = None


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """A tool call the agent wants to make, as the provider read it off the wire."""

    request_id: str
    tool: str
    input: dict[str, JsonValue]
    options: tuple[ApprovalDecision, ...] = ("allow", "deny", "allow_session")
    title: str | None = None
    tool_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class ApprovalAnswer:
    """The decision that goes back to the CLI."""

    decision: ApprovalDecision
    message: str | None = None
    updated_input: dict[str, JsonValue] | None = None


@dataclass(frozen=True, kw_only=True)
class QuestionRequest:
    """Questions the agent asks the user (a tool of the CLI's), as the provider read them."""

    request_id: str
    tool: str
    """The CLI's tool that asks (``AskUserQuestion``, ``question``)."""
    questions: tuple[Question, ...]
    tool_id: str | None = None


Answers = tuple[QuestionAnswer, ...] | None
"""One answer per question, in order; None when nobody answered (expired, withdrawn)."""


@dataclass(frozen=True, kw_only=True)
class TurnOutcome:
    """How one attempt of a turn ended."""

    status: Literal["completed", "failed", "interrupted"]
    final_text: str = ""
    usage: Usage | None = None
    stop_reason: str | None = None
    error: TurnError | None = None


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What a provider can do; the selector and clients read these (``Capability`` names
    each field)."""

    text_deltas: bool
    """Streams ``message.delta`` while the agent writes (not only whole messages)."""
    approvals: bool
    """Asks the client before running tools that need permission."""
    interrupt: bool
    """Stops a running turn on request and stays usable."""
    resume: bool
    """Continues a thread after its process is gone (idle close, crash, gateway restart)."""
    usage: bool
    """Reports token usage per turn."""
    cost: bool
    """Reports the cost of a turn."""
    shared_process: bool
    """One CLI process serves every session of the provider."""
    approval_edits: bool
    """Runs an allowed tool call with the input the client edited (``updated_input``)."""
    model_choice: bool
    """Runs the ``model`` a session names; without it the agent runs the model it is
    configured with, so a session naming one is refused before any process starts."""
    fork: bool = False
    """Forks a session's thread at one of its turns itself (``Provider.fork_thread``); a
    fork of a session on a provider without it carries the conversation as a hand-off."""


Capability = Literal[
    "text_deltas",
    "approvals",
    "interrupt",
    "resume",
    "usage",
    "cost",
    "shared_process",
    "approval_edits",
    "model_choice",
    "fork",
]
"""A field of ``Capabilities``: what a request's ``requires`` may name."""


class ForkFailed(Exception):
    """The agent could not fork a thread (``Provider.fork_thread``); says why."""


@dataclass(frozen=True, kw_only=True)
class ProcessInfo:
    """The live CLI process behind a session, for operators and tests."""

    pid: int
    started_at: datetime
    spawns: int = field(default=1)


class TurnHooks(Protocol):
    """How a provider reports back while a turn runs."""

    @property
    def joins_deltas(self) -> bool:
        """Consecutive streamed deltas of one item may be emitted as one (the event log
        joins them anyway: ``server.coalesce_deltas_ms`` > 0); ``TurnLoop`` then joins those
        already queued together instead of handing them over one by one."""

    async def emit(self, data: EventData) -> None:
        """Append one normalized event to the session's log."""

    async def bind_thread(self, thread_id: str) -> None:
        """Record the CLI's thread id for this session (idempotent)."""

    async def report_usage(self, usage: Usage) -> None:
        """What the running attempt has used so far, as the CLI said during it (each model
        response, say); not an event. The attempt's own ``usage`` event at its end replaces
        it. The gateway counts it against the turn's budgets, and may stop the turn."""

    async def request_approval(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Ask the client; return its answer, or a deny when the approval expires.

        Cancelling the awaiting task withdraws the approval (the CLI cancelled it).
        """

    async def ask_question(self, request: QuestionRequest) -> Answers:
        """Put the agent's questions to the client; return its answers, or None when the
        question expires unanswered.

        Never answered by the approval mode's policy: only a client answers a question.
        Cancelling the awaiting task withdraws the question (the CLI cancelled it).
        """


class ProviderSession(ABC):
    """One gateway session's conversation on one provider."""

    @property
    @abstractmethod
    def thread_id(self) -> str | None:
        """The CLI's own conversation id, once known."""

    @property
    @abstractmethod
    def process(self) -> ProcessInfo | None:
        """The live process serving this session, if any."""

    @abstractmethod
    async def run_turn(self, prompt: str, hooks: TurnHooks) -> TurnOutcome:
        """Send one user message and follow the agent until the turn ends."""

    @abstractmethod
    async def interrupt(self) -> None:
        """Ask the CLI to stop the running turn; the turn then ends as interrupted."""

    def can_continue(self, error: TurnError) -> bool:
        """Retry advice: can a new attempt continue this conversation in the same thread?

        True when the thread id is known and ``error`` does not say the CLI lost it. The
        coordinator owns the policy; a provider overrides this only to know better.
        """
        return self.thread_id is not None and error.kind != "context_lost"

    @abstractmethod
    async def suspend(self) -> None:
        """Release the live process; the next turn resumes the thread from the binding."""

    @abstractmethod
    async def close(self, *, at_once: bool = False) -> None:
        """Stop everything this session holds; the session will not be used again. With
        ``at_once`` (another replica runs the session now, or this one is shutting down) its
        CLI gets no grace: a process of its own is killed, a shared server's turn aborted."""


class ThreadSession(ProviderSession):
    """A session that knows the CLI thread it was opened with (``spec.thread_id``) and then
    the one its turns bind; ``_closed`` once closed."""

    def __init__(self, spec: SessionSpec) -> None:
        self._spec = spec
        self._thread_id = spec.thread_id
        self._closed = False

    @property
    def thread_id(self) -> str | None:
        return self._thread_id


class Provider(ABC):
    """One agent CLI integration, built once from the settings."""

    name: ClassVar[str]
    capabilities: Capabilities
    """The class's are the catalog's; a built provider may say more of itself (a sandboxed
    Codex runs a server per session, not one shared)."""

    async def ping(self) -> str | None:
        """For a provider with a shared server: ``None`` when it answers, else why not.

        Providers without a long-running server have nothing to ping.
        """
        return None

    def refuses(self, approval_mode: ApprovalMode) -> str | None:
        """Why a session in ``approval_mode`` cannot run here as configured (the agent would
        refuse the mode), or None: such a session is refused at creation, not at its first
        turn."""
        return None

    @abstractmethod
    def open_session(self, spec: SessionSpec) -> ProviderSession:
        """Return a handle for the session; nothing is spawned until the first turn."""

    async def fork_thread(self, request: ForkRequest) -> ForkedThread | None:
        """Fork the parent's thread as ``request`` says, with the agent's own fork; None when
        this provider cannot fork it so (the gateway hands the conversation over instead).
        Raises ``ForkFailed`` when the agent refused or failed; nothing is left behind then."""
        return None

    async def discard_thread(self, spec: SessionSpec, thread_id: str) -> None:  # noqa: B027 - most providers make no thread to forget
        """Best effort: forget a thread ``fork_thread`` made for a session that was then not
        created."""

    @abstractmethod
    async def aclose(self) -> None:
        """Stop every process this provider started."""
