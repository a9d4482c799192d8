"""The agent's questions through a running gateway with the fake ``claude`` (its
``question:<text>`` prompt asks with AskUserQuestion and answers with what the allow
carried): a key answers its own sessions' questions only, and the answers are on the record."""

from __future__ import annotations

from tests.fakes.gateway import FakeGatewayFactory
from tests.gateway import follow
from tests.integration.callers import ALICE, BOB, KEYS, as_key, assert_problem, create


def test_a_key_answers_the_questions_of_its_own_sessions_only(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(server=KEYS).start()
    with as_key(gateway, ALICE) as alice, as_key(gateway, BOB) as bob:
        sid = create(alice, gateway)
        started = alice.post(f"/v1/sessions/{sid}/turns", json={"prompt": "question:Proceed?"})
        assert started.status_code == 202, started.text
        asked = follow(alice, sid, lambda e: e["type"] == "question.asked")[-1]
        url = f"/v1/sessions/{sid}/questions/{asked['data']['question_id']}"
        body = {"answers": [{"selected": ["Yes"], "text": "carefully"}]}
        assert_problem(bob.post(url, json=body), 404, "not_found")
        assert_problem(bob.get(f"/v1/sessions/{sid}/questions"), 404, "not_found")
        answered = alice.post(url, json=body)
        assert answered.status_code == 200, answered.text
        assert answered.json()["answered_by"] == "alice"
        events = follow(alice, sid)
        assert events[-1]["data"]["final_text"] == 'answered: {"Proceed?": "Yes, carefully"}'
        [listed] = alice.get(f"/v1/sessions/{sid}/questions").json()["questions"]
        assert listed["status"] == "answered"
        assert listed["answers"] == [{"selected": ["Yes"], "text": "carefully"}]
        assert listed["questions"][0]["prompt"] == "Proceed?"
        assert alice.get(f"/v1/sessions/{sid}").json()["status"] == "idle"
