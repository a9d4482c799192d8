"""Structured logs: one JSON object per line, carrying the ids of what it is about.

Every record gets the ids bound in its context (``bind_ids``): a turn's task binds its
session, turn and provider, so every line logged while it runs — by the runtime, a provider,
the process runner — names them without passing them along. Lines about events of interest
add an ``event`` name and their fields through ``extra=`` (see ``observer``). Values are
redacted like the message (``app.redaction``): ``extra`` fields are set after the record
factory ran, so the formatter cleans them itself.

With tracing on (app/observability/telemetry.py), ``TraceIds`` adds the ``trace_id`` and
``span_id`` of the span a line was written in, so a line and its trace find each other.

``log_format = "text"`` keeps the classic one-line form for a terminal.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal

from opentelemetry import trace

from app.redaction import Redactor

IDS = ("session_id", "turn_id", "provider")
"""Context fields every line carries when they are known."""

_ids: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "log_ids", default=None
)

# The attributes every LogRecord has; anything else on a record came in through ``extra=``.
_STANDARD = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)


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
            "msg": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_"):
                line[name] = self._clean(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = self._redactor(record.exc_text)
        return json.dumps(line, ensure_ascii=False, default=str)

    def _clean(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): self._clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._clean(v) for v in value]
        return self._redactor.value(value)


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
    log_format: Literal["json", "text"],
    redactor: Redactor | None = None,
) -> logging.Handler:
    """One stderr handler on the root logger; uvicorn's loggers propagate to it."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_IdsFilter())
    handler.setFormatter(JsonFormatter(redactor) if log_format == "json" else TextFormatter())
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
