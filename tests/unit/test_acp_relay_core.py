"""The relay's protocol logic (``agent_gateway_acp.core``), message by message: what reaches
the editor and the gateway across connections made and lost."""

from __future__ import annotations

import itertools
import json
from typing import Any

from agent_gateway_acp.core import Output, RelayCore, ToEditor, ToGateway


def new_core() -> RelayCore:
    ids = itertools.count(1)
    return RelayCore(new_prompt_id=lambda: f"p{next(ids)}")


def to_gateway(outputs: list[Output]) -> list[dict[str, Any]]:
    return [json.loads(o.text) for o in outputs if isinstance(o, ToGateway)]


def to_editor(outputs: list[Output]) -> list[dict[str, Any]]:
    return [json.loads(o.text) for o in outputs if isinstance(o, ToEditor)]


def line(**message: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", **message})


def update(session: str, seq: int, text: str = "x", turn: str = "trn_1", **meta: Any) -> str:
    params = {
        "sessionId": session,
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": text},
        },
        "_meta": {"agentGateway": {"seq": seq, "turnId": turn, **meta}},
    }
    return line(method="session/update", params=params)


def opened(core: RelayCore, session: str = "ses_1", seq: int = 1) -> None:
    """Connected, initialized, one session open at ``seq``."""
    core.connected()
    core.from_editor(line(id=1, method="initialize", params={"protocolVersion": 1}))
    core.from_gateway(line(id=1, result={"protocolVersion": 1}))
    core.from_editor(line(id=2, method="session/new", params={"cwd": "/w", "mcpServers": []}))
    meta = {"_meta": {"agentGateway": {"seq": seq}}}
    core.from_gateway(line(id=2, result={"sessionId": session, **meta}))


def prompting(core: RelayCore, id: int = 3, session: str = "ses_1") -> dict[str, Any]:
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    return to_gateway(core.from_editor(line(id=id, method="session/prompt", params=params)))[0]


def reconnect(core: RelayCore) -> list[Output]:
    """Drop, connect again and answer the relay's initialize and reloads: all the core put
    out meanwhile."""
    outputs = core.disconnected()
    step = core.connected()
    outputs += step
    while not core.live:
        asked = [m for m in to_gateway(step) if str(m.get("id")).startswith("agent-gateway-acp")]
        assert asked, "restoring, and waiting for nothing"
        step = []
        for request in asked:
            step += core.from_gateway(line(id=request["id"], result={}))
        outputs += step
    return outputs


def test_messages_pass_through_unchanged_while_live() -> None:
    core = new_core()
    opened(core)
    text = line(id=9, method="session/set_mode", params={"sessionId": "ses_1", "modeId": "ask"})
    assert core.from_editor(text) == [ToGateway(text, 1)]
    assert core.from_gateway(update("ses_1", 2)) == [ToEditor(update("ses_1", 2))]


def test_a_prompt_carries_a_prompt_id_unless_the_editor_gave_one() -> None:
    core = new_core()
    opened(core)
    assert prompting(core)["params"]["_meta"]["agentGateway"] == {"promptId": "p1"}
    own = {"sessionId": "ses_1", "prompt": [], "_meta": {"agentGateway": {"promptId": "mine"}}}
    text = line(id=4, method="session/prompt", params=own)
    assert core.from_editor(text) == [ToGateway(text, 1)]


def test_a_reconnect_reloads_each_session_after_the_last_seq_relayed() -> None:
    core = new_core()
    opened(core, seq=4)
    core.from_gateway(update("ses_1", 7))
    core.disconnected()
    initialize = to_gateway(core.connected())
    assert [m["method"] for m in initialize] == ["initialize"]
    assert initialize[0]["params"] == {"protocolVersion": 1}
    reloads = to_gateway(core.from_gateway(line(id=initialize[0]["id"], result={})))
    assert reloads == [
        {
            "jsonrpc": "2.0",
            "id": reloads[0]["id"],
            "method": "session/load",
            "params": {
                "cwd": "/w",
                "mcpServers": [],
                "sessionId": "ses_1",
                "_meta": {"agentGateway": {"after": 7}},
            },
        }
    ]
    assert not core.live
    core.from_gateway(line(id=reloads[0]["id"], result={}))
    assert core.live


def test_the_relays_initialize_is_answered_to_the_relay_only() -> None:
    core = new_core()
    opened(core)
    core.disconnected()
    sent = to_gateway(core.connected())
    answer = core.from_gateway(line(id=sent[0]["id"], result={"protocolVersion": 1}))
    assert to_editor(answer) == []
    assert [m["method"] for m in to_gateway(answer)] == ["session/load"]


def test_an_update_already_relayed_is_not_relayed_again() -> None:
    core = new_core()
    opened(core)
    core.from_gateway(update("ses_1", 2, "a"))
    core.from_gateway(update("ses_1", 3, "b"))
    reconnect(core)
    assert core.from_gateway(update("ses_1", 3, "b")) == []
    assert to_editor(core.from_gateway(update("ses_1", 4, "c")))


