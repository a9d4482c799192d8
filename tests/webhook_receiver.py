"""A webhook receiver on loopback for the webhook tests: a real HTTP server in a thread that
verifies every delivery with the ``standardwebhooks`` library (the specification's reference
implementation), records it, and answers as the test scripts it.

``answer(received) -> status`` decides each answer (default 200); ``hold()`` makes the next
request wait, unanswered, until ``release()`` (``held`` is set when it arrives). Tests wait on
what arrived with ``wait_for`` (a condition, never a sleep).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # 24 bytes, the library's own test shape
OTHER_SECRET = "whsec_" + "c2Vjb25kLXNlY3JldC1mb3Itcm90YXRpb24tdGVzdHM="


@dataclass(frozen=True)
class Received:
    """One verified request: its Standard Webhooks headers, its payload and our answer."""

    id: str
    timestamp: int
    signatures: tuple[str, ...]
    payload: dict[str, Any]
    body: str
    status: int
    path: str
    arrived: float
    """When it arrived (``time.time()``)."""

    @property
    def type(self) -> str:
        kind: str = self.payload["type"]
        return kind

    @property
    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = self.payload["data"]
        return data


class WebhookReceiver:
    """Receives on ``url``; every request must verify under ``secret``."""

    def __init__(
        self,
        secret: str = SECRET,
        *,
        answer: Callable[[Received], int] | None = None,
        redirect_to: str | None = None,
    ) -> None:
        self.secret = secret
        self._verifier = Webhook(secret)
        self.answer = answer or (lambda received: 200)
        self.redirect_to = redirect_to
        self.received: list[Received] = []
        self.refused: list[str] = []
        """Requests that did not verify (each a failure of the test)."""
        self._changed = threading.Condition()
        self._hold = threading.Event()
        self.held = threading.Event()
        self.held_id: str | None = None
        """The ``webhook-id`` of the request that was held."""
        self._release = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def use_secret(self, secret: str) -> None:
        """Verify with ``secret`` from now on (one the gateway made)."""
        self.secret = secret
        self._verifier = Webhook(secret)

    def hold(self) -> None:
        """The next request waits unanswered until ``release``."""
        self._release.clear()
        self._hold.set()

    def release(self) -> None:
        self._release.set()

    def wait_for(
        self, predicate: Callable[[list[Received]], bool], timeout: float = 20.0
    ) -> list[Received]:
        """Wait until ``predicate(received)`` holds; fail after ``timeout``."""
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(list(self.received)), timeout):
                raise AssertionError(
                    f"the receiver did not get what was expected within {timeout} s: "
                    f"{[(r.type, r.id, r.status) for r in self.received]}; refused {self.refused}"
                )
            return list(self.received)

    def of_type(self, kind: str) -> list[Received]:
        with self._changed:
            return [r for r in self.received if r.type == kind]

    def delivered(self) -> Iterator[Received]:
        """The requests we answered with a 2xx."""
        with self._changed:
            found = [r for r in self.received if 200 <= r.status < 300]
        yield from found

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length).decode()
                arrived = time.time()
                if receiver._hold.is_set():
                    receiver._hold.clear()
                    receiver.held_id = self.headers.get("webhook-id")
                    receiver.held.set()
                    receiver._release.wait(timeout=120)
                    return  # the connection is dropped unanswered
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    receiver._verifier.verify(body, headers)
                except WebhookVerificationError as exc:
                    with receiver._changed:
                        receiver.refused.append(f"{exc}: {headers}")
                        receiver._changed.notify_all()
                    self._reply(400)
                    return
                received = Received(
                    id=headers["webhook-id"],
                    timestamp=int(headers["webhook-timestamp"]),
                    signatures=tuple(headers["webhook-signature"].split(" ")),
                    payload=json.loads(body),
                    body=body,
                    status=200,
                    path=self.path,
                    arrived=arrived,
                )
                if receiver.redirect_to is not None and self.path == "/hook":
                    status = 307
                else:
                    status = receiver.answer(received)
                received = dataclasses.replace(received, status=status)
                with receiver._changed:
                    receiver.received.append(received)
                    receiver._changed.notify_all()
                self._reply(status)

            def _reply(self, status: int) -> None:
                self.send_response(status)
                if status in (301, 302, 307, 308) and receiver.redirect_to is not None:
                    self.send_header("Location", receiver.redirect_to)
                self.send_header("Content-Length", "0")
                self.end_headers()

        return Handler


def status_plan(*statuses: int) -> Callable[[Received], int]:
    """Answer each message's attempts with ``statuses`` in turn (then 200)."""
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def answer(received: Received) -> int:
        with lock:
            n = seen.get(received.id, 0)
            seen[received.id] = n + 1
        return statuses[n] if n < len(statuses) else 200

    return answer
