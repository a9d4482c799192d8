"""Control frames: what a stream carries besides events (no ``seq``; on SSE each has its own
``event:`` name). See docs/concepts/events.md, "Control frames", for when the gateway sends each."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from agent_gateway_sdk.models import Model


class ResyncRequired(Model):
    """The cursor was older than the events kept: the stream goes on from ``first_seq``."""

    type: Literal["resync_required"] = "resync_required"
    first_seq: int
    after: int


class Evicted(Model):
    """The stream was ended (the client lagged, or its key was retired); the SDK reconnects."""

    type: Literal["evicted"] = "evicted"
    last_seq_sent: int
    reason: str


class Shutdown(Model):
    """The gateway is stopping; the SDK reconnects after ``retry_ms``."""

    type: Literal["shutdown"] = "shutdown"
    reason: str = "gateway_shutdown"
    retry_ms: int = 5000


class Degraded(Model):
    """Events come from the store every ``poll_ms`` for now (later, still once, in order)."""

    type: Literal["degraded"] = "degraded"
    reason: str
    poll_ms: int


class Recovered(Model):
    """After ``degraded``: events come live again."""

    type: Literal["recovered"] = "recovered"


ControlFrame = Annotated[
    ResyncRequired | Evicted | Shutdown | Degraded | Recovered, Field(discriminator="type")
]
_control: TypeAdapter[ControlFrame] = TypeAdapter(ControlFrame)
CONTROL_TYPES = frozenset({"resync_required", "evicted", "shutdown", "degraded", "recovered"})


def parse_control(name: str, text: str) -> ControlFrame:
    """A named SSE control frame (its data is JSON whose ``type`` is the name)."""
    value = json.loads(text) if text else {}
    if not isinstance(value, dict):
        value = {}
    return _control.validate_python({**value, "type": name})
