"""A client generated from docs/openapi.json drives the real Claude Code CLI through the gateway.

``openapi-python-client`` builds the package from the committed document during the run
(offline); the test then uses only that package — its typed models, enums, the event union
and its problem responses — for a whole session: create, a turn polled to its end, an
approval allowed and its tool's effect seen, and a typed page of events. Whatever the
generated client cannot express is a gap in the contract.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.e2e.conftest import GatewayFactory
from tests.gateway import ROOT, TOKEN, wait_until

pytestmark = pytest.mark.e2e

PACKAGE = "agent_gateway_client"
DOCUMENT = ROOT / "docs" / "openapi.json"
CONFIG = ROOT / "tests" / "openapi-client-config.yaml"
GENERATOR = Path(sys.executable).parent / "openapi-python-client"
TURN_END = {"completed", "failed", "interrupted"}


class Generated:
    """The generated package's modules, looked up by name."""

    def __init__(self, root: ModuleType) -> None:
        self.root = root
        self.models = importlib.import_module(f"{PACKAGE}.models")

    def api(self, name: str) -> Any:
        """``sessions.create_session`` → that operation's module (``sync``, ``sync_detailed``)."""
        return importlib.import_module(f"{PACKAGE}.api.{name}")

    def model(self, name: str) -> Any:
        return getattr(self.models, name)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Generated]:
    out = tmp_path_factory.mktemp("client")
    result = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(DOCUMENT),
            "--output-path",
            str(out / PACKAGE),
            "--meta",
            "none",
            "--config",
            str(CONFIG),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout + result.stderr, result.stdout + result.stderr
    sys.path.insert(0, str(out))
    try:
        yield Generated(importlib.import_module(PACKAGE))
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def _wait_turn(gen: Generated, client: Any, session_id: str, turn_id: str) -> Any:
    """Poll ``getTurn`` until the turn has ended; the typed turn."""
    get_turn = gen.api("sessions.get_turn")

    def ended() -> Any:
        turn = get_turn.sync(session_id, turn_id, client=client)
        assert isinstance(turn, gen.model("TurnPublic")), turn
        return turn if turn.status.value in TURN_END else None

    return wait_until(ended, timeout=60, what=f"turn {turn_id} to end")


def test_generated_client_runs_a_session_turn_approval_and_event_page(
    generated: Generated, make_gateway: GatewayFactory, workspace: Path
) -> None:
    gen = generated
    gateway = make_gateway("claude_code").start()
    with (
        gen.root.AuthenticatedClient(
            base_url=gateway.base_url, token=TOKEN, raise_on_unexpected_status=True
        ) as client,
        gen.root.Client(base_url=gateway.base_url, raise_on_unexpected_status=True) as anonymous,
    ):
        _drive(gen, client, anonymous, workspace)