def test_the_editors_own_load_replays_the_history_again() -> None:
    core = new_core()
    opened(core)
    core.from_gateway(update("ses_1", 5))
    load = {"sessionId": "ses_1", "cwd": "/w", "mcpServers": []}
    core.from_editor(line(id=7, method="session/load", params=load))
    assert to_editor(core.from_gateway(update("ses_1", 2)))


def test_what_the_editor_sends_while_offline_goes_after_the_reloads_in_order() -> None:
    core = new_core()
    opened(core)
    core.disconnected()
    cancel = line(method="session/cancel", params={"sessionId": "ses_1"})
    mode = line(id=8, method="session/set_mode", params={"sessionId": "ses_1", "modeId": "ask"})
    assert core.from_editor(cancel) == []
    assert core.from_editor(mode) == []
    assert core.waiting == 2
    sent = to_gateway(core.connected())
    sent = to_gateway(core.from_gateway(line(id=sent[0]["id"], result={})))
    assert [m["method"] for m in sent] == ["session/load"]
    live = core.from_gateway(line(id=sent[0]["id"], result={}))
    assert live == [ToGateway(cancel, 2), ToGateway(mode, 2)]
    assert core.waiting == 0


def test_requests_cut_by_a_drop_fail_except_reads_which_go_again() -> None:
    core = new_core()
    opened(core)
    core.from_editor(line(id=8, method="session/set_mode", params={"sessionId": "ses_1"}))
    core.from_editor(line(id=9, method="session/list", params={}))
    load = {"sessionId": "ses_2", "cwd": "/v", "mcpServers": []}
    core.from_editor(line(id=10, method="session/load", params=load))
    core.from_gateway(update("ses_2", 6))
    failed = to_editor(core.disconnected())
    assert failed == [
        {
            "jsonrpc": "2.0",
            "id": 8,
            "error": {
                "code": -32603,
                "message": "the connection to the gateway was lost; try again",
            },
        }
    ]
    again = to_gateway(reconnect(core))
    assert [m.get("id") for m in again if m.get("id") in (9, 10)] == [9, 10]
    assert again[-1]["params"]["_meta"]["agentGateway"] == {"after": 6}


