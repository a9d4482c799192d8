"""Structured logs: one JSON object per line, carrying the ids of what it is about.

Every record gets the ids bound in its context (``bind_ids``): a turn's task binds its
session, turn and provider, so every line logged while it runs — by the runtime, a provider,
the process runner — names them without passing them along. Lines about events of interest
add an ``event`` name and their fields through ``extra=`` (see ``observer``). Values are
redacted like the message (``app.redaction``): ``extra`` fields are set after the record
factory ran, so the formatter cleans them itself.

With tracing on (app/observability/telemetry.py), ``TraceIds`` adds the ``trace_id`` and
``span_id`` of the span a line was written in, so a line and its trace find each other.

``log_format = "text"`` writes one plain line each, for a person; ``"auto"`` (the default)
chooses ``text`` when stderr is a terminal and JSON otherwise. JSON never carries terminal
escape codes (uvicorn's ``color_message`` is dropped, escapes in values are removed).

Alembic's own lines (which database backend, each revision's name) are kept below warning:
the migration says in one line of its own each revision it applies (app/store/schema.py).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from opentelemetry import trace

from app.redaction import Redactor

IDS = ("session_id", "turn_id", "provider")
"""Context fields every line carries when they are known."""

_ids: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "log_ids", default=None
)

LogFormat = Literal["auto", "json", "text"]

# The attributes every LogRecord has; anything else on a record came in through ``extra=``.
# uvicorn's ``color_message`` is its message again with terminal colours, for its own
# formatter only.
_STANDARD = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()
    | {"message", "asctime", "color_message"}
)
_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-_])")
"""Terminal escape sequences: CSI (colours, cursor), OSC (titles, links), and the short ones."""
QUIET_LOGGERS = ("alembic", "httpx")
"""Loggers kept to warnings and errors whatever ``log_level`` says: Alembic's (see above) and
httpx's line for every request the gateway makes (to a CLI's server, a webhook)."""


def chosen_format(log_format: LogFormat, stream: TextIO) -> Literal["json", "text"]:
    """The format ``log_format`` means on ``stream``: ``auto`` is text on a terminal."""
    if log_format != "auto":
        return log_format
    try:
        return "text" if stream.isatty() else "json"
    except ValueError:  # a closed stream
        return "json"


def without_escapes(text: str) -> str:
    """``text`` with its terminal escape sequences removed."""
    return _ESCAPES.sub("", text) if "\x1b" in text else text


@contextlib.contextmanager
def bind_ids(**ids: str | None) -> Iterator[None]:
    """Add ``ids`` (None values are skipped) to every record logged in this context.

    Tasks created inside inherit them (asyncio copies the context).
    """
    current = _ids.get() or {}
    token = _ids.set({**current, **{k: v for k, v in ids.items() if v is not None}})
    try:
        yield
    finally:
        _ids.reset(token)


def bound_ids() -> dict[str, str]:
    """The ids bound in the current context."""
    return dict(_ids.get() or {})


class _IdsFilter(logging.Filter):
    """Stamps the context's ids on each record, at the moment it is logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in (_ids.get() or {}).items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class TraceIds(logging.Filter):
    """Stamps the ids of the span being recorded where a line is logged (W3C hex form)."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = trace.get_current_span().get_span_context()
        if context.is_valid and not hasattr(record, "trace_id"):
            record.trace_id = trace.format_trace_id(context.trace_id)
            record.span_id = trace.format_span_id(context.span_id)
        return True


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", <ids>, "event"?, <fields>, "exc"?}`` on one line."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self._redactor = redactor or Redactor(())

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": without_escapes(record.getMessage()),
        }
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_"):
                line[name] = self._clean(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = without_escapes(self._redactor(record.exc_text))
        return json.dumps(line, ensure_ascii=False, default=str)

    def _clean(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): self._clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._clean(v) for v in value]
        value = self._redactor.value(value)
        return without_escapes(value) if isinstance(value, str) else value


class TextFormatter(logging.Formatter):
    """The classic line, with the ids in brackets when there are any."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        names = (*IDS, "trace_id")
        ids = " ".join(f"{n}={getattr(record, n)}" for n in names if hasattr(record, n))
        return f"{text} [{ids}]" if ids else text


def configure_logging(
    *,
    level: str,
    log_format: LogFormat,
    redactor: Redactor | None = None,
) -> logging.Handler:
    """One stderr handler on the root logger; uvicorn's loggers propagate to it."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_IdsFilter())
    chosen = chosen_format(log_format, sys.stderr)
    handler.setFormatter(JsonFormatter(redactor) if chosen == "json" else TextFormatter())
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level.upper())))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
    return handler
