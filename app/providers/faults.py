"""Model-API failures in the shared taxonomy, from an HTTP status or from an error's wording.

The last resort of every provider's classifier once its CLI's own structured fields say nothing
more (OpenCode's session errors, the ACP agents' error texts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from app.events import FailureKind

_OVERLOADED_TEXT = re.compile(r"overloaded", re.IGNORECASE)
_RATE_LIMIT_TEXT = re.compile(r"rate.?limit|too many requests|\b429\b", re.IGNORECASE)
_USAGE_LIMIT_TEXT = re.compile(r"quota|usage limit|credit balance|billing", re.IGNORECASE)
_SERVER_TEXT = re.compile(
    r"internal server error|bad gateway|service unavailable|gateway time-?out|\b5\d\d\b",
    re.IGNORECASE,
)
_NETWORK_TEXT = re.compile(
    r"connection|network|econn|enotfound|eai_again|socket|fetch failed|timed? ?out|"
    r"unable to connect",
    re.IGNORECASE,
)
# OpenCode's UnknownError wraps its own exceptions: "Model not found: nope/zzz. Did you mean …"
# (1.18.33, obs), ProviderModelNotFoundError, ProviderInitError.
_CONFIG_TEXT = re.compile(r"model not found|ProviderModelNotFound|ProviderInitError", re.IGNORECASE)


STATUS_KINDS: Mapping[int, FailureKind] = {
    429: "rate_limited",
    529: "overloaded",
    402: "usage_limit",
    401: "auth",
    403: "auth",
    408: "network",
    400: "invalid_request",
    404: "invalid_request",
    413: "invalid_request",
    422: "invalid_request",
}
"""The one status table every provider's classifier reads; any other 5xx is ``server_error``."""


def kind_for_status(
    status: int, *, dialect: Mapping[int, FailureKind] | None = None
) -> FailureKind | None:
    """Classify a model API's HTTP status, when it says enough on its own.

    ``dialect``: statuses a CLI is known to use in its own sense (Codex's 499 for a cut
    connection), read before the shared table.
    """
    if dialect is not None and status in dialect:
        return dialect[status]
    kind = STATUS_KINDS.get(status)
    if kind is not None:
        return kind
    if 500 <= status <= 599:
        return "server_error"
    return None


def kind_for_text(text: str) -> FailureKind:
    """Classify a message by its wording; the last resort for every path."""
    if _OVERLOADED_TEXT.search(text):
        return "overloaded"
    if _RATE_LIMIT_TEXT.search(text):
        return "rate_limited"
    if _USAGE_LIMIT_TEXT.search(text):
        return "usage_limit"
    if _SERVER_TEXT.search(text):
        return "server_error"
    if _CONFIG_TEXT.search(text):
        return "invalid_request"
    if _NETWORK_TEXT.search(text):
        return "network"
    return "unknown"