def test_a_prompt_whose_turn_is_known_is_answered_through_await_turn() -> None:
    core = new_core()
    opened(core)
    prompting(core)
    core.from_gateway(update("ses_1", 2, turn="trn_9"))
    sent = to_gateway(reconnect(core))
    awaited = [m for m in sent if m.get("method") == "_agentGateway/awaitTurn"]
    assert awaited[0]["params"] == {"sessionId": "ses_1", "turnId": "trn_9"}
    answer = core.from_gateway(line(id=awaited[0]["id"], result={"stopReason": "cancelled"}))
    assert to_editor(answer) == [{"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "cancelled"}}]


def test_a_prompt_whose_turn_is_unknown_is_sent_again_as_it_was() -> None:
    core = new_core()
    opened(core)
    first = prompting(core)
    sent = to_gateway(reconnect(core))
    assert [m for m in sent if m.get("method") == "session/prompt"] == [first]


def test_a_cancelled_prompt_is_cancelled_again_before_it_is_awaited() -> None:
    core = new_core()
    opened(core)
    prompting(core)
    core.from_gateway(update("ses_1", 2))
    core.from_editor(line(method="session/cancel", params={"sessionId": "ses_1"}))
    sent = to_gateway(reconnect(core))
    methods = [m["method"] for m in sent]
    assert methods[-2:] == ["session/cancel", "_agentGateway/awaitTurn"]


def test_a_gateway_without_await_turn_fails_the_prompt_with_a_reason() -> None:
    core = new_core()
    opened(core)
    prompting(core)
    core.from_gateway(update("ses_1", 2))
    awaited = next(m for m in to_gateway(reconnect(core)) if m["method"].startswith("_agent"))
    missing = {"code": -32601, "message": "Method not found"}
    answer = to_editor(core.from_gateway(line(id=awaited["id"], error=missing)))
    assert answer[0]["id"] == 3
    assert answer[0]["error"]["code"] == -32603
    assert "cannot resume" in answer[0]["error"]["message"]


def test_the_replayed_text_of_a_waiting_prompt_is_not_shown_twice() -> None:
    core = new_core()
    opened(core)
    prompting(core)
    core.disconnected()
    replayed = json.loads(update("ses_1", 2, turn="trn_1", promptId="p1"))
    replayed["params"]["update"]["sessionUpdate"] = "user_message_chunk"
    assert core.from_gateway(json.dumps(replayed)) == []
    another = json.loads(json.dumps(replayed))
    another["params"]["_meta"]["agentGateway"].update(seq=3, promptId="someone-else")
    assert to_editor(core.from_gateway(json.dumps(another)))


def test_a_session_that_cannot_be_reopened_fails_its_prompt() -> None:
    core = new_core()
    opened(core)
    prompting(core)
    core.disconnected()
    sent = to_gateway(core.connected())
    reload = to_gateway(core.from_gateway(line(id=sent[0]["id"], result={})))[0]
    gone = {"code": -32602, "message": "unknown session"}
    failed = to_editor(core.from_gateway(line(id=reload["id"], error=gone)))
    assert failed[0]["id"] == 3
    assert "could not be reopened" in failed[0]["error"]["message"]
    assert core.live
    assert core.sessions == 0


def test_a_resumed_session_nothing_was_seen_of_is_resumed_again() -> None:
    core = new_core()
    core.connected()
    params = {"sessionId": "ses_4", "cwd": "/w", "mcpServers": []}
    core.from_editor(line(id=1, method="session/resume", params=params))
    core.from_gateway(line(id=1, result={}))
    core.disconnected()
    assert [m["method"] for m in to_gateway(core.connected())] == ["session/resume"]


def test_a_closed_session_is_not_reopened() -> None:
    core = new_core()
    opened(core)
    core.from_editor(line(id=5, method="session/close", params={"sessionId": "ses_1"}))
    core.from_gateway(line(id=5, result={}))
    core.disconnected()
    assert to_gateway(core.connected())[0]["method"] == "initialize"
    assert core.sessions == 0


def test_the_editors_initialize_cut_by_a_drop_goes_again_and_is_answered_to_it() -> None:
    core = new_core()
    core.connected()
    core.from_editor(line(id=1, method="initialize", params={"protocolVersion": 1}))
    core.disconnected()
    sent = to_gateway(core.connected())
    assert sent[0]["id"] == 1
    answer = to_editor(core.from_gateway(line(id=1, result={"protocolVersion": 1})))
    assert answer == [{"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1}}]


def test_failing_answers_every_request_waiting_or_in_flight() -> None:
    core = new_core()
    opened(core)
    core.from_editor(line(id=8, method="session/list", params={}))
    core.disconnected()
    core.from_editor(line(id=9, method="session/list", params={}))
    failed = to_editor(core.fail(-32000, "refused", {"status": 401}))
    assert [m["id"] for m in failed] == [8, 9]
    assert failed[0]["error"] == {"code": -32000, "message": "refused", "data": {"status": 401}}
    assert core.waiting == 0


def test_a_frame_over_several_lines_reaches_the_editor_on_one() -> None:
    core = new_core()
    opened(core)
    pretty = json.dumps({"jsonrpc": "2.0", "method": "x/y", "params": {"a": 1}}, indent=2)
    assert core.from_gateway(pretty) == [
        ToEditor('{"jsonrpc":"2.0","method":"x/y","params":{"a":1}}')
    ]
    assert core.from_gateway("not\njson") == []


def test_a_cancel_waiting_for_the_connection_goes_once() -> None:
    core = new_core()
    opened(core)
    prompting(core)
    core.from_gateway(update("ses_1", 2))
    core.disconnected()
    core.from_editor(line(method="session/cancel", params={"sessionId": "ses_1"}))
    sent = to_gateway(reconnect(core))
    assert [m["method"] for m in sent].count("session/cancel") == 1


def ask(id: int, approval: str | None = "apr_1") -> str:
    meta = {"_meta": {"agentGateway": {"approvalId": approval}}} if approval else {}
    params = {"sessionId": "ses_1", "options": [], "toolCall": {}, **meta}
    return line(id=id, method="session/request_permission", params=params)


ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


def test_a_permission_asked_again_is_folded_into_the_one_the_editor_shows() -> None:
    core = new_core()
    opened(core)
    shown = to_editor(core.from_gateway(ask(0)))
    reconnect(core)
    assert core.from_gateway(ask(0)) == []
    answer = core.from_editor(line(id=shown[0]["id"], result=ALLOW))
    assert to_gateway(answer) == [{"jsonrpc": "2.0", "id": 0, "result": ALLOW}]
    assert answer[0] == ToGateway(answer[0].text, 2)


def test_an_answer_given_offline_answers_the_gateway_when_it_asks_again() -> None:
    core = new_core()
    opened(core)
    shown = to_editor(core.from_gateway(ask(5)))
    core.disconnected()
    assert core.from_editor(line(id=shown[0]["id"], result=ALLOW)) == []
    reconnect(core)
    assert to_gateway(core.from_gateway(ask(0))) == [{"jsonrpc": "2.0", "id": 0, "result": ALLOW}]


def test_an_answer_the_drop_swallowed_answers_the_gateway_when_it_asks_again() -> None:
    core = new_core()
    opened(core)
    shown = to_editor(core.from_gateway(ask(5)))
    assert to_gateway(core.from_editor(line(id=shown[0]["id"], result=ALLOW)))
    reconnect(core)
    assert to_gateway(core.from_gateway(ask(1))) == [{"jsonrpc": "2.0", "id": 1, "result": ALLOW}]


def test_requests_of_two_connections_reach_the_editor_under_distinct_ids() -> None:
    core = new_core()
    opened(core)
    first = to_editor(core.from_gateway(ask(0, approval=None)))
    reconnect(core)
    second = to_editor(core.from_gateway(ask(0, approval="apr_2")))
    assert first[0]["id"] != second[0]["id"]
    # The first one's connection is gone: its answer has nowhere to go.
    assert core.from_editor(line(id=first[0]["id"], result=ALLOW)) == []
    assert to_gateway(core.from_editor(line(id=second[0]["id"], result=ALLOW)))
