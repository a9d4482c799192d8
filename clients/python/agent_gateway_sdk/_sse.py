"""An incremental decoder of ``text/event-stream`` (the WHATWG "event stream" rules).

Bytes go in as they arrive, split anywhere (inside a line, between ``\\r`` and ``\\n``, inside
a UTF-8 sequence); complete messages come out. Lines end with ``\\r\\n``, ``\\n`` or ``\\r``;
``:`` lines are comments; a blank line dispatches the message (none when it has no ``data``);
an ``id`` holding NUL is ignored; ``retry`` is kept when it is all digits.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class SseMessage:
    event: str
    """``message`` unless the stream named it."""
    data: str
    id: str | None
    """The message's own ``id:`` field, if it had one."""


class SseDecoder:
    """Turns chunks of an event stream into ``SseMessage``s."""

    def __init__(self) -> None:
        self._buffer = b""
        self._started = False
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self.retry_ms: int | None = None
        """The last ``retry:`` the stream sent (its advice for the reconnect delay)."""
        self.comments = 0

    def feed(self, chunk: bytes) -> list[SseMessage]:
        """The messages completed by ``chunk``."""
        self._buffer += chunk
        if not self._started:
            if len(self._buffer) < 3 and b"\xef\xbb\xbf".startswith(self._buffer):
                return []
            self._buffer = self._buffer.removeprefix(b"\xef\xbb\xbf")
            self._started = True
        messages: list[SseMessage] = []
        while True:
            line, found = self._next_line()
            if not found:
                return messages
            message = self._line(line.decode("utf-8", errors="replace"))
            if message is not None:
                messages.append(message)

    def _next_line(self) -> tuple[bytes, bool]:
        buffer = self._buffer
        cr = buffer.find(b"\r")
        lf = buffer.find(b"\n")
        if cr == -1 and lf == -1:
            return b"", False
        if cr != -1 and (lf == -1 or cr < lf):
            if cr + 1 == len(buffer):
                return b"", False  # a \n may follow in the next chunk
            end = cr + 2 if buffer[cr + 1 : cr + 2] == b"\n" else cr + 1
            line = buffer[:cr]
        else:
            end = lf + 1
            line = buffer[:lf]
        self._buffer = buffer[end:]
        return line, True

    def _line(self, line: str) -> SseMessage | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            self.comments += 1
            return None
        name, colon, value = line.partition(":")
        if colon:
            value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SseMessage | None:
        data, event, message_id = self._data, self._event, self._id
        self._data, self._event, self._id = [], "", None
        if not data:
            return None
        return SseMessage(event=event or "message", data="\n".join(data), id=message_id)
