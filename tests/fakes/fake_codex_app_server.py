#!/usr/bin/env python3
"""A fake ``codex app-server`` speaking enough JSON-RPC (reference §2.3) for provider tests.

Every start appends ``{"pid", "argv", "env"}`` and every message it reads ``{"pid", "in": message}``
as JSON lines to ``$FAKE_CODEX_LOG`` (when set); ``--version`` prints one and exits.
``$FAKE_CODEX_START`` = ``exit`` makes it exit 2 at once; ``mute`` makes it never answer
``initialize``. With ``$FAKE_CODEX_WRAPPER`` set it runs the server as its child, sharing its
stdio, as npm's ``codex`` wrapper does.

``thread/start`` makes ``thr_<n>``; ``thread/resume`` of an id starting ``gone`` fails as
0.169.0 does ("no rollout found"). A turn's behaviour is chosen by its prompt:

* ``[[approve]]`` / ``[[approve_file]]``: a command / file-change approval, then the reply
  ``answer: <result JSON>``; ``[[withdraw]]`` asks, then withdraws it
  (``serverRequest/resolved``) on the next ``thread/loaded/list`` (a ping)
* ``[[ask:<method>]]``: sends that server request, replies with the answer it got;
  ``[[orphan:<method>]]`` the same for a thread nobody follows (``thr_orphan``)
* ``[[crash]]`` exits 3; ``[[hang]]`` sends nothing more; ``[[freeze]]`` reads on but
  answers nothing
* ``[[slow]]`` streams until ``turn/interrupt``; ``[[stubborn]]`` acknowledges the interrupt
  but never ends the turn
* ``[[late_ask]]`` ends the turn, then on the next ping asks an approval for the thread;
  ``[[late_report]]`` replies with the answer that request got
* ``[[retry]]`` two ``willRetry`` errors and a repeated ``item/started``; ``[[fail:<info>]]``
  fails the turn with ``codexErrorInfo`` <info>; ``[[usage]]`` replays a stale usage update
  and reports two requests; ``[[tools]]`` runs a command with output and a file change
* anything else: ``fake reply`` in three deltas, then ``thread <id> turn <n>``
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
from typing import Any

lock = threading.Lock()
server_ids = itertools.count(0)
answers: dict[Any, dict[str, Any]] = {}
answered = threading.Condition(lock)
interrupts: dict[str, threading.Event] = {}
turn_counts: dict[str, int] = {}
workspaces: dict[str, str] = {}
thread_numbers = itertools.count(1)
frozen = threading.Event()
poked = threading.Event()  # set by a ping (thread/loaded/list)
late_answers: list[dict[str, Any]] = []


def log(entry: dict[str, Any]) -> None:
    path = os.environ.get("FAKE_CODEX_LOG")
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps({"pid": os.getpid(), **entry}) + "\n")


def send(message: dict[str, Any]) -> None:
    with lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def notify(method: str, params: dict[str, Any]) -> None:
    send({"method": method, "params": params})


def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
    request_id = next(server_ids)
    send({"method": method, "id": request_id, "params": params})
    with answered:
        answered.wait_for(lambda: request_id in answers)
        return answers.pop(request_id)


def usage(last: int, total: int) -> dict[str, Any]:
    def breakdown(n: int) -> dict[str, int]:
        return {
            "totalTokens": n + n // 10,
            "inputTokens": n,
            "cachedInputTokens": n // 5,
            "cacheWriteInputTokens": 0,
            "outputTokens": n // 10,
            "reasoningOutputTokens": 0,
        }

    return {"total": breakdown(total), "last": breakdown(last), "modelContextWindow": 1000}


def run_turn(thread: str, turn: str, text: str) -> None:
    ids = {"threadId": thread, "turnId": turn}
    notify("turn/started", {"threadId": thread, "turn": {"id": turn, "status": "inProgress"}})

    def message(item_id: str, reply: str) -> None:
        notify("item/started", {**ids, "item": {"type": "agentMessage", "id": item_id, "text": ""}})
        for part in (reply[:4], reply[4:]):
            notify("item/agentMessage/delta", {**ids, "itemId": item_id, "delta": part})
        item = {"type": "agentMessage", "id": item_id, "text": reply}
        notify("item/completed", {**ids, "item": item})

    def complete(status: str = "completed", error: Any = None) -> None:
        notify("thread/status/changed", {"threadId": thread, "status": {"type": "idle"}})
        turn_body = {"id": turn, "status": status, "error": error, "items": []}
        notify("turn/completed", {"threadId": thread, "turn": turn_body})

    command: dict[str, Any] = {
        "type": "commandExecution",
        "id": "call_1",
        "command": "touch x",
        "cwd": "/w",
    }
    if "[[crash]]" in text:
        sys.stderr.write("fake codex: crashing as asked\n")
        sys.stderr.flush()
        os._exit(3)
    if "[[hang]]" in text:
        return
    if "[[approve]]" in text or "[[withdraw]]" in text:
        notify("item/started", {**ids, "item": {**command, "status": "inProgress"}})
        params = {
            **ids,
            "itemId": "call_1",
            "command": "/bin/bash -lc 'touch x'",
            "cwd": "/w",
            "availableDecisions": ["accept", "cancel"],
        }
        if "[[withdraw]]" in text:
            request_id = next(server_ids)
            send(
                {
                    "method": "item/commandExecution/requestApproval",
                    "id": request_id,
                    "params": params,
                }
            )
            poked.wait()  # the test says when, with a ping
            notify("serverRequest/resolved", {"threadId": thread, "requestId": request_id})
            done = {**command, "status": "declined"}
            notify("item/completed", {**ids, "item": done})
            message("msg_1", "withdrawn")
            complete()
            return
        answer = ask("item/commandExecution/requestApproval", params)
        decision = answer.get("result", {}).get("decision")
        status = "completed" if decision in ("accept", "acceptForSession") else "declined"
        notify("item/completed", {**ids, "item": {**command, "status": status, "exitCode": 0}})
        message("msg_1", "answer: " + json.dumps(answer, sort_keys=True))
        complete()
        return
    if "[[approve_file]]" in text:
        path = f"{workspaces.get(thread, '/w')}/a.txt"
        change = {"path": path, "kind": {"type": "add"}, "diff": "+hello\n"}
        item = {"type": "fileChange", "id": "patch_1", "changes": [change], "status": "inProgress"}
        notify("item/started", {**ids, "item": item})
        answer = ask("item/fileChange/requestApproval", {**ids, "itemId": "patch_1"})
        message("msg_1", "answer: " + json.dumps(answer, sort_keys=True))
        complete()
        return
    if text.startswith(("[[ask:", "[[orphan:")):
        method = text[text.index(":") + 1 : text.index("]]")]
        target = {**ids, "itemId": "x"}
        if text.startswith("[[orphan:"):
            target["threadId"] = "thr_orphan"
        answer = ask(method, target)
        message("msg_1", "answer: " + json.dumps(answer, sort_keys=True))
        complete()
        return
    if "[[slow]]" in text or "[[stubborn]]" in text:
        event = interrupts[turn]
        notify("item/started", {**ids, "item": {"type": "agentMessage", "id": "msg_1", "text": ""}})
        while not event.wait(0.02):
            notify("item/agentMessage/delta", {**ids, "itemId": "msg_1", "delta": "tick "})
        if "[[slow]]" in text:
            complete("interrupted")
        return
    if "[[retry]]" in text:
        notify("item/started", {**ids, "item": {"type": "agentMessage", "id": "msg_1", "text": ""}})
        for n in (1, 2):
            notice = {
                "message": f"Reconnecting... {n}/2",
                "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": None}},
                "additionalDetails": "stream disconnected before completion",
            }
            notify("error", {**ids, "willRetry": True, "error": notice})
            notify(
                "item/started", {**ids, "item": {"type": "agentMessage", "id": "msg_1", "text": ""}}
            )
        notify(
            "item/completed", {**ids, "item": {"type": "agentMessage", "id": "msg_1", "text": "ok"}}
        )
        complete()
        return
    if text.startswith("[[fail:"):
        raw = text[len("[[fail:") : text.index("]]")]
        info = json.loads(raw) if raw.startswith("{") else raw
        failure = {"message": "it broke", "codexErrorInfo": info}
        notify("error", {**ids, "willRetry": False, "error": failure})
        complete("failed", failure)
        return
    if "[[usage]]" in text:
        notify(
            "thread/tokenUsage/updated",
            {"threadId": thread, "turnId": "old", "tokenUsage": usage(100, 900)},
        )
        notify("thread/tokenUsage/updated", {**ids, "tokenUsage": usage(100, 1000)})
        message("msg_1", "counted")
        notify("thread/tokenUsage/updated", {**ids, "tokenUsage": usage(200, 1200)})
        complete()
        return
    if "[[late_ask]]" in text:

        def ask_later() -> None:
            poked.wait()
            answer = ask("item/commandExecution/requestApproval", {**ids, "itemId": "late"})
            with answered:
                late_answers.append(answer)
                answered.notify_all()

        threading.Thread(target=ask_later, daemon=True).start()
        message("msg_1", "will ask later")
        complete()
        return
    if "[[late_report]]" in text:
        with answered:
            answered.wait_for(lambda: bool(late_answers))
        message("msg_1", "late: " + json.dumps(late_answers[0], sort_keys=True))
        complete()
        return
    if "[[tools]]" in text:
        notify("item/started", {**ids, "item": {**command, "status": "inProgress"}})
        notify("item/commandExecution/outputDelta", {**ids, "itemId": "call_1", "delta": "out\n"})
        done = {**command, "status": "failed", "exitCode": 2, "aggregatedOutput": "out\n"}
        notify("item/completed", {**ids, "item": done})
        change = {"path": "/w/a.txt", "kind": {"type": "update"}, "diff": "-a\n+b\n"}
        patch = {"type": "fileChange", "id": "patch_1", "changes": [change], "status": "completed"}
        notify("item/completed", {**ids, "item": patch})
        message("msg_1", "tools done")
        complete()
        return
    notify("thread/started", {"threadId": "thr_other"})
    notify(
        "item/agentMessage/delta",
        {"threadId": "thr_other", "turnId": "t", "itemId": "m", "delta": "x"},
    )
    message("msg_1", "fake reply")
    message("msg_2", f"thread {thread} turn {turn_counts[thread]}")
    notify("thread/tokenUsage/updated", {**ids, "tokenUsage": usage(10, 10)})
    complete()


def handle(message: dict[str, Any], state: dict[str, bool]) -> None:
    method, request_id = message.get("method"), message.get("id")
    params = message.get("params") or {}
    if method is None:  # an answer to one of our requests
        with answered:
            answers[request_id] = message
            answered.notify_all()
        return
    if request_id is None:
        state["initialized"] = state["initialized"] or method == "initialized"
        return

    def result(body: dict[str, Any]) -> None:
        send({"id": request_id, "result": body})

    def error(code: int, text: str) -> None:
        send({"id": request_id, "error": {"code": code, "message": text}})

    if method == "initialize":
        if os.environ.get("FAKE_CODEX_START") == "mute":
            return
        result({"userAgent": "fake/0.169.0", "codexHome": "/nowhere", "platformOs": "linux"})
        return
    if not state["initialized"]:
        error(-32600, "Not initialized")
    elif method == "thread/start":
        thread = f"thr_{next(thread_numbers)}"
        turn_counts[thread] = 0
        workspaces[thread] = params.get("cwd", "/w")
        result({"thread": {"id": thread}, "approvalPolicy": params.get("approvalPolicy")})
    elif method == "thread/resume":
        thread = params["threadId"]
        if thread.startswith("gone"):
            error(-32600, f"no rollout found for thread id {thread}")
        else:
            turn_counts.setdefault(thread, 0)
            workspaces[thread] = params.get("cwd", "/w")
            result({"thread": {"id": thread}})
    elif method == "turn/start":
        thread = params["threadId"]
        turn_counts[thread] = turn_counts.get(thread, 0) + 1
        turn = f"turn_{thread}_{turn_counts[thread]}"
        interrupts[turn] = threading.Event()
        result({"turn": {"id": turn, "status": "inProgress", "items": []}})
        text = params["input"][0]["text"]
        if "[[freeze]]" in text:
            frozen.set()  # here, in the reading thread: nothing read after this is answered
            return
        threading.Thread(target=run_turn, args=(thread, turn, text), daemon=True).start()
    elif method == "turn/interrupt":
        result({})
        interrupts[params["turnId"]].set()
    elif method == "thread/loaded/list":
        poked.set()
        result({"data": sorted(turn_counts), "nextCursor": None})
    elif method == "thread/unsubscribe":
        result({"status": "unsubscribed"})
    else:
        error(-32600, f"Invalid request: unknown variant `{method}`")


def main() -> None:
    if sys.argv[1:] == ["--version"]:  # the health probe
        print("codex-cli 0.0.1-fake")
        return
    if os.environ.pop("FAKE_CODEX_WRAPPER", None):
        # Like npm's `codex` on Node < 22.15: the server runs as a child sharing our stdio.
        sys.exit(subprocess.call([sys.executable, *sys.argv]))
    log({"argv": sys.argv, "env": dict(os.environ)})
    if os.environ.get("FAKE_CODEX_START") == "exit":
        sys.stderr.write("fake codex: refusing to start\n")
        sys.exit(2)
    state = {"initialized": False}
    for line in sys.stdin:
        if frozen.is_set():
            continue  # alive, reading, answering nothing
        message = json.loads(line)
        log({"in": message})
        handle(message, state)


if __name__ == "__main__":
    main()
