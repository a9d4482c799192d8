"""Opening the WebSocket to the gateway, and what a failed attempt means::

ConnectError
├── Refused      the gateway refused the key (HTTP 401/403): stop, the editor is told
├── Rejected     any other refusal of the upgrade (HTTP 4xx: wrong URL, Origin): stop
└── Unreachable  nothing answered, or not yet (network, timeout, HTTP 5xx/408/429): retry
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidProxy, InvalidStatus, InvalidURI, WebSocketException

from agent_gateway_acp import __version__

OPEN_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 2.0
FIRST_DELAY_S = 0.5
MAX_DELAY_S = 10.0
STABLE_S = 10.0
"""A connection that lasted this long starts the backoff over when it drops."""
RETRYABLE_STATUSES = frozenset({408, 429})


class ConnectError(Exception):
    """A connection attempt failed; ``str()`` says why, for the editor's user."""


class Refused(ConnectError):
    def __init__(self, status: int) -> None:
        super().__init__(
            f"the gateway refused the key (HTTP {status}): set AGENT_GATEWAY_TOKEN to a key "
            "the gateway accepts"
        )
        self.status = status


class Rejected(ConnectError):
    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.status = status


class Unreachable(ConnectError):
    pass


async def open_connection(url: str, token: str) -> ClientConnection:
    """A WebSocket to ``url`` with ``token`` as its bearer key."""
    try:
        return await connect(
            url,
            additional_headers={"Authorization": f"Bearer {token}"},
            user_agent_header=f"agent-gateway-acp/{__version__}",
            open_timeout=OPEN_TIMEOUT_S,
            close_timeout=CLOSE_TIMEOUT_S,
            # No limit of the relay's own: the gateway bounds what it sends, and a message
            # refused here would come back in every replay, stalling the session for good.
            max_size=None,
        )
    except InvalidStatus as exc:
        status = exc.response.status_code
        if status in (401, 403):
            raise Refused(status) from None
        if 400 <= status < 500 and status not in RETRYABLE_STATUSES:
            detail = f"the gateway refused the connection to {url} (HTTP {status})"
            if status == 404:
                detail += ": is the URL the gateway's, and does this gateway serve /v1/acp?"
            raise Rejected(detail, status) from None
        raise Unreachable(f"the gateway answered HTTP {status}") from None
    except (InvalidURI, InvalidProxy, ImportError) as exc:
        # ImportError: the environment names a SOCKS proxy and python-socks is missing.
        raise Rejected(str(exc)) from None
    except (OSError, TimeoutError, WebSocketException) as exc:
        raise Unreachable(str(exc) or type(exc).__name__) from None


def backoff(*, rng: random.Random | None = None) -> Iterator[float]:
    """Seconds to wait before each retry: at once, then doubling from 0.5 s up to 10 s, each
    shortened by up to a fifth at random so that many editors do not come back together."""
    rng = rng or random.Random()  # noqa: S311 - jitter, not a secret
    yield 0.0
    delay = FIRST_DELAY_S
    while True:
        yield delay * rng.uniform(0.8, 1.0)
        delay = min(delay * 2, MAX_DELAY_S)
