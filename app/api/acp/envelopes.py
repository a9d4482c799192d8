"""A stored event, read into its typed form before the ACP translation looks at it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue, TypeAdapter

from app.events import Event, EventEnvelope

__all__ = ["EventInput", "read_event", "wire_form"]

EventInput = Mapping[str, Any] | EventEnvelope
"""An event as the wire carries it (the envelope parsed from JSON), or already typed."""

_EVENT: TypeAdapter[Event] = TypeAdapter(Event)


def read_event(event: EventInput) -> Event:
    """``event`` as the typed envelope of its type; raises ``pydantic.ValidationError`` for
    one that is not a gateway event."""
    if isinstance(event, EventEnvelope):
        return _EVENT.validate_python(event, from_attributes=True)
    return _EVENT.validate_python(event)


def wire_form(event: EventInput) -> dict[str, JsonValue]:
    """``event`` as JSON values, as clients of the event stream receive it."""
    if isinstance(event, EventEnvelope):
        return event.model_dump(mode="json")
    return dict(event)
