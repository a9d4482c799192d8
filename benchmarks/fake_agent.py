#!/usr/bin/env python3
"""A benchmark ``claude``: speaks Claude Code's stream-json and stamps every delta.

The reply to a user message whose text is ``bench n=N rate=R [pad=B]`` is N text deltas,
each ``i=<index> t=<CLOCK_MONOTONIC ns at emit> `` (plus B bytes of padding), emitted as fast
as the pipe takes them (``rate=0``) or paced at R per second on a fixed schedule (an event
that is late goes out at once, stamped when it really left). Then an assistant message
``bench-end emitted=N elapsed_ns=…`` and a ``result``. Any other prompt is answered
``fake reply``. ``--version`` prints a Claude Code version; ``control_request`` lines are
acknowledged (an ``interrupt`` stops a running reply).

At start-up, before anything else, the process records ``<pid> <CLOCK_MONOTONIC ns>`` in
``$BENCH_SPAWN_LOG`` (when set): the moment the interpreter began running this file.

Every process on one machine shares CLOCK_MONOTONIC, so a client subtracts a stamp from its
own ``time.monotonic_ns()`` to get the delivery latency. Only the standard library is used,
so it can run under ``python -I -S`` (the harness does that: interpreter start-up is most of
a spawn's cost).
"""

import time

STARTED_NS = time.monotonic_ns()

import json  # noqa: E402 - the start-up stamp comes first
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import uuid  # noqa: E402

SESSION = next(
    (a.split("=", 1)[1] for a in sys.argv if a.startswith("--resume=")), str(uuid.uuid4())
)
PROMPT = re.compile(r"bench n=(\d+) rate=([0-9.]+)(?: pad=(\d+))?")
lock = threading.Lock()
interrupted = threading.Event()
out = sys.stdout.buffer


def emit(obj: dict[str, object]) -> None:
    line = json.dumps(obj).encode() + b"\n"
    with lock:
        out.write(line)
        out.flush()


def assistant(text: str) -> None:
    emit(
        {
            "type": "assistant",
            "session_id": SESSION,
            "message": {"id": "msg_bench", "content": [{"type": "text", "text": text}]},
        }
    )


def result(text: str, *, is_error: bool = False) -> None:
    emit(
        {
            "type": "result",
            "subtype": "error_during_execution" if is_error else "success",
            "is_error": is_error,
            "result": text,
            "session_id": SESSION,
            "terminal_reason": "aborted_streaming" if is_error else "completed",
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 2},
            "total_cost_usd": 0.0,
        }
    )


def stream(count: int, rate: float, pad: int) -> None:
    """Emit ``count`` stamped deltas; the line is built by hand so that it costs little."""
    head = (
        '{"type": "stream_event", "session_id": "' + SESSION + '", "api_message_id": "msg_bench", '
        '"event": {"type": "content_block_delta", "index": 0, '
        '"delta": {"type": "text_delta", "text": "'
    ).encode()
    tail = (" " + "p" * pad + '"}}}\n').encode()
    interval = 1e9 / rate if rate > 0 else 0.0
    start = time.monotonic_ns()
    for i in range(count):
        if interrupted.is_set():
            break
        if interval:
            due = start + int(i * interval)
            while True:
                wait = due - time.monotonic_ns()
                if wait <= 0:
                    break
                time.sleep(wait / 1e9 if wait > 2_000_000 else 0)  # spin the last 2 ms
        now = time.monotonic_ns()
        line = head + b"i=%d t=%d" % (i, now) + tail
        with lock:
            out.write(line)
            out.flush()
    elapsed = time.monotonic_ns() - start
    assistant(f"bench-end emitted={count} elapsed_ns={elapsed}")


def turn(prompt: str) -> None:
    emit({"type": "system", "subtype": "init", "session_id": SESSION, "cwd": os.getcwd()})
    match = PROMPT.search(prompt)
    if match is None:
        assistant("fake reply")
        result("fake reply")
        return
    interrupted.clear()
    stream(int(match.group(1)), float(match.group(2)), int(match.group(3) or 0))
    if interrupted.is_set():
        result("", is_error=True)
    else:
        result("bench-end")


def main() -> None:
    if "--version" in sys.argv:
        sys.stdout.write("2.1.330 (Claude Code)\n")
        return
    spawn_log = os.environ.get("BENCH_SPAWN_LOG")
    if spawn_log:
        with open(spawn_log, "a") as handle:
            handle.write(f"{os.getpid()} {STARTED_NS}\n")
    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "control_request":
            if message["request"]["subtype"] == "interrupt":
                interrupted.set()
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
        elif message["type"] == "user":
            content = message["message"]["content"]
            if isinstance(content, list):
                content = " ".join(str(block.get("text", "")) for block in content)
            threading.Thread(target=turn, args=(content,), daemon=True).start()


if __name__ == "__main__":
    main()