def _drive(gen: Generated, client: Any, anonymous: Any, workspace: Path) -> None:
    problem = gen.model("Problem")

    # Errors are typed problems too.
    missing = gen.api("sessions.get_session").sync("ses_missing", client=client)
    assert isinstance(missing, problem)
    assert missing.status == 404
    assert missing.type_.endswith(":not_found")
    refused = gen.api("sessions.list_sessions").sync_detailed(client=anonymous)
    assert refused.status_code == 401
    assert isinstance(refused.parsed, problem)
    health = gen.api("health.healthz").sync(client=anonymous)
    assert health.status == "ok"

    # A session.
    session = gen.api("sessions.create_session").sync(
        client=client, body=gen.model("SessionCreate")(workspace=str(workspace))
    )
    assert isinstance(session, gen.model("SessionPublic")), session
    assert session.provider == "claude_code"
    assert session.status.value == "idle"
    assert session.selection.reason.value in {"default", "explicit"}
    sid = session.id

    # A full turn, polled to its end.
    create_turn = gen.api("sessions.create_turn")
    turn = create_turn.sync(sid, client=client, body=gen.model("TurnCreate")(prompt="Say hello"))
    assert isinstance(turn, gen.model("TurnPublic")), turn
    assert turn.status.value in {"queued", "running"}
    done = _wait_turn(gen, client, sid, turn.id)
    assert done.status.value == "completed", done
    assert done.final_text == "Hello from stub."
    assert done.attempts >= 1
    busy_free = gen.api("sessions.interrupt_turn").sync(sid, client=client)
    assert isinstance(busy_free, problem)
    assert busy_free.status == 409

    # An approval: list it while pending, allow it, see the tool's effect.
    turn = create_turn.sync(
        sid, client=client, body=gen.model("TurnCreate")(prompt="[[tool:bash touch allowed.txt]]")
    )
    list_approvals = gen.api("sessions.list_approvals")
    pending_status = gen.model("ListApprovalsStatus").PENDING

    def pending() -> Any:
        listed = list_approvals.sync(sid, client=client, status=pending_status)
        assert isinstance(listed, gen.model("ApprovalList")), listed
        return listed.approvals

    (approval,) = wait_until(pending, timeout=60, what="a pending approval")
    assert approval.turn_id == turn.id
    assert "touch allowed.txt" in str(approval.input_.to_dict())
    assert not (workspace / "allowed.txt").exists()
    answered = gen.api("sessions.respond_approval").sync(
        sid,
        approval.id,
        client=client,
        body=gen.model("ApprovalRespond")(decision=gen.model("ApprovalRespondDecision").ALLOW),
    )
    assert isinstance(answered, gen.model("ApprovalPublic")), answered
    assert answered.status.value == "allowed"
    again = gen.api("sessions.respond_approval").sync(
        sid,
        approval.id,
        client=client,
        body=gen.model("ApprovalRespond")(decision=gen.model("ApprovalRespondDecision").DENY),
    )
    assert isinstance(again, problem)
    assert again.status == 409
    done = _wait_turn(gen, client, sid, turn.id)
    assert done.status.value == "completed", done
    assert done.final_text.startswith("Tool said:")
    assert (workspace / "allowed.txt").exists()

    # The events, as a typed JSON page: every item is one member of the event union. The
    # turn's row ends just before its terminal event is logged, so wait for that event.
    get_events = gen.api("events.get_events")
    turn_completed = gen.model("TurnCompletedEvent")

    def logged() -> Any:
        page = get_events.sync(sid, client=client, after=0, limit=1000)
        assert isinstance(page, gen.model("EventPage")), page
        ended = [e for e in page.events if isinstance(e, turn_completed)]
        return page if len(ended) == 2 else None

    page = wait_until(logged, timeout=10, what="the second turn.completed event")
    events = page.events
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert page.next_after == page.last_seq == events[-1].seq
    for event in events:
        assert event.session_id == sid
        assert type(event).__name__ == _envelope_class(event.type_), event
    first = events[0]
    assert isinstance(first, gen.model("SessionCreatedEvent"))
    assert first.data.workspace == str(workspace)
    asked = [e for e in events if isinstance(e, gen.model("ApprovalRequestedEvent"))]
    assert [e.data.approval_id for e in asked] == [approval.id]
    assert {o.decision.value for o in asked[0].data.options} >= {"allow", "deny"}
    resolved = [e for e in events if isinstance(e, gen.model("ApprovalResolvedEvent"))]
    assert [(e.data.decision.value, e.data.by.value) for e in resolved] == [("allow", "client")]
    tools = [e for e in events if isinstance(e, gen.model("ToolCompletedEvent"))]
    assert [e.data.status.value for e in tools] == ["completed"]
    finals = [e for e in events if isinstance(e, turn_completed)]
    assert [e.data.final_text for e in finals] == ["Hello from stub.", done.final_text]
    deltas = [e for e in events if isinstance(e, gen.model("MessageDeltaEvent"))]
    assert "Hello from stub." in "".join(e.data.text for e in deltas)
    assert all(isinstance(e.turn_id, str) for e in deltas)

    # Paging on from the end: nothing more, and a cursor past the end is a typed problem.
    rest = get_events.sync(sid, client=client, after=page.next_after)
    assert isinstance(rest, gen.model("EventPage"))
    assert rest.events == []
    assert rest.next_after == page.last_seq
    past = get_events.sync(sid, client=client, after=page.last_seq + 5)
    assert isinstance(past, gen.model("ValidationProblem"))
    assert past.status == 422

    closed = gen.api("sessions.delete_session").sync(sid, client=client)
    assert isinstance(closed, gen.model("SessionPublic"))
    assert closed.status.value == "closed"


def _envelope_class(event_type: str) -> str:
    """``approval.requested`` → ``ApprovalRequestedEvent`` (``usage`` → ``UsageEvent``)."""
    return "".join(part.capitalize() for part in event_type.replace("_", ".").split(".")) + "Event"
