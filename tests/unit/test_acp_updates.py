"""The ACP event mapping and fault classification, on the recorded traffic of seven agents.

Each case replays a capture (tests/fixtures/acp) through ``TurnTranslator`` the way the
provider feeds it: the agent's ``session/update`` notifications and permission requests of a
prompt, in order, the client's recorded answers, then the prompt's answer (a result or a
JSON-RPC error), each parsed with the ACP SDK's own types.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp.schema import (
    AgentMessageChunk,
    PromptResponse,
    RequestPermissionRequest,
    SessionNotification,
    TextContentBlock,
    UsageUpdate,
)

from app.events import EventData, Usage
from app.providers.acp import faults
from app.providers.acp.updates import TurnTranslator, option_for
from app.providers.base import ApprovalRequest, TurnOutcome

FIXTURES = Path(__file__).parent.parent / "fixtures" / "acp"
AGENTS = ("gemini", "copilot", "qwen", "codebuddy", "claude", "codex", "opencode")
REJECT_KINDS = ("reject_once", "reject_always")


@dataclass
class Turn:
    prompt: str
    events: list[EventData] = field(default_factory=list)
    approvals: list[ApprovalRequest] = field(default_factory=list)
    outcome: TurnOutcome | None = None

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if kind == e.TYPE]

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.of("message.delta"))


def replay(case: str) -> list[Turn]:
    """Every prompt of ``case`` as the translator saw it."""
    translator = TurnTranslator("acp:test")
    turns: list[Turn] = []
    prompts: dict[int, Turn] = {}
    asked: dict[Any, RequestPermissionRequest] = {}
    current: Turn | None = None
    interrupted = False
    for line in (FIXTURES / f"acp-{case}.traffic.jsonl").read_text().splitlines():
        record = json.loads(line)
        message, sent = record["msg"], record["dir"] == "send"
        method = message.get("method")
        if sent and method == "session/prompt":
            current = Turn(prompt=message["params"]["prompt"][0]["text"])
            prompts[message["id"]] = current
            turns.append(current)
            translator.begin()
            interrupted = False
        elif sent and method == "session/cancel":
            interrupted = True
        elif not sent and method == "session/update" and current is not None:
            update = SessionNotification.model_validate(message["params"]).update
            current.events.extend(translator.update(update))
        elif not sent and method == "session/request_permission" and current is not None:
            request = RequestPermissionRequest.model_validate(message["params"])
            events, approval = translator.permission(request)
            current.events.extend(events)
            current.approvals.append(approval)
            asked[message["id"]] = request
        elif sent and method is None and message.get("id") in asked:
            request = asked.pop(message["id"])
            chosen = message["result"]["outcome"].get("optionId")
            kinds = {o.option_id: o.kind for o in request.options}
            if kinds.get(chosen) in REJECT_KINDS:
                translator.denied(request.tool_call.tool_call_id)
        elif not sent and method is None and message.get("id") in prompts:
            turn = prompts.pop(message["id"])
            if "result" in message:
                response = PromptResponse.model_validate(message["result"])
                events, turn.outcome = translator.finish(response, interrupted=interrupted)
            else:
                error = message["error"]
                classified = faults.from_rpc_error(
                    "acp:test", error["code"], error["message"], error.get("data")
                )
                events, turn.outcome = translator.fail(classified, interrupted=interrupted)
            turn.events.extend(events)
            current = None
    return turns


@pytest.mark.parametrize("agent", AGENTS)
def test_a_text_turn_streams_one_message_and_completes_with_it(agent: str) -> None:
    [turn] = replay(f"{agent}-text")
    assert turn.outcome is not None
    assert turn.outcome.status == "completed", turn.outcome
    assert turn.text
    completed = turn.of("message.completed")
    assert completed
    assert completed[-1].text == turn.outcome.final_text
    assert turn.outcome.final_text.strip()
    assert not turn.of("warning")
    assert not turn.of("retry.scheduled")


@pytest.mark.parametrize("agent", AGENTS)
def test_an_allowed_tool_call_starts_asks_and_completes(agent: str) -> None:
    [turn] = replay(f"{agent}-tool-allow")
    [approval] = turn.approvals
    assert "touch stub_touched" in json.dumps(approval.input)
    assert {"allow", "deny"} <= set(approval.options)
    [started] = turn.of("tool.started")
    assert started.kind == "command"
    assert "touch stub_touched" in json.dumps(started.input)
    [done] = turn.of("tool.completed")
    assert turn.events.index(started) < turn.events.index(done)
    assert done.tool_id == started.tool_id == approval.tool_id
    assert done.status == "completed"
    if agent != "gemini":  # Gemini CLI 0.61 reports no output: content [], no rawOutput
        assert "stub-tool-ok" in (done.output or "")
    assert turn.outcome is not None
    assert turn.outcome.status == "completed", turn.outcome
    assert turn.outcome.final_text.startswith("Tool finished")


@pytest.mark.parametrize("agent", AGENTS)
def test_a_denied_tool_call_ends_denied_and_the_turn_completes(agent: str) -> None:
    [turn] = replay(f"{agent}-tool-reject")
    [started] = turn.of("tool.started")
    [done] = turn.of("tool.completed")
    assert (done.tool_id, done.status) == (started.tool_id, "denied")
    # Codex and CodeBuddy end the turn "cancelled" after a denial: an answer, not an interrupt.
    assert turn.outcome is not None
    assert turn.outcome.status == "completed", turn.outcome
    # Copilot's "Info: Operation cancelled by user" is a notice, not the agent's answer.
    assert not turn.outcome.final_text.startswith("Info:")


@pytest.mark.parametrize("agent", AGENTS)
def test_a_cancelled_turn_is_interrupted_and_the_next_one_answers(agent: str) -> None:
    case = "codebuddy-cancel-gap1s" if agent == "codebuddy" else f"{agent}-cancel"
    cancelled, after = replay(case)
    assert cancelled.outcome is not None
    assert cancelled.outcome.status == "interrupted"
    assert cancelled.text.strip()  # the partial answer was streamed before the cancel
    assert after.outcome is not None
    assert after.outcome.status == "completed"


def test_codebuddy_cancels_a_prompt_sent_right_after_a_cancelled_one() -> None:
    """Recorded as it is: the second prompt comes back ``cancelled`` without a model call; with
    no interrupt asked for it, it is an (empty) answer, not an interrupted turn."""
    _, after = replay("codebuddy-cancel")
    assert after.outcome is not None
    assert (after.outcome.status, after.outcome.stop_reason) == ("completed", "cancelled")


@pytest.mark.parametrize("agent", AGENTS)
def test_every_turn_of_a_conversation_completes(agent: str) -> None:
    turns = replay(f"{agent}-multiturn")
    assert [t.outcome.status for t in turns if t.outcome] == ["completed", "completed"]


@pytest.mark.parametrize("agent", AGENTS)
def test_the_history_replayed_by_a_load_is_not_an_event_of_the_next_turn(agent: str) -> None:
    [turn] = replay(f"{agent}-resume")
    assert turn.outcome is not None
    assert turn.outcome.status == "completed"
    assert "first prompt" not in turn.text
    assert "second prompt" not in turn.text


@pytest.mark.parametrize(
    ("case", "kind"),
    [
        ("gemini-fault-error500-knob", "server_error"),  # JSON-RPC error, code = HTTP status
        ("qwen-fault-error500-knob", "server_error"),  # -32603, data.details "500 …"
        ("claude-fault-error500-knob", "server_error"),  # -32603 "API Error: 500 …"
        ("opencode-fault-error500", "server_error"),  # -32603, wording only
        ("opencode-fault-error429", "rate_limited"),
        ("codebuddy-fault-error500", "server_error"),  # refusal + _meta errorMessage
        ("codebuddy-fault-error429", "rate_limited"),
        ("copilot-fault-error500", "server_error"),  # "Error: … Last error: 500" + end_turn
        ("copilot-fault-error429", "rate_limited"),
        ("codex-fault-error500", "server_error"),  # systemError + text + end_turn
        ("codex-fault-error429", "rate_limited"),
    ],
)
def test_each_shape_of_a_failed_model_request_is_classified(case: str, kind: str) -> None:
    [turn] = replay(case)
    assert turn.outcome is not None
    assert turn.outcome.status == "failed", turn.outcome
    assert turn.outcome.error is not None
    assert turn.outcome.error.kind == kind, turn.outcome.error
    assert turn.outcome.error.retryable
    # The error text is never shown as the agent's answer.
    assert not turn.of("message.delta"), turn.text


def test_the_cli_s_own_retries_are_reported_as_cli_retries() -> None:
    [copilot] = replay("copilot-fault-error500")
    retries = copilot.of("retry.scheduled")
    assert [r.attempt for r in retries] == [1, 2, 3, 4, 5]
    assert {(r.source, r.kind) for r in retries} == {("cli", "server_error")}
    [codex] = replay("codex-fault-error500")
    retries = codex.of("retry.scheduled")
    assert [(r.attempt, r.max_attempts) for r in retries] == [(n, 5) for n in range(1, 6)]


def test_the_claude_adapter_s_informational_text_is_a_warning() -> None:
    translator = TurnTranslator("acp:claude")
    chunk = AgentMessageChunk(
        session_update="agent_message_chunk",
        content=TextContentBlock(type="text", text="**Warning:** auto mode changes"),
        field_meta={"claudeCode": {"kind": "informational"}},
    )
    [event] = translator.update(chunk)
    assert event.TYPE == "warning"


def test_options_are_chosen_by_kind_never_by_id() -> None:
    request = RequestPermissionRequest.model_validate(
        {
            "sessionId": "s",
            "toolCall": {"toolCallId": "t"},
            "options": [
                {"optionId": "proceed_always", "name": "Always", "kind": "allow_always"},
                {"optionId": "proceed_once", "name": "Once", "kind": "allow_once"},
                {"optionId": "cancel", "name": "No", "kind": "reject_once"},
            ],
        }
    )
    assert option_for("allow", request.options) == "proceed_once"
    assert option_for("allow_session", request.options) == "proceed_always"
    assert option_for("deny", request.options) == "cancel"
    only_always = [o for o in request.options if o.kind != "allow_once"]
    assert option_for("allow", only_always) is None  # never widened to "always"


@pytest.mark.parametrize(
    ("code", "message", "data", "kind"),
    [
        (
            401,
            '{"error":{"code":401,"message":"API key not valid","status":"UNAUTHENTICATED"}}',
            None,
            "auth",
        ),
        (-32000, "Authentication required", None, "auth"),
        (-32603, "Internal error", {"details": "429 stub: rate limited"}, "rate_limited"),
        (-32603, "Internal error: unauthorized", {"errorName": "APIError"}, "auth"),
        (-32601, "Method not found", {"method": "session/prompt"}, "agent_error"),
    ],
)
def test_json_rpc_errors_are_classified(code: int, message: str, data: Any, kind: str) -> None:
    assert faults.from_rpc_error("acp:test", code, message, data).kind == kind


def test_copilot_s_authentication_failure_is_auth_not_an_answer() -> None:
    """Copilot 1.0.102 on a 401 from its model (recorded live against the stub)."""
    translator = TurnTranslator("acp:copilot")
    text = (
        "Error: Authentication failed with provider at http://127.0.0.1:46705/v1 (HTTP 401).\n"
        "  Check your COPILOT_PROVIDER_API_KEY, COPILOT_PROVIDER_API_KEY_COMMAND, or "
        "COPILOT_PROVIDER_BEARER_TOKEN."
    )
    chunk = AgentMessageChunk(
        session_update="agent_message_chunk", content=TextContentBlock(type="text", text=text)
    )
    assert translator.update(chunk) == []
    _, outcome = translator.finish(PromptResponse(stop_reason="end_turn"), interrupted=False)
    assert outcome.error is not None
    assert (outcome.status, outcome.error.kind) == ("failed", "auth")


def spent_so_far(amount: float) -> UsageUpdate:
    """The Claude adapter's ``usage_update``: the session's cost so far."""
    update = {"sessionUpdate": "usage_update", "used": 1, "size": 10}
    return UsageUpdate.model_validate({**update, "cost": {"amount": amount, "currency": "USD"}})


def test_the_usage_updates_of_a_turn_tell_what_it_has_cost_so_far() -> None:
    translator = TurnTranslator("acp:test")
    assert translator.usage_so_far() is None
    translator.update(spent_so_far(0.25))
    assert translator.usage_so_far() == Usage(cost_usd=0.25)
    translator.begin()  # the next turn counts from the session's total so far
    translator.update(spent_so_far(0.4))
    so_far = translator.usage_so_far()
    assert so_far is not None
    assert so_far.cost_usd == pytest.approx(0.15)
