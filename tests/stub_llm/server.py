"""The stub server: ``StubLLM`` records every request, routes it to the wire format that
answers it, and keeps the counts of the fault directives."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, NoReturn

from tests.stub_llm.anthropic import ERROR_TYPES, error_body
from tests.stub_llm.anthropic import answer as answer_messages
from tests.stub_llm.plans import (
    INPUT_TOKENS,
    CutPlan,
    Fault,
    HangPlan,
    fault_directive,
    is_side_request,
)
from tests.stub_llm.recorded import OPENAI_PATHS, RecordedRequest, RecordedResponse
from tests.stub_llm.wire import (
    STREAM_LIMIT,
    BadRequest,
    ClientGone,
    Conn,
    Cut,
    read_request,
    response_head,
)

_log = logging.getLogger("tests.stub_llm")


class StubLLM:
    """A stub Anthropic (and OpenAI) model API on ``127.0.0.1`` served from a background thread.

    ``StubLLM()`` binds a free port (``port=0``); ``start()``/``stop()`` or use it as a context
    manager. Thread-safe: tests may read ``requests`` and wait from any thread or event loop.
    """

    def __init__(
        self, port: int = 0, host: str = "127.0.0.1", *, delays: Mapping[str, float] | None = None
    ) -> None:
        self.delays: dict[str, float] = dict(delays or {})
        self.down: dict[str, int] = {}
        """API → the status every model request of it gets (``anthropic``, ``openai``)."""
        """API (``anthropic``, ``openai``, ``gemini``) → seconds before its first byte."""
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._cond = threading.Condition()
        self._requests: list[RecordedRequest] = []
        self._responses: list[RecordedResponse] = []
        self._ids = itertools.count(1)
        self._ids_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._fault_uses: dict[str, int] = {}
        self._limit_starts: dict[str, float] = {}
        self._fault_lock = threading.Lock()

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> StubLLM:
        if self._thread is not None:
            raise RuntimeError("StubLLM already started")
        self._ready.clear()
        self._startup_error = None
        self._thread = threading.Thread(target=self._run, name="stub-llm", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            self._thread = None
            raise RuntimeError("StubLLM failed to start") from self._startup_error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        thread, loop, stop_event = self._thread, self._loop, self._stop_event
        if thread is None:
            return
        if loop is not None and stop_event is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(stop_event.set)
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError("StubLLM thread did not stop")
        self._thread = None
        self._loop = None
        self._stop_event = None
        self._port = None

    def __enter__(self) -> StubLLM:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("StubLLM is not running")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no ``/v1``), the value for ``ANTHROPIC_BASE_URL``."""
        return f"http://{self._host}:{self.port}"

    @property
    def gemini_base_url(self) -> str:
        """For ``GOOGLE_GEMINI_BASE_URL``: the SDK appends ``/v1beta`` itself."""
        return self.base_url

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: Codex ``base_url``, OpenCode ``options.baseURL``."""
        return f"{self.base_url}/v1"

    # -- recorded requests ------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._cond:
            return list(self._requests)

    def message_requests(self) -> list[RecordedRequest]:
        """Only the ``POST /v1/messages`` requests (side requests included)."""
        return [r for r in self.requests if r.is_message]

    def main_message_requests(self) -> list[RecordedRequest]:
        """``POST /v1/messages`` requests of the agent loop (side requests left out)."""
        return [r for r in self.message_requests() if not is_side_request(r.body)]

    def openai_requests(self) -> list[RecordedRequest]:
        """``POST /v1/responses`` and ``POST /v1/chat/completions`` (side requests included)."""
        return [r for r in self.requests if r.is_openai]

    def model_requests(self) -> list[RecordedRequest]:
        """Model calls of the agent loops, any format, side requests left out."""
        return [
            r
            for r in self.requests
            if (r.is_message or r.is_openai or r.is_gemini) and not r.is_side
        ]

    @property
    def responses(self) -> list[RecordedResponse]:
        """How each finished request was answered, in the order the answers finished."""
        with self._cond:
            return list(self._responses)

    def clear(self) -> None:
        """Forget the recorded requests and responses (the id counters keep counting)."""
        with self._cond:
            self._requests.clear()
            self._responses.clear()

    def wait_for_requests(
        self,
        n: int,
        timeout: float = 10.0,
        predicate: Callable[[RecordedRequest], bool] | None = None,
    ) -> list[RecordedRequest]:
        """Block until at least ``n`` recorded requests (matching ``predicate``) exist.

        Returns the matching requests; raises ``TimeoutError`` after ``timeout`` seconds. From
        async code call it via ``asyncio.to_thread``.
        """

        def matching() -> list[RecordedRequest]:
            return [r for r in self._requests if predicate is None or predicate(r)]

        with self._cond:
            if not self._cond.wait_for(lambda: len(matching()) >= n, timeout):
                raise TimeoutError(
                    f"expected {n} requests, got {len(matching())} within {timeout} s"
                )
            return matching()

    def wait_for_message_requests(self, n: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """``wait_for_requests`` counting only ``POST /v1/messages``."""
        return self.wait_for_requests(n, timeout, lambda r: r.is_message)

    def wait_for_responses(self, n: int, timeout: float = 10.0) -> list[RecordedResponse]:
        """Block until ``n`` answers have finished (sent in full or cut by the client)."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._responses) >= n, timeout):
                raise TimeoutError(
                    f"expected {n} responses, got {len(self._responses)} within {timeout} s"
                )
            return list(self._responses)

    def _record(self, request: RecordedRequest) -> None:
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()

    def _record_response(
        self, request: RecordedRequest, status: int, completed: bool, *, cut: bool = False
    ) -> None:
        with self._cond:
            self._responses.append(RecordedResponse(request, status, completed, cut=cut))
            self._cond.notify_all()

    def _next_id(self) -> int:
        with self._ids_lock:
            return next(self._ids)

    # -- fault directives ---------------------------------------------------------------------

    def fault_uses(self, directive: str) -> int:
        """How many requests a counted directive (``[[fail:500:2]]``) has failed so far."""
        with self._fault_lock:
            return self._fault_uses.get(directive, 0)

    def _take(self, directive: str, limit: int) -> bool:
        with self._fault_lock:
            used = self._fault_uses.get(directive, 0)
            if used >= limit:
                return False
            self._fault_uses[directive] = used + 1
            return True

    def fault_for(self, request: RecordedRequest) -> Fault | None:
        """The fault ``request`` plays (None for side requests); counts one use of it."""
        if request.is_side:
            return None
        return fault_directive(request.conversation_text, self._take, self._limited)

    def _limited(self, directive: str, seconds: float) -> int | None:
        """``[[usage_limit:<seconds>]]`` is in force for ``seconds`` from the first request
        that carried it; its reset time (Unix seconds, rounded up) while it is, else None."""
        now = time.time()
        with self._fault_lock:
            first = self._limit_starts.setdefault(directive, now)
        resets_at = first + seconds
        return math.ceil(resets_at) if now < resets_at else None

    # -- server -----------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            if not self._ready.is_set():
                self._startup_error = exc  # start() raises it
                self._ready.set()
            else:
                _log.exception("stub LLM server crashed")

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        server = await asyncio.start_server(
            self._handle, self._host, self._requested_port, limit=STREAM_LIMIT
        )
        self._port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stop_event.wait()
        finally:
            server.close()
            for writer in list(self._writers):
                writer.close()
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            await server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._writers.add(writer)
        conn = Conn(reader, writer)
        try:
            while True:
                try:
                    request = await read_request(reader)
                except BadRequest as exc:
                    await self._send_json(conn, 400, error_body("invalid_request_error", str(exc)))
                    return
                if request is None:
                    return
                self._record(request)
                keep_alive = request.headers.get("connection", "").lower() != "close"
                try:
                    status = await self._dispatch(conn, request, keep_alive)
                except Cut:
                    self._record_response(request, 200, completed=False, cut=True)
                    return
                except (ClientGone, ConnectionError):
                    self._record_response(request, 200, completed=False)
                    return
                self._record_response(request, status, completed=True)
                if not keep_alive:
                    return
        except (ClientGone, ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away between requests
        except asyncio.CancelledError:
            pass  # stop()
        except Exception:
            _log.exception("stub LLM connection handler failed")
        finally:
            self._writers.discard(writer)
            if task is not None:
                self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()

    async def _dispatch(self, conn: Conn, request: RecordedRequest, keep_alive: bool) -> int:
        """Answer one request; returns the HTTP status sent."""
        api = (
            "anthropic"
            if request.is_message
            else "openai"
            if request.is_openai
            else "gemini"
            if request.is_gemini
            else None
        )
        if api is not None and self.delays.get(api):
            await asyncio.sleep(self.delays[api])
        status = self.down.get(api or "")
        if status and request.method == "POST" and request.path != "/v1/messages/count_tokens":
            if api == "openai":
                from tests.stub_openai import _error_body as openai_error  # noqa: PLC0415

                body = openai_error(status, "the stub has this API down")
            else:
                kind = ERROR_TYPES.get(status, "api_error")
                body = error_body(kind, "the stub has this API down")
            await self._send_json(conn, status, body, keep_alive)
            return status
        if request.method == "POST" and request.path == "/v1/messages/count_tokens":
            await self._send_json(conn, 200, {"input_tokens": INPUT_TOKENS}, keep_alive)
            return 200
        if request.method == "POST" and request.path in OPENAI_PATHS:
            from tests.stub_openai import answer  # noqa: PLC0415 (stub_openai imports this module)

            return await answer(self, conn, request, keep_alive)
        if request.is_gemini:
            from tests.stub_gemini import answer as answer_gemini  # noqa: PLC0415 (import cycle)

            return await answer_gemini(self, conn, request, keep_alive)
        if not request.is_message:
            body = error_body("not_found_error", f"{request.method} {request.path} not found")
            await self._send_json(conn, 404, body, keep_alive, head_only=request.method == "HEAD")
            return 404
        return await answer_messages(self, conn, request, keep_alive)

    async def _send_json(
        self,
        conn: Conn,
        status: int,
        payload: Mapping[str, Any],
        keep_alive: bool = False,
        *,
        head_only: bool = False,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        headers = {
            "content-type": "application/json",
            "content-length": str(len(data)),
            "request-id": f"req_stub_{self._next_id()}",
            "connection": "keep-alive" if keep_alive else "close",
            **(extra_headers or {}),
        }
        await conn.send(response_head(status, headers) + (b"" if head_only else data))

    async def json_fault(
        self, conn: Conn, fault: CutPlan | HangPlan, payload: Mapping[str, Any]
    ) -> NoReturn:
        """A non-streaming answer that hangs (nothing sent) or is cut in the middle of its body."""
        if isinstance(fault, HangPlan):
            await conn.keep_alive(b"")
        data = json.dumps(payload).encode()
        headers = {
            "content-type": "application/json",
            "content-length": str(len(data)),
            "request-id": f"req_stub_{self._next_id()}",
            "connection": "close",
        }
        await conn.send(response_head(200, headers) + data[: len(data) // 2])
        await conn.cut()

    async def _open_sse(self, conn: Conn, keep_alive: bool) -> None:
        """Send the head of a chunked ``text/event-stream`` answer."""
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "transfer-encoding": "chunked",
            "request-id": f"req_stub_{self._next_id()}",
            "connection": "keep-alive" if keep_alive else "close",
        }
        await conn.send(response_head(200, headers))
