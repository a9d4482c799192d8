#!/usr/bin/env python3
"""A fake ``claude`` speaking just enough stream-json for orchestration tests.

Each spawn appends a JSON line ``{"pid", "argv", "env"}`` to ``$FAKE_CLAUDE_LOG``. The reply
to a user message is chosen by its text: ``crash`` exits 3 after printing to stderr,
``hang`` prints nothing more, ``slow`` streams until interrupted, ``deltas:N`` streams N small
text deltas as fast as it can (at most a million) and answers (``deltas:N@R``: at R a second,
on a fixed schedule); anything else answers ``fake reply``. An ``interrupt`` control request ends
the running turn as Claude does (``is_error`` with ``terminal_reason`` ``aborted_streaming``).

Fault prompts, for the gateway's retries: ``fail-auth`` ends the turn with an API 401
(``fail-auth-echo`` quotes ``$ANTHROPIC_API_KEY`` in it, as a careless CLI might;
``fail-500-echo`` ends it with an API 500 that quotes the key as a proxy might: as it is, in
base64 at three alignments, in hex and percent-encoded);
``flaky:N`` fails this turn and the thread's next N-1 turns (whatever their prompt, e.g. the
gateway's continuation prompt) with a retryable API 529, then answers ``fake reply``;
``fail-retryable`` does the same without end. The per-thread failure budget is kept in
``$FAKE_CLAUDE_LOG.flaky.<thread>`` so it survives a respawn with ``--resume``; every prompt
is logged as ``{"pid", "thread", "prompt"}`` to ``$FAKE_CLAUDE_LOG.prompts``.

Process and output faults, for the gateway's limits (each capped so that a gateway that fails
to stop them cannot take the machine down): ``exit:N`` writes 40 KB to stderr and exits N;
``segv`` kills itself with SIGSEGV; ``flood`` prints ``y`` lines (and now and then a text
delta) as fast as it can, at most 1 GiB; ``allocate:MB`` grows its memory 16 MiB at a time,
touching every page, up to 1 GiB, then waits (it aborts, as Bun and Node do, when an rlimit
refuses an allocation); ``fork:N`` starts N (at most 300) sleeping children, then waits;
``setsid-grandchild`` double-forks a ``sleep 1000`` into a session of
its own whose parent exits at once (an escapee), appends its pid to
``$FAKE_CLAUDE_LOG.grandchildren`` and answers; ``dump-env`` answers with its environment as
JSON; ``malformed`` prints binary, invalid UTF-8 and non-object lines before answering;
``oversize:BYTES`` prints one line of BYTES bytes (at most 200 MB), then answers;
``spew-retry:BYTES`` makes this and every later turn of the thread stream BYTES of text and
fail with a retryable 529.

``usage:<input>:<output>:<cached>:<cost>`` answers ``fake reply`` reporting that usage (cache
reads as ``cache_read_input_tokens``) and that cost, added to the process's running
``total_cost_usd`` as Claude Code does; every other answer reports 1 input and 2 output
tokens and no cost.

``steps:<n>:<input>:<output>:<cost>`` answers in n model responses, 0.2 s apart, each streaming
its usage as Claude Code does (``message_start`` with <input> input tokens, a text delta,
``message_delta`` with <output> output tokens); the result reports what they used together,
and <cost> per response. An interrupt ends it after the response under way, with the usage
of the responses made (``aborted_streaming``). Every response is logged as ``{"pid",
"thread", "response": i}`` to ``$FAKE_CLAUDE_LOG.responses``.

``write:<name>`` writes the file ``<name>`` (holding its name) in its working directory and
answers with that directory's path.
``run:<command>`` runs ``<command>`` with ``sh -c`` in its working directory (the workspace),
as an agent's approved tool would, and answers ``ran``.

``ask:<command>`` asks to run ``<command>`` in Bash (a ``can_use_tool`` control request) and
answers ``ran: <command it was allowed to run>`` (the edited one, if the answer edited it) or
``denied: <message>``. ``question:<text>`` asks the question ``<text>`` (options ``Yes`` and
``No``) with AskUserQuestion, as Claude Code does, and answers ``answered: <the answers the
allow carried, as JSON>`` or ``denied: <message>``.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

SESSION = next(
    (a.split("=", 1)[1] for a in sys.argv if a.startswith("--resume=")), str(uuid.uuid4())
)
lock = threading.Lock()
interrupted = threading.Event()
cost_total = [0.0]  # Claude Code's `total_cost_usd` is the process's running total


def emit(obj: dict[str, object]) -> None:
    with lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def result(
    text: str,
    *,
    is_error: bool = False,
    reason: str = "completed",
    status: int | None = None,
    usage: dict[str, int] | None = None,
    cost: float = 0.0,
) -> None:
    cost_total[0] += cost
    extra: dict[str, object] = {} if status is None else {"api_error_status": status}
    emit(
        {
            **extra,
            "type": "result",
            "subtype": "success" if not is_error else "error_during_execution",
            "is_error": is_error,
            "result": text,
            "session_id": SESSION,
            "terminal_reason": reason,
            "stop_reason": "end_turn",
            "usage": usage or {"input_tokens": 1, "output_tokens": 2},
            "total_cost_usd": cost_total[0],
        }
    )


def text(message: str) -> None:
    emit(
        {
            "type": "assistant",
            "session_id": SESSION,
            "message": {"id": "msg_fake", "content": [{"type": "text", "text": message}]},
        }
    )


def log_prompt(prompt: str) -> None:
    log = os.environ.get("FAKE_CLAUDE_LOG")
    if log:
        with open(log + ".prompts", "a") as handle:
            entry = {"pid": os.getpid(), "thread": SESSION, "prompt": prompt}
            handle.write(json.dumps(entry) + "\n")


def failures_left(prompt: str) -> bool:
    """Whether this turn fails under a ``flaky:N`` / ``fail-retryable`` budget of the thread."""
    log = os.environ.get("FAKE_CLAUDE_LOG")
    if not log:
        return False
    budget = log + ".flaky." + SESSION
    if prompt.startswith("flaky:"):
        left = int(prompt.split(":", 1)[1])
    elif prompt == "fail-retryable":
        left = 1_000_000
    elif os.path.exists(budget):
        with open(budget) as handle:
            left = int(handle.read())
    else:
        return False
    if left <= 0:
        os.remove(budget)
        return False
    with open(budget, "w") as handle:
        handle.write(str(left - 1))
    return True


MIB = 1024 * 1024


def delta(chunk: str) -> dict[str, object]:
    return {
        "type": "stream_event",
        "session_id": SESSION,
        "api_message_id": "msg_fake",
        "event": {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": chunk},
        },
    }


def wait_to_be_killed(limit_s: float = 60.0) -> None:
    time.sleep(limit_s)


def escape_grandchild() -> None:
    """Double-fork ``sleep 1000`` into its own session; its parent exits at once."""
    log = os.environ.get("FAKE_CLAUDE_LOG", os.devnull)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.execvp("sleep", ["sleep", "1000"])  # noqa: S606 - a fixed program, no shell
        os.write(write_end, str(grandchild).encode())
        os._exit(0)
    os.close(write_end)
    pid = int(os.read(read_end, 32))
    os.close(read_end)
    os.waitpid(child, 0)
    with open(log + ".grandchildren", "a") as handle:
        handle.write(f"{pid}\n")


def spew_budget(prompt: str) -> int:
    """Bytes this attempt streams before failing, under a ``spew-retry:BYTES`` thread."""
    log = os.environ.get("FAKE_CLAUDE_LOG")
    if not log:
        return 0
    path = log + ".spew." + SESSION
    if prompt.startswith("spew-retry:"):
        with open(path, "w") as handle:
            handle.write(prompt.split(":", 1)[1])
    if not os.path.exists(path):
        return 0
    with open(path) as handle:
        return int(handle.read())


def faults(prompt: str) -> bool:
    """Play a process or output fault; True when the turn is over (or the process is)."""
    if prompt.startswith("exit:"):
        for i in range(1000):
            sys.stderr.write(f"fake claude: stderr line {i:04d} " + "." * 20 + "\n")
        sys.stderr.write(f"fake claude: exiting with {prompt[5:]}\n")
        sys.stderr.flush()
        os._exit(int(prompt[5:]))
    if prompt == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
        wait_to_be_killed()
    if prompt == "flood":
        line = b"y" * 63 + b"\n"
        block = line * 1024
        json_line = (json.dumps(delta("flood ")) + "\n").encode()
        for _ in range(1024 * MIB // len(block)):
            with lock:
                sys.stdout.buffer.write(block + json_line)
        sys.stdout.flush()
        return False
    if prompt.startswith("allocate:"):
        limit = min(int(prompt.split(":", 1)[1]), 1024) * MIB
        chunks: list[bytes] = []
        while len(chunks) * 16 * MIB < limit:
            try:
                chunks.append(b"\x01" * (16 * MIB))  # written, so every page is resident
            except MemoryError:
                # Refused by an rlimit: Claude Code's runtime (Bun) aborts then, and so does
                # Node's: the process ends, not just this turn's thread.
                os.abort()
            time.sleep(0.02)
        wait_to_be_killed()
        return False
    if prompt.startswith("fork:"):
        children = [
            subprocess.Popen(["sleep", "1000"], stdin=subprocess.DEVNULL)
            for _ in range(min(int(prompt.split(":", 1)[1]), 300))
        ]
        wait_to_be_killed()
        for child in children:
            child.kill()
        return False
    if prompt == "setsid-grandchild":
        escape_grandchild()
        return False
    if prompt.startswith("oversize:"):
        size = min(int(prompt.split(":", 1)[1]), 200 * MIB)
        with lock:
            for _ in range(size // MIB):
                sys.stdout.buffer.write(b"x" * MIB)
            sys.stdout.buffer.write(b"x" * (size % MIB) + b"\n")
            sys.stdout.flush()
        return False
    if prompt == "malformed":
        with lock:
            for line in (b"\x00\xff\xfe binary", b"\xc3\x28 invalid utf-8", b"[1, 2]", b"{trunc"):
                sys.stdout.buffer.write(line + b"\n")
            for i in range(20):
                sys.stdout.buffer.write(b"not json %d\n" % i)
            sys.stdout.flush()
        return False
    return False


answers: dict[str, dict[str, object]] = {}
answered = threading.Condition(lock)


def ask(command: str) -> None:
    """Ask to run ``command`` in Bash, then report what the answer let it run."""
    request_id = f"ask-{uuid.uuid4()}"
    emit(
        {
            "type": "control_request",
            "request_id": request_id,
            "request": {
                "subtype": "can_use_tool",
                "tool_name": "Bash",
                "input": {"command": command},
                "tool_use_id": "toolu_fake",
            },
        }
    )
    with answered:
        answered.wait_for(lambda: request_id in answers or interrupted.is_set(), timeout=600)
        answer = answers.pop(request_id, {})
    if answer.get("behavior") == "allow":
        updated = answer.get("updatedInput")
        ran = updated.get("command") if isinstance(updated, dict) else None
        text(f"ran: {ran}")
        result(f"ran: {ran}")
    else:
        text(f"denied: {answer.get('message')}")
        result(f"denied: {answer.get('message')}")


def question(prompt: str) -> None:
    """Ask ``prompt`` with AskUserQuestion, then report the answers the allow carried."""
    request_id = f"question-{uuid.uuid4()}"
    options = [{"label": "Yes", "description": "go on"}, {"label": "No", "description": "stop"}]
    questions = [{"question": prompt, "header": "Q", "options": options, "multiSelect": False}]
    emit(
        {
            "type": "control_request",
            "request_id": request_id,
            "request": {
                "subtype": "can_use_tool",
                "tool_name": "AskUserQuestion",
                "display_name": "AskUserQuestion",
                "input": {"questions": questions},
                "tool_use_id": "toolu_fake_question",
                "requires_user_interaction": True,
            },
        }
    )
    with answered:
        answered.wait_for(lambda: request_id in answers or interrupted.is_set(), timeout=600)
        answer = answers.pop(request_id, {})
    updated = answer.get("updatedInput")
    if answer.get("behavior") == "allow" and isinstance(updated, dict):
        said = f"answered: {json.dumps(updated.get('answers'), sort_keys=True)}"
    else:
        said = f"denied: {answer.get('message')}"
    text(said)
    result(said)


def turn(prompt: str) -> None:
    emit({"type": "system", "subtype": "init", "session_id": SESSION, "cwd": os.getcwd()})
    log_prompt(prompt)
    if prompt.startswith("ask:"):
        ask(prompt.split(":", 1)[1])
        return
    if prompt.startswith("question:"):
        question(prompt.split(":", 1)[1])
        return
    if prompt.startswith("run:"):
        subprocess.run(["/bin/sh", "-c", prompt.split(":", 1)[1]], check=False)
        text("ran")
        result("ran")
        return
    if faults(prompt):
        return
    spew = spew_budget(prompt)
    if spew:
        chunk = "s" * 4000
        for _ in range(spew // len(chunk)):
            emit(delta(chunk))
        result("API Error: 529 Overloaded", is_error=True, reason="api_error", status=529)
        return
    if prompt.startswith("write:"):
        name = os.path.basename(prompt.split(":", 1)[1])
        with open(name, "w") as file:
            file.write(name + "\n")
        text(os.getcwd())
        result(os.getcwd())
        return
    if prompt.startswith("deltas:"):
        count, _, rate = prompt.split(":", 1)[1].partition("@")
        interval = 1 / float(rate) if rate else 0.0
        start = time.monotonic()
        for i in range(min(int(count), 1_000_000)):
            if interval and (ahead := start + i * interval - time.monotonic()) > 0:
                time.sleep(ahead)  # the CLI's own pace: a fixed schedule of deltas
            emit(
                {
                    "type": "stream_event",
                    "session_id": SESSION,
                    "api_message_id": "msg_deltas",
                    "event": {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": f"d{i} "},
                    },
                }
            )
        text("deltas done")
        result("deltas done")
        return
    if prompt == "dump-env":
        text(json.dumps(dict(os.environ)))
        result("env")
        return
    if prompt == "fail-auth":
        result("API Error: 401 invalid x-api-key", is_error=True, reason="api_error", status=401)
        return
    if prompt == "fail-auth-echo":  # a CLI that repeats the key it was given in its error
        key = os.environ.get("ANTHROPIC_API_KEY", "")
        result(
            f"API Error: 401 invalid x-api-key {key}", is_error=True, reason="api_error", status=401
        )
        return
    if prompt == "fail-500-echo":
        raw = os.environ.get("ANTHROPIC_API_KEY", "").encode()
        quoted = [
            raw.decode(),
            base64.b64encode(b"Basic " + raw).decode(),
            base64.urlsafe_b64encode(b"u:" + raw).decode().rstrip("="),
            base64.b64encode(b"k:" + raw + b"!").decode(),
            raw.hex(),
            raw.hex().upper(),
            urllib.parse.quote(raw, safe=""),
        ]
        message = f"API Error: 500 upstream refused key {' / '.join(quoted)}"
        result(message, is_error=True, reason="api_error", status=500)
        return
    if failures_left(prompt):
        result("API Error: 529 Overloaded", is_error=True, reason="api_error", status=529)
        return
    if prompt == "crash":
        sys.stderr.write("fake claude: simulated crash\n")
        sys.stderr.flush()
        os._exit(3)
    if prompt == "hang":
        return
    if prompt.startswith("usage:"):
        inputs, outputs, cached, cost = prompt.split(":")[1:5]
        counts = {
            "input_tokens": int(inputs),
            "output_tokens": int(outputs),
            "cache_read_input_tokens": int(cached),
        }
        text("fake reply")
        result("fake reply", usage=counts, cost=float(cost))
        return
    if prompt.startswith("steps:"):
        count, inputs, outputs, cost = prompt.split(":")[1:5]
        steps(min(int(count), 1000), int(inputs), int(outputs), float(cost))
        return
    if prompt == "slow":
        interrupted.clear()
        while not interrupted.wait(0.05):
            emit(
                {
                    "type": "stream_event",
                    "session_id": SESSION,
                    "api_message_id": "msg_slow",
                    "event": {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": "tick "},
                    },
                }
            )
        result("", is_error=True, reason="aborted_streaming")
        return
    text("fake reply")
    result("fake reply")


def stream_event(event: dict[str, object], message_id: str) -> None:
    emit(
        {
            "type": "stream_event",
            "session_id": SESSION,
            "api_message_id": message_id,
            "parent_tool_use_id": None,
            "event": event,
        }
    )


def steps(count: int, inputs: int, outputs: int, cost: float) -> None:
    """Answer in ``count`` model responses, each streaming its usage; stop early when
    interrupted."""
    interrupted.clear()
    made = 0
    for i in range(count):
        message_id = f"msg_step_{uuid.uuid4().hex[:8]}"
        usage = {"input_tokens": inputs, "output_tokens": 1, "cache_read_input_tokens": 0}
        stream_event(
            {"type": "message_start", "message": {"id": message_id, "usage": usage}}, message_id
        )
        stream_event(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": f"step {i} "},
            },
            message_id,
        )
        stream_event({"type": "message_delta", "usage": {"output_tokens": outputs}}, message_id)
        made += 1
        log = os.environ.get("FAKE_CLAUDE_LOG")
        if log:
            with open(log + ".responses", "a") as handle:
                handle.write(
                    json.dumps({"pid": os.getpid(), "thread": SESSION, "response": i}) + "\n"
                )
        if interrupted.wait(0.2):
            break
    used = {"input_tokens": inputs * made, "output_tokens": outputs * made}
    if interrupted.is_set():
        result("", is_error=True, reason="aborted_streaming", usage=used, cost=cost * made)
        return
    text(f"{made} steps")
    result(f"{made} steps", usage=used, cost=cost * made)


def known_threads(log: str | None) -> set[str]:
    if not log or not os.path.exists(log + ".threads"):
        return set()
    with open(log + ".threads") as handle:
        return set(handle.read().split())


def main() -> None:
    if "--version" in sys.argv:
        print("2.1.330 (Claude Code)")
        return
    log = os.environ.get("FAKE_CLAUDE_LOG")
    resuming = any(a.startswith("--resume=") for a in sys.argv)
    if resuming and SESSION not in known_threads(log):
        # What Claude Code 2.1.330 does for an unknown thread: an error result, exit 1.
        message = f"No conversation found with session ID: {SESSION}"
        emit(
            {
                "type": "result",
                "subtype": "error_during_execution",
                "is_error": True,
                "num_turns": 0,
                "session_id": SESSION,
                "errors": [message],
            }
        )
        sys.stderr.write(message + "\n")
        sys.exit(1)
    if log:
        with open(log + ".threads", "a") as handle:
            handle.write(SESSION + "\n")
    if log:
        with open(log, "a") as handle:
            handle.write(
                json.dumps({"pid": os.getpid(), "argv": sys.argv, "env": dict(os.environ)}) + "\n"
            )
    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "control_request":
            subtype = message["request"]["subtype"]
            if subtype == "interrupt":
                interrupted.set()
                with answered:
                    answered.notify_all()
            emit(
                {
                    "type": "control_response",
                    "response": {
                        "subtype": "success",
                        "request_id": message["request_id"],
                        "response": {},
                    },
                }
            )
        elif message["type"] == "control_response":  # an answer to ask()
            response = message["response"]
            with answered:
                answers[response["request_id"]] = response.get("response", {})
                answered.notify_all()
        elif message["type"] == "user":
            prompt = message["message"]["content"]
            threading.Thread(target=turn, args=(prompt,), daemon=True).start()
    time.sleep(0.1)


if __name__ == "__main__":
    main()
