"""``Idempotency-Key`` across two replicas on one PostgreSQL: the same turn sent to both at
once with one key starts once (the database's key decides; the other copy gets the first
answer or 409 while it is being answered), a copy with another body is a 422 on either, and
a session created on one and sent again to the other is one session.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx

from tests.fakes.gateway import FakeGateway
from tests.integration.callers import assert_problem, create
from tests.integration.streams import turn_events

REPLAYED = "Idempotent-Replayed"
ROUNDS = 4


def prompts(gateway: FakeGateway, prompt: str) -> int:
    log = Path(str(gateway.spawn_log) + ".prompts")
    lines = log.read_text().splitlines() if log.exists() else []
    return sum(json.loads(line)["prompt"] == prompt for line in lines)


def sent_together(
    clients: dict[str, httpx.Client], path: str, body: dict[str, str], headers: dict[str, str]
) -> dict[str, httpx.Response]:
    """``POST path`` through every client at the same moment; their answers by name."""
    answers: dict[str, httpx.Response] = {}
    together = threading.Barrier(len(clients))

    def send(name: str) -> None:
        together.wait(timeout=10)
        answers[name] = clients[name].post(path, json=body, headers=headers)

    threads = [threading.Thread(target=send, args=(name,)) for name in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return answers


def test_one_turn_sent_to_two_replicas_at_once_with_one_key_starts_once(
    replicas: dict[str, FakeGateway],
) -> None:
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with a.client() as on_a, b.client() as on_b:
        for round_ in range(ROUNDS):
            sid = create(on_a, a)
            prompt = f"only once {round_}"
            key = {"Idempotency-Key": f"both-{round_}"}
            answers = sent_together(
                {"a": on_a, "b": on_b}, f"/v1/sessions/{sid}/turns", {"prompt": prompt}, key
            )
            originals = [
                r for r in answers.values() if r.status_code == 202 and REPLAYED not in r.headers
            ]
            assert len(originals) == 1, [(r.status_code, r.text) for r in answers.values()]
            [first] = originals
            [other] = [r for r in answers.values() if r is not first]
            if other.status_code == 409:
                assert_problem(other, 409, "idempotency_key_in_use")
            else:
                assert (other.status_code, other.content) == (202, first.content)
            assert turn_events(on_b, sid)[-1]["type"] == "turn.completed"

            for client in (on_a, on_b):  # once answered, the answer on either replica
                again = client.post(
                    f"/v1/sessions/{sid}/turns", json={"prompt": prompt}, headers=key
                )
                assert (again.status_code, again.headers.get(REPLAYED)) == (202, "true")
                assert again.content == first.content
                changed = client.post(
                    f"/v1/sessions/{sid}/turns", json={"prompt": "no"}, headers=key
                )
                assert_problem(changed, 422, "idempotency_key_reused")
            assert len(on_a.get(f"/v1/sessions/{sid}/turns").json()["turns"]) == 1
            assert prompts(a, prompt) == 1  # the replicas share the fake CLI's log

        # A session created on one replica and sent again to the other is one session.
        body = {"workspace": str(a.workspace), "budget": {"max_tokens": 1000}}
        key = {"Idempotency-Key": "create-across"}
        before = len(on_b.get("/v1/sessions").json()["sessions"])
        first = on_a.post("/v1/sessions", json=body, headers=key)
        again = on_b.post("/v1/sessions", json=body, headers=key)
        assert first.status_code == 201, first.text
        assert (again.status_code, again.headers[REPLAYED]) == (201, "true")
        assert again.content == first.content
        assert len(on_b.get("/v1/sessions").json()["sessions"]) == before + 1
