#!/usr/bin/env python3
"""A fake ``opencode serve`` with the few routes and the event stream the provider uses.

Run as ``fake_opencode_serve.py serve --hostname 127.0.0.1 --port N`` (``--version`` prints one
and exits). It requires basic
auth (``$OPENCODE_SERVER_USERNAME``, default ``opencode`` / ``$OPENCODE_SERVER_PASSWORD``),
prints ``opencode server listening on http://127.0.0.1:N`` once its socket is bound, and
speaks the 1.18.33 shapes of reference §3.2: ``GET /global/health``, ``GET /global/event``
(wrapped events, ``server.connected`` first, ``server.heartbeat`` every
``$FAKE_OPENCODE_HEARTBEAT_S``), ``POST /session``, ``POST /session/{id}/prompt_async``,
``POST /session/{id}/abort``, ``POST /permission/{id}/reply``, ``GET /session/status``,
``GET /session/{id}/message``. Threads are kept in ``$XDG_DATA_HOME/fake-opencode/`` so they
survive a restart; an unknown thread is a 404.

Every start appends ``{"pid", "argv", "env"}`` and every request ``{"pid", "method", "path",
"query", "body"}`` as JSON lines to ``$FAKE_OPENCODE_LOG`` (when set).
``$FAKE_OPENCODE_START`` = ``exit`` exits 2 before listening; ``mute`` never listens.

A turn's behaviour is chosen by its prompt:

* ``[[tool:<command>]]``: a bash call; it asks when the thread's ruleset says ``ask`` for
  ``bash``, then runs (``ran: <command>``) or fails as OpenCode does when rejected
* ``[[withdraw:<command>]]``: asks, then another client answers ``once`` (not the gateway)
* ``[[slow]]`` / ``[[hang]]``: text deltas every 20 ms / nothing, until ``abort``;
  ``[[stubborn]]``: one delta, then nothing, whatever comes
* ``[[die]]``: one delta, then the process exits 3; ``[[error:401]]``: an ``APIError``
* ``[[retry]]``: one ``session.status retry``, then the default answer
* ``[[drop]]``: cuts every event stream and refuses new ones until the turn has ended
* ``[[echo]]``: ``Echo: <turns of this thread>``; anything else: ``Hello from fake.``
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

PID = os.getpid()
ids = itertools.count(1)
subscribers: list[asyncio.Queue[dict[str, Any] | None]] = []
stream_blocked = asyncio.Event()
aborts: dict[str, asyncio.Event] = {}
replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
messages: dict[str, dict[str, Any]] = {}  # thread → its last {info, parts}
tasks: set[asyncio.Task[None]] = set()


def log(entry: dict[str, Any]) -> None:
    path = os.environ.get("FAKE_OPENCODE_LOG")
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps({"pid": PID, **entry}) + "\n")


def new_id(prefix: str) -> str:
    return f"{prefix}_fake{PID}x{next(ids):04d}"


def now_ms() -> int:
    return int(time.time() * 1000)


# --- threads, kept on disk --------------------------------------------------------------------


def store_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path(os.environ["HOME"]) / ".local/share")
    return Path(base) / "fake-opencode" / "threads.json"


def load_threads() -> dict[str, dict[str, Any]]:
    path = store_path()
    threads: dict[str, dict[str, Any]] = json.loads(path.read_text()) if path.exists() else {}
    return threads


def save_threads(threads: dict[str, dict[str, Any]]) -> None:
    path = store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(threads))


# --- the event stream --------------------------------------------------------------------------


def publish(directory: str | None, kind: str, properties: dict[str, Any]) -> None:
    payload = {"id": new_id("evt"), "type": kind, "properties": properties}
    wrapped: dict[str, Any] = {"payload": payload}
    if directory is not None:
        wrapped = {"directory": directory, "project": "global", **wrapped}
    for queue in list(subscribers):
        queue.put_nowait(wrapped)
        if directory is not None:  # the durable-log duplicate every session event gets
            queue.put_nowait(
                {"directory": directory, "payload": {"type": "sync", "syncEvent": payload}}
            )


async def global_event(request: Request) -> Response:
    if stream_blocked.is_set():
        return Response("busy", status_code=503)
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    subscribers.append(queue)
    queue.put_nowait({"payload": {"id": new_id("evt"), "type": "server.connected"}})
    heartbeat = float(os.environ.get("FAKE_OPENCODE_HEARTBEAT_S", "10"))

    async def stream() -> Any:
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), heartbeat)
                except TimeoutError:
                    item = {"payload": {"id": new_id("evt"), "type": "server.heartbeat"}}
                if item is None:
                    return
                yield f"data: {json.dumps(item)}\n\n"
        finally:
            if queue in subscribers:
                subscribers.remove(queue)

    return StreamingResponse(stream(), media_type="text/event-stream")


def drop_streams() -> None:
    stream_blocked.set()
    for queue in list(subscribers):
        subscribers.remove(queue)
        queue.put_nowait(None)


# --- a turn ------------------------------------------------------------------------------------


class Turn:
    def __init__(self, thread: str, thread_info: dict[str, Any], number: int) -> None:
        self.thread = thread
        self.directory: str = thread_info["directory"]
        self.rules: list[dict[str, Any]] = thread_info.get("permission") or []
        self.number = number
        self.aborted = aborts.setdefault(thread, asyncio.Event())
        self.aborted.clear()
        self.message = ""

    def emit(self, kind: str, **properties: Any) -> None:
        publish(self.directory, kind, {"sessionID": self.thread, **properties})

    def status(self, kind: str, **extra: Any) -> None:
        self.emit("session.status", status={"type": kind, **extra})

    def assistant(self, **extra: Any) -> str:
        self.message = new_id("msg")
        self.emit("message.updated", info=self.info(**extra))
        return self.message

    def info(self, **extra: Any) -> dict[str, Any]:
        return {
            "id": self.message,
            "sessionID": self.thread,
            "role": "assistant",
            "time": {"created": now_ms()},
            "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}},
            "cost": 0,
            **extra,
        }

    def part(self, **part: Any) -> None:
        self.emit(
            "message.part.updated",
            part={"sessionID": self.thread, "messageID": self.message, **part},
        )

    async def text(self, chunks: list[str]) -> str:
        part_id = new_id("prt")
        self.part(id=part_id, type="text", text="", time={"start": now_ms()})
        for chunk in chunks:
            self.emit(
                "message.part.delta",
                messageID=self.message,
                partID=part_id,
                field="text",
                delta=chunk,
            )
            await asyncio.sleep(0)
        text = "".join(chunks)
        self.part(id=part_id, type="text", text=text, time={"start": now_ms(), "end": now_ms()})
        messages[self.thread] = {
            "info": self.info(finish="stop", time={"created": now_ms(), "completed": now_ms()}),
            "parts": [{"type": "text", "id": part_id, "text": text}],
        }
        return text

    def finish_step(self, reason: str) -> None:
        tokens = {"input": 12, "output": 7, "reasoning": 2, "cache": {"read": 3, "write": 1}}
        self.part(id=new_id("prt"), type="step-finish", reason=reason, tokens=tokens, cost=0.001)
        info = self.info(tokens=tokens, cost=0.001, finish=reason)
        self.emit("message.updated", info=info)
        self.emit("message.updated", info=info)  # 1.18.33 sends it twice

    def idle(self) -> None:
        self.status("idle")
        self.emit("session.idle")

    def fail(self, error: dict[str, Any]) -> None:
        self.emit("session.error", error=error)
        self.idle()
        self.emit("message.updated", info=self.info(error=error))
        self.idle()  # and a second idle, as after every error or abort (obs)

    async def run(self, prompt: str) -> None:
        user = new_id("msg")
        user_info = {"id": user, "sessionID": self.thread, "role": "user"}
        self.emit("message.updated", info=user_info)
        self.emit(
            "message.part.updated",
            part={"id": new_id("prt"), "messageID": user, "type": "text", "text": prompt},
        )
        self.status("busy")
        self.assistant()
        self.part(id=new_id("prt"), type="step-start")
        if "[[die]]" in prompt:
            await self.text(["about to die"])
            sys.stderr.write("fatal: simulated crash\n")
            sys.stderr.flush()
            os._exit(3)
        if match := re.search(r"\[\[error:(\d+)\]\]", prompt):
            status = int(match.group(1))
            self.fail(
                {
                    "name": "APIError",
                    "data": {"message": "Unauthorized", "statusCode": status, "isRetryable": False},
                }
            )
            return
        if "[[stubborn]]" in prompt:
            self.emit(
                "message.part.delta",
                messageID=self.message,
                partID=new_id("prt"),
                field="text",
                delta="not listening",
            )
            await asyncio.Event().wait()  # deaf to aborts
        if "[[slow]]" in prompt or "[[hang]]" in prompt:
            await self.until_aborted(slow="[[slow]]" in prompt)
            return
        if "[[retry]]" in prompt:
            self.status("retry", attempt=1, message="Provider is overloaded", next=now_ms() + 500)
            self.status("busy")
        call = re.search(r"\[\[(tool|withdraw):(.+?)\]\]", prompt)
        if call and not await self.tool(call.group(2), withdraw=call.group(1) == "withdraw"):
            return
        if "[[drop]]" in prompt:
            drop_streams()
        chunks = [f"Echo: {self.number}"] if "[[echo]]" in prompt else ["Hello", " from", " fake."]
        await self.text(chunks)
        self.finish_step("stop")
        self.idle()
        self.emit("message.updated", info=user_info)  # a straggler after the idle (obs)
        stream_blocked.clear()

    async def until_aborted(self, *, slow: bool) -> None:
        part_id = new_id("prt")
        streamed = ""
        for tick in itertools.count(1):
            if self.aborted.is_set():
                break
            if slow:
                delta = f"tick {tick} "
                streamed += delta
                self.emit(
                    "message.part.delta",
                    messageID=self.message,
                    partID=part_id,
                    field="text",
                    delta=delta,
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.aborted.wait(), 0.02)
        error = {"name": "MessageAbortedError", "data": {"message": "Aborted"}}
        self.emit("session.error", error=error)
        self.idle()
        if streamed:
            self.part(id=part_id, type="text", text=streamed, time={"start": 1, "end": 2})
        self.emit("message.updated", info=self.info(error=error))
        self.idle()

    async def tool(self, command: str, *, withdraw: bool) -> bool:
        """Run a bash call; return whether the turn goes on."""
        await self.text(["I will run a command."])
        call = f"call_fake_{next(ids)}"
        part_id = new_id("prt")

        def state(**fields: Any) -> None:
            self.part(id=part_id, type="tool", tool="bash", callID=call, state=fields)

        state(status="pending", input={}, raw="")
        state(status="running", input={"command": command}, time={"start": now_ms()})
        action = next(
            (r["action"] for r in reversed(self.rules) if r["permission"] in ("bash", "*")),
            "allow",
        )
        reply: dict[str, Any] = {"reply": "once"}
        if action == "ask":
            request = new_id("per")
            future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            replies[request] = future
            self.emit(
                "permission.asked",
                id=request,
                permission="bash",
                patterns=[command],
                metadata={"command": command},
                always=[command.split(maxsplit=1)[0] + " *"],
                tool={"messageID": self.message, "callID": call},
            )
            if withdraw:
                await asyncio.sleep(0.05)
                replies.pop(request).set_result(reply)
            aborted: asyncio.Future[Any] = asyncio.ensure_future(self.aborted.wait())
            await asyncio.wait({future, aborted}, return_when=asyncio.FIRST_COMPLETED)
            aborted.cancel()
            if not future.done():
                replies.pop(request, None)
                await self.until_aborted(slow=False)
                return False
            reply = future.result()
            self.emit("permission.replied", requestID=request, reply=reply["reply"])
        tool_time = {"start": now_ms(), "end": now_ms()}
        if action == "deny" or reply["reply"] == "reject":
            error = (
                "The user rejected permission to use this specific tool call with the "
                f"following feedback: {reply.get('message', '')}"
            )
            state(status="error", input={"command": command}, error=error, time=tool_time)
            result = error
        else:
            result = f"ran: {command}"
            meta = {"output": result, "exit": 0}
            state(
                status="completed",
                input={"command": command},
                output=result,
                metadata=meta,
                title=command,
                time=tool_time,
            )
        self.finish_step("tool-calls")
        self.assistant()
        await self.text([f"Tool said: {result}"])
        return True


# --- routes ------------------------------------------------------------------------------------


async def health(request: Request) -> Response:
    return JSONResponse({"healthy": True, "version": "fake"})


async def create_session(request: Request) -> Response:
    body = await request.json()
    thread = new_id("ses")
    threads = load_threads()
    directory = request.query_params.get("directory", "/")
    threads[thread] = {
        "directory": directory,
        "permission": body.get("permission"),
        "title": body.get("title"),
        "turns": 0,
    }
    save_threads(threads)
    publish(directory, "session.created", {"sessionID": thread, "info": {"id": thread}})
    return JSONResponse({"id": thread, "directory": directory, "title": body.get("title")})


async def prompt_async(request: Request) -> Response:
    thread = request.path_params["thread"]
    threads = load_threads()
    if thread not in threads:
        return JSONResponse({"name": "NotFoundError"}, status_code=404)
    threads[thread]["turns"] += 1
    save_threads(threads)
    body = await request.json()
    turn = Turn(thread, threads[thread], threads[thread]["turns"])
    task = asyncio.create_task(turn.run(body["parts"][0]["text"]), name=thread)
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return Response(status_code=204)


async def abort(request: Request) -> Response:
    event = aborts.get(request.path_params["thread"])
    if event is not None:
        event.set()
    return JSONResponse(True)


async def reply_permission(request: Request) -> Response:
    future = replies.pop(request.path_params["request"], None)
    if future is None or future.done():
        return JSONResponse({"_tag": "PermissionNotFoundError"}, status_code=404)
    future.set_result(await request.json())
    return JSONResponse(True)


async def session_status(request: Request) -> Response:
    running = {task.get_name() for task in tasks if not task.done()}
    return JSONResponse({thread: {"type": "busy"} for thread in running})


async def last_message(request: Request) -> Response:
    message = messages.get(request.path_params["thread"])
    return JSONResponse([message] if message else [])


class Guard:
    """Basic auth on every route, and the request log."""

    def __init__(self, app: Any) -> None:
        self.app = app
        user = os.environ.get("OPENCODE_SERVER_USERNAME", "opencode")
        secret = f"{user}:{os.environ['OPENCODE_SERVER_PASSWORD']}".encode()
        self.expected = b"Basic " + base64.b64encode(secret)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != self.expected:
                await Response("unauthorized", status_code=401)(scope, receive, send)
                return
            body = b""
            more = True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
            log(
                {
                    "method": scope["method"],
                    "path": scope["path"],
                    "query": scope["query_string"].decode(),
                    "body": json.loads(body) if body else None,
                }
            )

            replayed = False
            upstream = receive

            async def replay() -> Any:
                nonlocal replayed
                if replayed:  # later calls wait for the disconnect, as the server's own do
                    return await upstream()
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}

            receive = replay
        await self.app(scope, receive, send)


class _Server(uvicorn.Server):
    def handle_exit(self, sig: int, frame: Any) -> None:
        os._exit(0)  # SIGTERM ends it at once, open event streams or not, as it does opencode


def main() -> None:
    if sys.argv[1:] == ["--version"]:  # the health probe
        print("0.0.1-fake")
        return
    port = int(sys.argv[sys.argv.index("--port") + 1])
    log({"argv": sys.argv, "env": dict(os.environ)})
    mode = os.environ.get("FAKE_OPENCODE_START")
    if mode == "exit":
        sys.stderr.write("fake: refusing to start\n")
        sys.exit(2)
    if mode == "mute":
        time.sleep(3600)
    app = Starlette(
        routes=[
            Route("/global/health", health),
            Route("/global/event", global_event),
            Route("/session", create_session, methods=["POST"]),
            Route("/session/status", session_status),
            Route("/session/{thread}/prompt_async", prompt_async, methods=["POST"]),
            Route("/session/{thread}/abort", abort, methods=["POST"]),
            Route("/session/{thread}/message", last_message),
            Route("/permission/{request}/reply", reply_permission, methods=["POST"]),
        ]
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    print(f"opencode server listening on http://127.0.0.1:{port}", flush=True)
    config = uvicorn.Config(Guard(app), log_level="warning", lifespan="off")
    _Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
