"""What a turn's spans say, in the gateway's words (app/observability/tracing.py makes them).

A turn's and an attempt's span end with how they ended (``ended``); what an attempt tells
through its events becomes spans and span events under it (``traced``): each tool call a
``tool`` span from ``tool.started`` to ``tool.completed``, the CLI's own retries and a move to
another provider as events. Only ids, kinds, names, counts and timings: never a prompt, an
output, a tool's input or an error's message.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from app.events import (
    EventData,
    ProviderSwitched,
    RetryScheduled,
    ToolCompleted,
    ToolStarted,
    TurnError,
    Usage,
)
from app.observability.tracing import NO_SPAN, Attributes, Span, Tracer
from app.providers.base import ApprovalAnswer

T = TypeVar("T")


def ended(span: Span, status: str, error: TurnError | None, usage: Usage | None) -> None:
    """Record how a turn or an attempt ended on its span (failed: ``error.type`` is the
    failure kind)."""
    span.set({"gateway.status": status})
    if usage is not None:
        span.set(
            {
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
                "gateway.usage.cached_input_tokens": usage.cached_input_tokens,
                "gateway.usage.cost_usd": usage.cost_usd,
            }
        )
    if error is None:
        return
    span.set({"gateway.error.retryable": error.retryable, "gateway.error.reason": error.reason})
    if status == "failed":
        span.fail(error.kind)
    else:
        span.set({"gateway.error.kind": error.kind})


def traced(span: Span, data: EventData) -> None:
    """What ``data``, an event the attempt of ``span`` tells, adds to its trace."""
    match data:
        case ToolStarted():
            span.open_child(
                data.tool_id,
                "tool",
                {
                    "gen_ai.tool.name": data.name,
                    "gen_ai.tool.call.id": data.tool_id,
                    "gateway.tool.kind": data.kind,
                },
            )
        case ToolCompleted():
            status = {"gateway.tool.status": data.status, "gateway.exit_code": data.exit_code}
            span.close_child(data.tool_id, status)
        case RetryScheduled(source="cli"):
            span.event(
                "retry.scheduled",
                {"gateway.retry.kind": data.kind, "gateway.retry.delay_s": data.delay_s},
            )
        case ProviderSwitched():
            span.event(
                "provider.switched",
                {
                    "gateway.failover.from": data.from_provider,
                    "gateway.failover.to": data.to_provider,
                },
            )
        case _:
            pass


async def waited(span: Span, asked: Awaitable[T]) -> T:
    """Wait for a client's answer (to an approval, a question) as ``span``; what it said is
    its ``gateway.decision`` (``allow``, ``deny``, ``answered``, ``unanswered``)."""
    with span:
        answer = await asked
        if isinstance(answer, ApprovalAnswer):
            span.set({"gateway.decision": answer.decision})
        else:
            span.set({"gateway.decision": "unanswered" if answer is None else "answered"})
        return answer


def failing(provider: str, error: TurnError) -> Attributes:
    """A failover span's attributes: the provider it leaves and why."""
    return {"gateway.failover.from": provider, "error.type": error.kind}


def written(tracer: Tracer, traces: list[object | None], events: int) -> Span:
    """A batch of ``events`` the event log stores in one transaction, as a span under the
    trace of its first appender that was inside one (linked to the others'); NO_SPAN when
    none was."""
    inside = [trace for trace in traces if trace is not None]
    if not inside:
        return NO_SPAN
    attributes: Attributes = {"db.operation.name": "insert_events", "gateway.events": events}
    return tracer.span("store.insert_events", attributes, context=inside[0], links=inside[1:])
