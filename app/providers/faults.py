"""Model-API failures in the shared taxonomy, from an HTTP status or from an error's wording.

The last resort of every provider's classifier once its CLI's own structured fields say nothing
more (OpenCode's session errors, the ACP agents' error texts).
"""

from __future__ import annotations

import re

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


def kind_for_status(status: int) -> FailureKind | None:
    """Classify a model API's HTTP status, when it says enough on its own."""
    if status == 429:
        return "rate_limited"
    if status == 529:
        return "overloaded"
    if status == 402:
        return "usage_limit"
    if status in (401, 403):
        return "auth"
    if status == 408:
        return "network"
    if status in (400, 404, 413, 422):
        return "invalid_request"
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
