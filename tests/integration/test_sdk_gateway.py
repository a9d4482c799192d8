"""The Python SDK against a real gateway process with the fake ``claude``: every resource it
offers (sessions, turns, approvals, questions, interrupt, changes, revert, fork, runs,
usage, providers), its errors as exceptions carrying the problem, and the async client.
Streams across a gateway restart are in test_sdk_restarts.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_gateway_sdk import (
    ApprovalAnswer,
    AsyncClient,
    AuthenticationError,
    Client,
    ConflictError,
    ConnectionFailed,
    NotFoundError,
    Session,
    UnprocessableEntity,
)
from agent_gateway_sdk.events import (
    ApprovalRequestedEvent,
    MessageDeltaEvent,
    TurnCompletedEvent,
    TurnInterruptedEvent,
)

from tests.fakes.gateway import FakeGateway, fake_gateway_at
from tests.gateway import TOKEN, free_port


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGateway]:
    """One gateway for the module; each test works in sessions of its own."""
    started = fake_gateway_at(tmp_path_factory.mktemp("sdk")).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def client(gateway: FakeGateway) -> Iterator[Client]:
    with Client(gateway.base_url, token=TOKEN) as sdk:
        yield sdk


@pytest.fixture
def workspace(gateway: FakeGateway, request: pytest.FixtureRequest) -> Path:
    path = gateway.workspace.parent / str(request.node.name)
    path.mkdir()
    return path


def test_a_session_is_created_with_string_enums_found_listed_and_closed(
    client: Client, workspace: Path
) -> None:
    session = client.sessions.create(
        workspace=workspace,
        provider="claude_code",
        approval_mode="auto_edits",
        requires=["approvals", "interrupt"],
        retry={"enabled": False},
        metadata={"title": "from the SDK"},
    )
    assert session.info.workspace == str(workspace)
    assert (session.info.provider, session.info.approval_mode) == ("claude_code", "auto_edits")
    assert session.info.status == "idle"
    assert session.info.metadata == {"title": "from the SDK"}
    assert session.info.title == "from the SDK"
    assert [s.id for s in client.sessions.list(q="FROM sdk", provider="claude_code")] == [
        session.id
    ]
    assert client.sessions.list(q="from the SDK", provider="codex") == []
    assert session.info.selection is not None
    assert session.info.selection.reason == "explicit"
    assert client.sessions.get(session.id).info == session.info
    assert session.id in [s.id for s in client.sessions.list(status="idle", limit=500)]

    closed = client.sessions.delete(session.id)
    assert closed.status == "closed"
    assert session.refresh().status == "closed"
    assert session.id not in [s.id for s in client.sessions.list(status="idle", limit=500)]
    # The stream of a closed session replays its history and ends.
    streamed = list(session.events())
    assert [e.seq for e in streamed] == list(range(1, session.info.last_seq + 1))
    assert streamed[-1].type == "session.closed"
    page = session.events_page(after=0, limit=1000)
    assert page.events == streamed
    assert page.next_after == page.last_seq == streamed[-1].seq


def test_errors_are_exceptions_that_carry_the_problem(
    gateway: FakeGateway, client: Client, workspace: Path
) -> None:
    with pytest.raises(NotFoundError) as missing:
        client.sessions.get("ses_missing")
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    assert "ses_missing" in missing.value.detail

    with pytest.raises(UnprocessableEntity) as refused:
        client.sessions.create(workspace=workspace, approval_mode="sometimes")  # type: ignore[arg-type]
    assert refused.value.code == "validation_failed"
    assert [e["location"] for e in refused.value.errors] == ["body.approval_mode"]

    with pytest.raises(UnprocessableEntity) as outside:
        client.sessions.create(workspace="relative/path")
    assert outside.value.code == "workspace_rejected"

    with (
        Client(gateway.base_url, token="wrong-key") as stranger,
        pytest.raises(AuthenticationError) as unknown,
    ):
        stranger.sessions.list()
    assert unknown.value.type == "urn:agent-gateway:problem:unauthorized"

    with (
        Client(f"http://127.0.0.1:{free_port()}", token=TOKEN) as nowhere,
        pytest.raises(ConnectionFailed),
    ):
        nowhere.alive()

    session = client.sessions.create(workspace=workspace)
    running = session.turns.start("slow")
    with pytest.raises(ConflictError) as busy:
        session.turns.start("too soon")
    assert busy.value.code == "turn_in_progress"
    assert busy.value["turn_id"] == running.id
    assert session.interrupt().turn_id == running.id
    session.delete()


def test_run_follows_a_turn_and_answers_its_approvals(client: Client, workspace: Path) -> None:
    session = client.sessions.create(workspace=workspace, approval_mode="ask")
    hello = session.run("hello")
    assert hello.ok
    assert (hello.status, hello.final_text, hello.text) == ("completed", "fake reply", "fake reply")
    assert hello.events[0].type == "turn.started"
    assert isinstance(hello.events[-1], TurnCompletedEvent)

    asked: list[ApprovalRequestedEvent] = []

    def allow(request: ApprovalRequestedEvent) -> str:
        asked.append(request)
        return "allow"

    allowed = session.run("ask:echo hi", on_approval=allow)
    assert allowed.final_text == "ran: echo hi"
    assert [a.data.tool for a in asked] == ["Bash"]
    assert asked[0].data.input["command"] == "echo hi"
    [record] = session.approvals.list(status="allowed")
    assert (record.id, record.decision) == (asked[0].data.approval_id, "allow")

    denied = session.run(
        "ask:rm -rf build",
        on_approval=lambda _request: ApprovalAnswer(decision="deny", message="not here"),
    )
    assert denied.final_text == "denied: not here"
    assert [e.type for e in denied.events].count("approval.resolved") == 1

    # An approval answered from outside run(): edited, then refused a second answer.
    turn = session.turns.start("ask:echo original")
    with session.events(after=denied.events[-1].seq) as stream:
        request = next(e for e in stream if isinstance(e, ApprovalRequestedEvent))
        answered = session.approvals.respond(
            request.data.approval_id, "allow", updated_input={"command": "echo edited"}
        )
        assert (answered.status, answered.updated_input) == ("allowed", {"command": "echo edited"})
        with pytest.raises(ConflictError) as again:
            session.approvals.respond(request.data.approval_id, "deny")
        assert again.value.code == "approval_not_pending"
        end = next(e for e in stream if e.type == "turn.completed")
    assert session.turns.get(turn.id).final_text == "ran: echo edited"
    assert end.turn_id == turn.id
    assert [t.id for t in session.turns.list(limit=2)] == [turn.id, denied.turn.id]


def test_questions_are_answered_through_run(client: Client, workspace: Path) -> None:
    session = client.sessions.create(workspace=workspace)
    outcome = session.run(
        "question:Proceed?",
        on_question=lambda asked: [{"selected": [asked.data.questions[0].options[0].label]}],
    )
    assert outcome.final_text == 'answered: {"Proceed?": "Yes"}'
    [record] = session.questions.list(status="answered")
    assert record.questions[0].prompt == "Proceed?"
    assert record.answers is not None
    assert record.answers[0].selected == ["Yes"]


def test_interrupt_ends_the_running_turn_as_interrupted(client: Client, workspace: Path) -> None:
    session = client.sessions.create(workspace=workspace)
    turn = session.turns.start("slow")
    with session.events(after=0) as stream:
        for event in stream:
            if isinstance(event, MessageDeltaEvent):
                accepted = session.interrupt()
                assert (accepted.turn_id, accepted.status) == (turn.id, "interrupting")
            if event.type in {"turn.completed", "turn.failed", "turn.interrupted"}:
                break
    assert isinstance(event, TurnInterruptedEvent)
    assert session.turns.get(turn.id).status == "interrupted"
    with pytest.raises(ConflictError) as idle:
        session.interrupt()
    assert idle.value.code == "no_turn_running"


def test_changes_revert_and_fork(client: Client, workspace: Path) -> None:
    session = client.sessions.create(workspace=workspace)
    first = session.run("write:a.txt")
    second = session.run("write:b.txt")
    changes = session.changes()
    assert [(f.path, f.status) for f in changes.files] == [("a.txt", "added"), ("b.txt", "added")]
    assert (changes.from_, changes.to) == ("start", "now")
    only_second = session.changes(from_=second.turn.id, to=second.turn.id)
    assert [f.path for f in only_second.files] == ["b.txt"]
    assert "b.txt" in session.patch(from_=second.turn.id, to=second.turn.id)

    fork = session.fork(at_turn=first.turn.id)
    assert isinstance(fork, Session)
    assert (fork.info.forked_from, fork.info.forked_at) == (session.id, first.turn.id)
    assert sorted(p.name for p in Path(fork.info.workspace).iterdir()) == ["a.txt"]

    reverted = session.revert(second.turn.id)
    assert [f.path for f in reverted.files] == ["b.txt"]
    assert (reverted.to_turn, reverted.turn_number) == (second.turn.id, 2)
    assert not (workspace / "b.txt").exists()
    assert (workspace / "a.txt").exists()


def test_runs_usage_providers_and_readiness(client: Client, workspace: Path) -> None:
    result = client.runs.create(prompt="hello", workspace=workspace)
    assert (result.status, result.final_text, result.provider) == (
        "completed",
        "fake reply",
        "claude_code",
    )
    with client.runs.stream(prompt="hello", workspace=workspace) as stream:
        streamed = list(stream)
    assert streamed[0].type == "session.created"
    assert isinstance(streamed[-1], TurnCompletedEvent)
    assert streamed[-1].data.final_text == "fake reply"

    report = client.usage()
    assert report.total.turns >= 2
    assert any(g.provider == "claude_code" for g in report.groups)
    providers = {p.name: p for p in client.providers.list()}
    assert providers["claude_code"].enabled
    assert client.providers.get("claude_code").capabilities == providers["claude_code"].capabilities
    assert client.ready().status == "ready"
    assert client.alive()


def test_the_async_client_runs_a_turn_with_an_async_approval_callback(
    gateway: FakeGateway, workspace: Path
) -> None:
    async def scenario() -> None:
        async with AsyncClient(gateway.base_url, token=TOKEN) as sdk:
            session = await sdk.sessions.create(workspace=workspace, approval_mode="ask")

            async def allow(_request: ApprovalRequestedEvent) -> str:
                await asyncio.sleep(0)
                return "allow"

            outcome = await session.run("ask:echo async", on_approval=allow)
            assert outcome.final_text == "ran: echo async"
            last = outcome.events[-1].seq
            seen: list[int] = []
            async with session.events(after=0) as stream:  # live: it ends when closed
                async for event in stream:
                    seen.append(event.seq)
                    if event.seq == last:
                        break
            assert seen == list(range(1, last + 1))
            with pytest.raises(NotFoundError):
                await sdk.sessions.get("ses_missing")
            assert [s.id for s in await sdk.sessions.list(limit=500)].count(session.id) == 1
            assert [s.id for s in await sdk.sessions.list(q="ask:echo async")] == [session.id]
            closed = await session.delete()
            assert closed.status == "closed"

    asyncio.run(scenario())


def test_a_session_is_configured_budgeted_and_a_turn_sent_twice_with_one_key_starts_once(
    client: Client, workspace: Path
) -> None:
    session = client.sessions.create(
        workspace=workspace, budget={"max_tokens": 1000}, idempotency_key="create-once"
    )
    again = client.sessions.create(
        workspace=workspace, budget={"max_tokens": 1000}, idempotency_key="create-once"
    )
    assert again.id == session.id
    assert session.info.budget is not None
    assert session.info.budget.left.tokens == 1000
    configured = session.configure(approval_mode="read_only", model="opus")
    assert (configured.approval_mode, configured.model) == ("read_only", "opus")
    first = session.turns.start("hello", idempotency_key="turn-once")
    second = session.turns.start("hello", idempotency_key="turn-once")
    assert second.id == first.id
    logged = [e.type for e in session.events_page().events]
    assert logged.count("session.configured") == 1
    assert [t.id for t in session.turns.list()] == [first.id]
