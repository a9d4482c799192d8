"""The agent's questions, end to end: the real CLI asks through its question tool (the stub
model calls it), the gateway shows ``question.asked``, a client answers over REST or the
WebSocket, and the answer is what the model reads back as the tool's result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from tests.e2e.conftest import GatewayFactory
from tests.e2e.providers import acp_claude
from tests.e2e.test_contract import SSE, create_session, start_turn
from tests.gateway import TOKEN, GatewayProcess, SseReader, follow, is_turn_end, log_lines
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e

COLOR = {
    "question": "Which color?",
    "header": "Color",
    "multiSelect": False,
    "options": [
        {"label": "Red", "description": "warm"},
        {"label": "Blue", "description": "cool"},
    ],
}
TOPPINGS = {
    "question": "Which toppings?",
    "header": "Toppings",
    "multiSelect": True,
    "options": [
        {"label": "Cheese", "description": "melted"},
        {"label": "Olives", "description": "black"},
        {"label": "Basil", "description": "fresh"},
    ],
}
COLOR_ASKED = {
    "prompt": "Which color?",
    "header": "Color",
    "options": [
        {"label": "Red", "description": "warm"},
        {"label": "Blue", "description": "cool"},
    ],
    "multi_select": False,
    "free_text": True,  # Claude Code's "Other"; the ACP adapter's question_0_custom field
}
"""``COLOR`` as the gateway asks it (``question.asked``)."""
ASK = "[[call:AskUserQuestion " + json.dumps({"questions": [COLOR, TOPPINGS]}) + "]]"


def _is_asked(envelope: dict[str, Any]) -> bool:
    return bool(envelope["type"] == "question.asked")


def _answer(
    client: httpx.Client, sid: str, qid: str, answers: list[dict[str, Any]]
) -> httpx.Response:
    return client.post(f"/v1/sessions/{sid}/questions/{qid}", json={"answers": answers})


def _tool_results(stub: StubLLM) -> list[str]:
    """The text of every tool_result the CLI sent the model, once per tool call (a later
    request of the conversation, or a side query forked from it, repeats the history)."""
    texts: dict[str, str] = {}
    for request in stub.main_message_requests():
        for message in request.body["messages"]:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result":
                    inner = block.get("content")
                    text = inner if isinstance(inner, str) else json.dumps(inner)
                    texts.setdefault(str(block.get("tool_use_id")), text)
    return list(texts.values())


@pytest.mark.parametrize("mode", ["ask", "allow_all"])
def test_claude_question_is_answered_over_rest_and_reaches_the_model(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM, mode: str
) -> None:
    # allow_all runs Claude Code with bypassPermissions (IS_SANDBOX: the tests run as root);
    # a question still goes to the user, never to the policy.
    gateway = make_gateway(sessions={"allowed_approval_modes": ["ask", "allow_all"]})
    gateway.config["providers"]["claude_code"]["env"]["IS_SANDBOX"] = "1"
    gateway.start()
    with gateway.client() as client:
        session = create_session(client, workspace, approval_mode=mode)
        sid = session["id"]
        headers = {**SSE, "Last-Event-ID": str(session["last_seq"])}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            start_turn(client, sid, ASK)
            before = reader.until(_is_asked)
            asked = before[-1]["data"]
            assert not [e for e in before if e["type"] == "approval.requested"]
            qid = asked["question_id"]
            assert asked["tool_id"]
            assert asked["questions"] == [
                COLOR_ASKED,
                {
                    "prompt": "Which toppings?",
                    "header": "Toppings",
                    "options": [
                        {"label": "Cheese", "description": "melted"},
                        {"label": "Olives", "description": "black"},
                        {"label": "Basil", "description": "fresh"},
                    ],
                    "multi_select": True,
                    "free_text": True,
                },
            ]
            assert client.get(f"/v1/sessions/{sid}").json()["status"] == "awaiting_approval"
            pending = client.get(f"/v1/sessions/{sid}/questions", params={"status": "pending"})
            assert [q["id"] for q in pending.json()["questions"]] == [qid]
            assert client.get(f"/v1/sessions/{sid}/approvals").json()["approvals"] == []

            # Answers that do not fit are refused with what to fix; the question stays open.
            one = _answer(client, sid, qid, [{"selected": ["Blue"]}])
            _assert_problem(one, 422, "one answer per question")
            unknown = _answer(client, sid, qid, [{"selected": ["Green"]}, {"selected": []}])
            _assert_problem(unknown, 422, "'Green', which is not offered")
            assert unknown.json()["offered"] == ["Red", "Blue"]
            two = _answer(client, sid, qid, [{"selected": ["Red", "Blue"]}, {"text": "anchovies"}])
            _assert_problem(two, 422, "the question takes one")
            empty = _answer(client, sid, qid, [{"selected": ["Red"]}, {}])
            _assert_problem(empty, 422, "is empty")
            missing = _answer(client, sid, "qst_nope", [{"selected": ["Red"]}, {"text": "x"}])
            _assert_problem(missing, 404, "does not exist")
            as_approval = client.post(
                f"/v1/sessions/{sid}/approvals/{qid}", json={"decision": "allow"}
            )
            assert as_approval.status_code == 404

            answers: list[dict[str, Any]] = [
                {"selected": ["Blue"]},
                {"selected": ["Cheese", "Basil"], "text": "anchovies"},
            ]
            answered = _answer(client, sid, qid, answers)
            assert answered.status_code == 200, answered.text
            assert answered.json()["status"] == "answered"
            assert answered.json()["answered_by"] == "admin"
            again = _answer(client, sid, qid, answers)
            _assert_problem(again, 409, "already answered")
            assert again.json()["type"].endswith(":question_not_pending")
            after = reader.until(is_turn_end)
    resolved = next(e for e in after if e["type"] == "question.resolved")["data"]
    assert resolved == {
        "question_id": qid,
        "answers": [
            {"selected": ["Blue"], "text": None},
            {"selected": ["Cheese", "Basil"], "text": "anchovies"},
        ],
        "by": "client",
        "reason": "answered",
        "answered_by": "admin",
    }
    expected = '"Which color?"="Blue", "Which toppings?"="Cheese, Basil, anchovies"'
    assert any(expected in text for text in _tool_results(stub)), _tool_results(stub)
    assert after[-1]["type"] == "turn.completed"
    assert expected in after[-1]["data"]["final_text"]
    [logged] = [line for line in log_lines(gateway) if line.get("event") == "question.resolved"]
    assert (logged["question_id"], logged["reason"], logged["answered_by"]) == (
        qid,
        "answered",
        "admin",
    )
    assert "anchovies" not in gateway.log()  # the user's words stay in the event log


def test_claude_question_pending_at_an_interrupt_is_cancelled(
    gateway: GatewayProcess, workspace: Path, stub: StubLLM
) -> None:
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        headers = {**SSE, "Last-Event-ID": str(session["last_seq"])}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            start_turn(client, sid, ASK)
            qid = reader.until(_is_asked)[-1]["data"]["question_id"]
            assert client.post(f"/v1/sessions/{sid}/interrupt").status_code == 202
            ended = reader.until(is_turn_end)
        resolved = next(e for e in ended if e["type"] == "question.resolved")["data"]
        assert (resolved["question_id"], resolved["reason"], resolved["answers"]) == (
            qid,
            "cancelled",
            None,
        )
        assert ended[-1]["type"] == "turn.interrupted"
        late = _answer(client, sid, qid, [{"selected": ["Red"]}, {"text": "x"}])
        _assert_problem(late, 409, "already cancelled")
        assert client.get(f"/v1/sessions/{sid}").json()["status"] == "idle"


def test_claude_question_nobody_answers_expires(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    gateway = make_gateway(sessions={"approval_timeout_s": 1.5}).start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        headers = {**SSE, "Last-Event-ID": str(session["last_seq"])}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            start_turn(client, sid, ASK)
            events = reader.until(is_turn_end)
        qid = next(e for e in events if e["type"] == "question.asked")["data"]["question_id"]
        resolved = next(e for e in events if e["type"] == "question.resolved")["data"]
        assert resolved["reason"] == "expired"
        assert resolved["by"] == "gateway"
        assert resolved["answers"] is None
        assert events[-1]["type"] == "turn.completed"
        assert "did not answer the questions in time" in events[-1]["data"]["final_text"]
        late = _answer(client, sid, qid, [{"selected": ["Red"]}, {"selected": ["Olives"]}])
        _assert_problem(late, 409, "already expired")
        listed = client.get(f"/v1/sessions/{sid}/questions").json()["questions"]
        assert [(q["id"], q["status"], q["answers"]) for q in listed] == [(qid, "expired", None)]


def test_claude_question_is_answered_over_the_websocket(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    gateway = make_gateway().start()
    with gateway.client() as client:
        session = create_session(client, workspace)
    sid = session["id"]
    url = f"{gateway.ws_url}/v1/sessions/{sid}/ws?after={session['last_seq']}"
    ask = "[[call:AskUserQuestion " + json.dumps({"questions": [COLOR]}) + "]]"
    with connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send(json.dumps({"type": "turn.start", "prompt": ask}))
        qid = _ws_until(ws, _is_asked)[-1]["data"]["question_id"]
        frame = {"type": "question.answer", "question_id": qid, "answers": [{"text": "teal"}]}
        ws.send(json.dumps({**frame, "answers": [{"selected": ["Teal"]}]}))
        error = _ws_until(ws, lambda f: f["type"] == "error")[-1]
        assert error["request"] == "question.answer"
        assert error["problem"]["status"] == 422
        ws.send(json.dumps(frame))
        frames = _ws_until(ws, is_turn_end)
    ack = next(f for f in frames if f["type"] == "ack")
    assert ack["request"] == "question.answer"
    assert ack["question"]["answers"] == [{"selected": [], "text": "teal"}]
    assert frames[-1]["type"] == "turn.completed"
    assert '"Which color?"="teal"' in frames[-1]["data"]["final_text"]
    assert any('"Which color?"="teal"' in text for text in _tool_results(stub))


def test_a_pending_question_ends_with_its_session_and_after_a_gateway_kill(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    gateway = make_gateway().start()
    with gateway.client() as client:
        closed = create_session(client, workspace)
        killed = create_session(client, workspace)
        asked: dict[str, str] = {}
        for session in (closed, killed):
            sid = session["id"]
            start_turn(client, sid, ASK)
            events = follow(client, sid, _is_asked, after=session["last_seq"])
            asked[sid] = events[-1]["data"]["question_id"]
        assert client.delete(f"/v1/sessions/{closed['id']}").status_code == 200
        ended = follow(client, closed["id"], lambda e: e["type"] == "session.closed")
        resolved = next(e for e in ended if e["type"] == "question.resolved")["data"]
        assert (resolved["question_id"], resolved["reason"]) == (
            asked[closed["id"]],
            "session_closed",
        )
    assert gateway.process is not None
    gateway.process.kill()
    gateway.stop()
    gateway.start()
    with gateway.client() as client:
        sid = killed["id"]
        events = follow(client, sid, lambda e: e["type"] == "question.resolved")
        assert events[-1]["data"] == {
            "question_id": asked[sid],
            "answers": None,
            "by": "gateway",
            "reason": "gateway_restart",
            "answered_by": None,
        }
        [question] = client.get(f"/v1/sessions/{sid}/questions").json()["questions"]
        assert question["status"] == "expired"
        late = _answer(client, sid, asked[sid], [{"selected": ["Red"]}, {"text": "x"}])
        _assert_problem(late, 409, "already expired")


def test_opencode_question_is_answered_and_reaches_the_model(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    gateway = make_gateway("opencode").start()
    color = {
        "question": "Which color?",
        "header": "Color",
        "options": [
            {"label": "Red", "description": "warm"},
            {"label": "Blue", "description": "cool"},
        ],
    }
    ask = "[[call:question " + json.dumps({"questions": [color]}) + "]]"
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        headers = {**SSE, "Last-Event-ID": str(session["last_seq"])}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            start_turn(client, sid, ask)
            asked = reader.until(_is_asked)[-1]["data"]
            assert asked["questions"] == [COLOR_ASKED]
            qid = asked["question_id"]
            refused = _answer(client, sid, qid, [{"selected": ["Green"]}])
            _assert_problem(refused, 422, "not offered")
            answered = _answer(client, sid, qid, [{"selected": ["Blue"], "text": "navy"}])
            assert answered.status_code == 200, answered.text
            after = reader.until(is_turn_end)
    assert [e["data"]["reason"] for e in after if e["type"] == "question.resolved"] == ["answered"]
    expected = '"Which color?"="Blue, navy"'
    sent = [json.dumps(r.body) for r in stub.model_requests()]
    assert any(expected.replace('"', '\\"') in body for body in sent), sent[-1][-2000:]
    assert after[-1]["type"] == "turn.completed"
    assert expected in after[-1]["data"]["final_text"]


def test_opencode_question_nobody_answers_reaches_the_model_as_unanswered(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    gateway = make_gateway("opencode", sessions={"approval_timeout_s": 1.5}).start()
    color = {
        "question": "Which color?",
        "header": "Color",
        "options": [{"label": "Red", "description": "warm"}],
    }
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        start_turn(client, sid, "[[call:question " + json.dumps({"questions": [color]}) + "]]")
        events = follow(client, sid, after=session["last_seq"])
    resolved = next(e for e in events if e["type"] == "question.resolved")["data"]
    assert (resolved["reason"], resolved["answers"]) == ("expired", None)
    assert events[-1]["type"] == "turn.completed"
    assert '"Which color?"="Unanswered"' in events[-1]["data"]["final_text"]


def _acp_claude_gateway(
    make_gateway: GatewayFactory, stub: StubLLM, home: Path, **sessions: Any
) -> GatewayProcess:
    """A gateway whose one provider is the Claude Agent ACP adapter, which asks
    AskUserQuestion as a form elicitation (the gateway advertises ``elicitation.form``)."""
    gateway = make_gateway(sessions=sessions) if sessions else make_gateway()
    gateway.config["providers"]["claude_code"] = {"enabled": False}
    gateway.config["providers"]["acp:claude"] = acp_claude(stub, home)
    gateway.config["selection"]["default"] = "acp:claude"
    return gateway.start()


def test_acp_elicitation_is_asked_answered_and_reaches_the_model(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM, tmp_path: Path
) -> None:
    gateway = _acp_claude_gateway(make_gateway, stub, tmp_path / "home")
    ask = "[[call:AskUserQuestion " + json.dumps({"questions": [COLOR]}) + "]]"
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        headers = {**SSE, "Last-Event-ID": str(session["last_seq"])}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            start_turn(client, sid, ask)
            before = reader.until(_is_asked)
            asked = before[-1]["data"]
            assert not [e for e in before if e["type"] == "approval.requested"]
            assert asked["tool_id"]
            assert asked["questions"] == [COLOR_ASKED]
            qid = asked["question_id"]
            refused = _answer(client, sid, qid, [{"selected": ["Green"]}])
            _assert_problem(refused, 422, "not offered")
            answered = _answer(client, sid, qid, [{"selected": ["Blue"]}])
            assert answered.status_code == 200, answered.text
            after = reader.until(is_turn_end)
        assert [e["data"]["reason"] for e in after if e["type"] == "question.resolved"] == [
            "answered"
        ]
        assert any('"Which color?"="Blue"' in t for t in _tool_results(stub)), _tool_results(stub)
        assert after[-1]["type"] == "turn.completed", after[-1]

        # Several questions in one form: a choice answered in the user's own words, and a
        # multi-select with picks and text.
        last_seq = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
        start_turn(client, sid, ASK)
        asked = follow(client, sid, _is_asked, after=last_seq)[-1]["data"]
        assert [(q["prompt"], q["header"], q["multi_select"]) for q in asked["questions"]] == [
            ("Which color?", "Color", False),
            ("Which toppings?", "Toppings", True),
        ]
        answers: list[dict[str, Any]] = [
            {"text": "teal"},
            {"selected": ["Cheese", "Basil"], "text": "anchovies"},
        ]
        answered = _answer(client, sid, asked["question_id"], answers)
        assert answered.status_code == 200, answered.text
        events = follow(client, sid, after=last_seq)
    expected = '"Which color?"="teal", "Which toppings?"="Cheese, Basil, anchovies"'
    assert any(expected in text for text in _tool_results(stub)), _tool_results(stub)
    assert events[-1]["type"] == "turn.completed", events[-1]


def test_acp_elicitation_nobody_answers_is_declined_and_the_turn_goes_on(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM, tmp_path: Path
) -> None:
    gateway = _acp_claude_gateway(make_gateway, stub, tmp_path / "home", approval_timeout_s=1.5)
    ask = "[[call:AskUserQuestion " + json.dumps({"questions": [COLOR]}) + "]]"
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        start_turn(client, sid, ask)
        events = follow(client, sid, after=session["last_seq"])
    resolved = next(e for e in events if e["type"] == "question.resolved")["data"]
    assert (resolved["reason"], resolved["answers"]) == ("expired", None)
    # The form is declined: the adapter tells the model no one answered (not a tool error).
    assert _tool_results(stub) == ["The user did not answer the questions."]
    assert events[-1]["type"] == "turn.completed", events[-1]


def test_acp_elicitation_pending_at_an_interrupt_is_cancelled(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM, tmp_path: Path
) -> None:
    gateway = _acp_claude_gateway(make_gateway, stub, tmp_path / "home")
    ask = "[[call:AskUserQuestion " + json.dumps({"questions": [COLOR]}) + "]]"
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        start_turn(client, sid, ask)
        qid = follow(client, sid, _is_asked, after=session["last_seq"])[-1]["data"]["question_id"]
        assert client.post(f"/v1/sessions/{sid}/interrupt").status_code == 202
        events = follow(client, sid, after=session["last_seq"])
        resolved = next(e for e in events if e["type"] == "question.resolved")["data"]
        assert (resolved["question_id"], resolved["reason"]) == (qid, "cancelled")
        assert events[-1]["type"] == "turn.interrupted", events[-1]
        late = _answer(client, sid, qid, [{"selected": ["Red"]}])
        _assert_problem(late, 409, "already cancelled")


def _assert_problem(response: httpx.Response, status: int, words: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert words in response.json()["detail"], response.json()["detail"]


def _ws_until(ws: Any, predicate: Any) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    while True:
        frame = json.loads(ws.recv(timeout=30))
        frames.append(frame)
        if predicate(frame):
            return frames
