"""The gateway's ACP endpoint from the URL a user gives: ``http(s)://host[:port][/prefix]``
becomes ``ws(s)://host[:port][/prefix]/v1/acp``."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

PATH = "/v1/acp"
SCHEMES = {"http": "ws", "https": "wss"}


class UrlError(ValueError):
    """The URL cannot be the gateway's; the message says why."""


def acp_endpoint(url: str) -> str:
    """The WebSocket URL of the gateway at ``url`` (its ``/v1/acp``, unless given)."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise UrlError(f"the gateway URL is not a URL: {exc}") from None
    scheme = SCHEMES.get(parts.scheme.lower())
    if scheme is None:
        given = f"{parts.scheme}://" if parts.scheme else "no scheme"
        raise UrlError(
            f"the gateway URL must start with http:// or https:// (it has {given}); give the "
            "gateway's address, e.g. https://gateway.example:8080"
        )
    if not parts.hostname:
        raise UrlError("the gateway URL names no host")
    if parts.username or parts.password:
        raise UrlError(
            f"the URL must not carry credentials ({parts.scheme}://…@{parts.hostname}); "
            "the key goes in AGENT_GATEWAY_TOKEN"
        )
    path = parts.path.rstrip("/")
    if not path.endswith(PATH):
        path += PATH
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))
