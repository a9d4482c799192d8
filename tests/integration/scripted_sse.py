"""A scripted SSE server on loopback for the SDK's stream tests: real sockets, each
connection answered by the next step of a script (frames written as given, a drop, a
silence, an error status), every request's headers recorded.

A step is a list of actions: ``bytes`` are written and flushed as one TCP write; ``DROP``
resets the connection (``SO_LINGER`` 0: the client sees a broken stream, not an end);
``END`` closes it cleanly; ``HOLD`` keeps it open and silent until the server stops.
A step may instead be a ``Status`` (a complete non-streaming answer).

A client may hang up at any point of a step (that is often what a test wants of it): the
rest of the step is then dropped, as a real server would, instead of failing the thread.
"""

from __future__ import annotations

import errno
import json
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

DROP = "drop"
END = "end"
HOLD = "hold"
Action = bytes | str


@dataclass(frozen=True)
class Status:
    code: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


Step = list[Action] | Status


def event(seq: int, kind: str = "message.delta", session: str = "ses_1", **data: Any) -> bytes:
    """One event envelope as an SSE message (``id`` = seq)."""
    payload = data or {"message_id": "m1", "text": f"t{seq}"}
    envelope = {
        "seq": seq,
        "session_id": session,
        "turn_id": "trn_1",
        "attempt": 1,
        "provider": "claude_code",
        "at": "2026-01-01T00:00:00Z",
        "type": kind,
        "data": payload,
    }
    return f"id: {seq}\ndata: {json.dumps(envelope)}\n\n".encode()


def control(name: str, *, message_id: int | None = None, **data: Any) -> bytes:
    """A named control frame as the gateway sends it."""
    head = f"event: {name}\n" + (f"id: {message_id}\n" if message_id is not None else "")
    return (head + f"data: {json.dumps({'type': name, **data})}\n\n").encode()


def problem(code: int, slug: str, retry_after: int | None = None, **fields: Any) -> Status:
    body = {
        "type": f"urn:agent-gateway:problem:{slug}",
        "title": slug,
        "status": code,
        "detail": f"{slug} (scripted)",
        **fields,
    }
    headers = {"Content-Type": "application/problem+json"}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return Status(code, json.dumps(body).encode(), headers)


CONNECTED = b": connected\nretry: 2000\n\n"
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Connection: close\r\n\r\n"
)
REASONS = {204: "No Content", 404: "Not Found", 429: "Too Many Requests", 503: "Unavailable"}


class ScriptedSse:
    """Serves ``steps`` to successive connections (the last step repeats), on 127.0.0.1."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.requests: list[dict[str, str]] = []
        """Each request's method, path and lower-cased headers, in arrival order."""
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def last_event_ids(self) -> list[str | None]:
        return [r.get("last-event-id") for r in self.requests]

    def __enter__(self) -> ScriptedSse:
        self._accepting.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._accepting.join(timeout=5)
        for thread in self._threads:
            thread.join(timeout=5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            index = len(self._threads)
            thread = threading.Thread(target=self._serve, args=(conn, index), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket, index: int) -> None:
        try:
            self._play(conn, index)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client hung up first
        except OSError as error:
            if error.errno != errno.ENOTCONN:
                raise

    def _play(self, conn: socket.socket, index: int) -> None:
        with conn:
            request = _read_head(conn)
            if request is None:
                return
            self.requests.append(request)
            step = self.steps[min(index, len(self.steps) - 1)]
            if isinstance(step, Status):
                _answer(conn, step)
                return
            conn.sendall(STREAM_HEAD)
            for action in step:
                if isinstance(action, bytes):
                    conn.sendall(action)
                elif action == DROP:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                elif action == END:
                    conn.shutdown(socket.SHUT_RDWR)
                    return
                elif action == HOLD:
                    self._stop.wait(timeout=30)
                    return


def _read_head(conn: socket.socket) -> dict[str, str] | None:
    conn.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    found = {"method": method, "path": path}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        found[name.strip().lower()] = value.strip()
    length = int(found.get("content-length", "0"))
    while len(rest) < length:
        chunk = conn.recv(4096)
        if not chunk:
            break
        rest += chunk
    found["body"] = rest.decode()
    return found


def _answer(conn: socket.socket, status: Status) -> None:
    reason = REASONS.get(status.code, "Status")
    headers = {"Content-Length": str(len(status.body)), "Connection": "close", **status.headers}
    head = f"HTTP/1.1 {status.code} {reason}\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()
    )
    conn.sendall(head.encode() + b"\r\n" + status.body)


def split_bytes(data: bytes, size: int = 1) -> Iterator[bytes]:
    """``data`` in pieces of ``size`` bytes (each becomes a TCP write of its own)."""
    for start in range(0, len(data), size):
        yield data[start : start + size]
