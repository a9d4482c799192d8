"""One delivery attempt: sign, POST, and say how it went (never raises for the endpoint's
sake).

An answer's body is read up to ``MAX_ANSWER_BYTES`` and dropped (its connection is then kept
for the next attempt); ``timeout_s`` bounds the whole attempt (connect, send, answer), so a
slow or endless body never holds it longer.
Redirects are never followed (a 3xx fails the delivery, as the Standard Webhooks
recommendation says: the endpoint's URL should be updated instead); a URL the settings no
longer allow is refused before any connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import httpx

from app.observability.webhookmetrics import AttemptResult
from app.store.webhookrecords import ClaimedDelivery
from app.webhook_settings import url_refusal
from app.webhooks.endpoints import Endpoint
from app.webhooks.signing import webhook_headers

THROTTLING = frozenset({429, 502, 503, 504})
"""Statuses whose ``Retry-After`` is honoured (the endpoint is overloaded)."""
MAX_RETRY_AFTER_S = 86400.0
MAX_ANSWER_BYTES = 65536
"""An answer's body is read (and dropped) up to this much, so its connection can be reused."""


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """How one attempt ended."""

    result: AttemptResult
    status_code: int | None = None
    error: str | None = None
    """What the delivery log shows (None for a success)."""
    final: bool = False
    """Trying again cannot help (a redirect, a refused URL, 410 Gone)."""
    gone: bool = False
    """The endpoint answered 410 Gone: it wants no more messages."""
    retry_after_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class SendPolicy:
    """What every attempt obeys (from ``[webhooks]``)."""

    timeout_s: float
    allow_http_hosts: list[str]
    allowed_hosts: list[str] | None


def client(timeout_s: float) -> httpx.AsyncClient:
    """The one HTTP client of the dispatcher: no redirects, nothing from the environment
    (no proxy variables, no ``.netrc`` credentials added to a request); ``timeout_s`` bounds
    each phase (and ``attempt`` the whole attempt)."""
    return httpx.AsyncClient(follow_redirects=False, trust_env=False, timeout=timeout_s)


async def attempt(
    http: httpx.AsyncClient,
    endpoint: Endpoint,
    delivery: ClaimedDelivery,
    policy: SendPolicy,
    *,
    now: Callable[[], float] = time.time,
) -> Attempt:
    """Send ``delivery`` to ``endpoint`` once."""
    refusal = url_refusal(
        endpoint.url, allow_http_hosts=policy.allow_http_hosts, allowed_hosts=policy.allowed_hosts
    )
    if refusal is not None:
        return Attempt(result="refused", error=f"refused: {refusal}", final=True)
    headers = webhook_headers(
        endpoint.secrets, msg_id=delivery.message_id, timestamp=int(now()), body=delivery.payload
    )
    try:
        async with asyncio.timeout(policy.timeout_s):
            request = http.build_request(
                "POST", endpoint.url, content=delivery.payload.encode(), headers=headers
            )
            response = await http.send(request, stream=True)
            try:  # read a short answer whole, so that its connection is kept for the next
                read = 0
                async for chunk in response.aiter_raw():
                    read += len(chunk)
                    if read > MAX_ANSWER_BYTES:
                        break  # not worth reading: the connection is closed instead
            finally:
                await response.aclose()
    except TimeoutError:
        return Attempt(result="timeout", error=f"no answer within {policy.timeout_s:g} s")
    except httpx.HTTPError as exc:
        return Attempt(result="network", error=f"{type(exc).__name__}: {exc}"[:500])
    return _answered(response)


def _answered(response: httpx.Response) -> Attempt:
    code = response.status_code
    if 200 <= code < 300:
        return Attempt(result="success", status_code=code)
    if 300 <= code < 400:
        where = response.headers.get("location", "")[:300]
        return Attempt(
            result="redirect",
            status_code=code,
            error=f"answered {code} (a redirect to {where or 'nowhere'}): redirects are not "
            "followed; give the endpoint its final URL",
            final=True,
        )
    if code == 410:
        return Attempt(
            result="http_error",
            status_code=code,
            error="answered 410 Gone: the endpoint wants no more messages",
            final=True,
            gone=True,
        )
    retry_after = _retry_after(response) if code in THROTTLING else None
    return Attempt(
        result="http_error",
        status_code=code,
        error=f"answered {code}",
        retry_after_s=retry_after,
    )


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)
