"""One line of ``doctor``'s answer, and the connection test its network checks share."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

Status = Literal["ok", "warn", "FAIL", "skip"]
"""``skip``: not checked (offline, or nothing configured to check); the detail says why."""
CONNECT_TIMEOUT_S = 3.0


@dataclass(frozen=True, kw_only=True)
class Check:
    provider: str
    """The provider checked, or ``gateway`` for the gateway's own checks."""
    name: str
    status: Status
    detail: str


async def reachable(url: str) -> str | None:
    """None when a TCP connection to the URL's host and port opens, else why not."""
    parts = urlsplit(url)
    if not parts.hostname:
        return f"{url!r} is not a URL"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            _, writer = await asyncio.open_connection(parts.hostname, port)
    except (OSError, TimeoutError) as exc:
        return f"cannot connect to {parts.hostname}:{port} ({type(exc).__name__}: {exc})"
    writer.close()
    await writer.wait_closed()
    return None
