"""Event-loop lag: how late the loop runs a timer it was asked to run on time.

Everything the gateway does for its clients (reading CLI output, storing and sending events,
answering requests) runs on one event loop, so a callback that holds the loop delays all of
them. ``watch_loop_lag`` sleeps ``interval_s`` over and over and records by how much each sleep
overran (the gateway records into ``agent_gateway_event_loop_lag_seconds``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def watch_loop_lag(record: Callable[[float], None], interval_s: float) -> None:
    """Sample the loop's lag every ``interval_s``, in seconds, until cancelled."""
    while True:
        start = time.monotonic()
        await asyncio.sleep(interval_s)
        record(max(0.0, time.monotonic() - start - interval_s))
