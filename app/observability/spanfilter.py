"""What no span may carry out of the gateway: a key in a request's query string.

A browser's EventSource and WebSocket send the gateway key as ``?access_token=`` (they cannot
set headers), and FastAPI records a request's query as ``url.query``. Imported by
app/observability/telemetry.py only when tracing is on (it subclasses the SDK's processor).
"""

from __future__ import annotations

from opentelemetry.context import Context
from opentelemetry.sdk.trace import Span, SpanProcessor

from app.redaction import Redactor

QUERY = "url.query"


class _QueryRedactor(SpanProcessor):
    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        query = (span.attributes or {}).get(QUERY)
        if isinstance(query, str):
            span.set_attribute(QUERY, self._redactor(query))


def query_redactor(redactor: Redactor) -> SpanProcessor:
    """A span processor that removes keys and secrets from every span's ``url.query`` as the
    span starts (``access_token=…`` and every value ``redactor``'s mask knows)."""
    return _QueryRedactor(redactor)
