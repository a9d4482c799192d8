"""What the gateway did during a turn (a retry, a wait on a usage limit, a switch of agent, a
warning), told to an ACP client as one plain sentence (pure).

ACP has no update for these, so the client shows them as the agent's thoughts; the event
itself travels whole in the update's ``_meta`` for clients that read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from app.events import ProviderSwitched, RetryScheduled, Warning

__all__ = ["MAX_MESSAGE_CHARS", "notice"]

MAX_MESSAGE_CHARS = 300
"""A failure's or warning's message longer than this (a stderr tail) is cut."""

_AFTER: Mapping[str, str] = {
    "rate_limited": "rate limiting",
    "overloaded": "an overloaded service",
    "server_error": "a server error",
    "network": "a network error",
    "idle_timeout": "no output for too long",
    "auth": "an authentication failure",
    "invalid_request": "an invalid request",
    "context_lost": "the conversation was lost",
    "cli_missing": "the agent's CLI is missing",
    "cli_crashed": "the agent's CLI crashed",
    "interrupted": "an interrupt",
    "usage_limit": "a usage limit",
    "agent_error": "an agent error",
    "resource_limit": "a resource limit",
    "unknown": "an unknown error",
}
"""Each failure kind (``FailureKind``) as the end of "… after …"."""


def notice(data: RetryScheduled | ProviderSwitched | Warning, *, at: datetime) -> str:
    """The sentence that tells what ``data`` (an event of time ``at``) says happened."""
    match data:
        case RetryScheduled(kind="usage_limit", resume_at=datetime() as resume_at):
            return f"Waiting for the usage limit to reset at {_clock(resume_at, at)}."
        case RetryScheduled():
            subject = "Retrying" if data.source == "gateway" else "The agent is retrying"
            when = f" {_seconds(data.delay_s)}" if data.delay_s is not None else ""
            of = f" of {data.max_attempts}" if data.max_attempts is not None else ""
            return _sentence(
                f"{subject}{when} (attempt {data.attempt}{of}) after {_after(data.kind)}",
                data.message,
            )
        case ProviderSwitched():
            return _sentence(
                f"Switched from {data.from_provider} to {data.to_provider} "
                f"after {_after(data.reason)}",
                data.message,
            )
        case Warning():
            return _sentence("Warning", data.message)


def _after(kind: str) -> str:
    return _AFTER.get(kind, kind.replace("_", " "))


def _sentence(lead: str, message: str | None) -> str:
    text = _cut(message) if message else ""
    if not text:
        return f"{lead}."
    return f"{lead}: {text}" + ("" if text[-1] in ".!?…" else ".")


def _cut(message: str) -> str:
    line = " ".join(message.split())
    if len(line) > MAX_MESSAGE_CHARS:
        return line[: MAX_MESSAGE_CHARS - 1].rstrip() + "…"
    return line


def _seconds(delay: float) -> str:
    if delay >= 120:
        return f"in {round(delay / 60):g} min"
    if delay < 0.05:
        return "now"
    return f"in {round(delay, 1):g} s"


def _clock(moment: datetime, now: datetime) -> str:
    """``moment`` in UTC: the time of day, with the date when it is not ``now``'s day."""
    moment = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    now = now.astimezone(UTC) if now.tzinfo else now.replace(tzinfo=UTC)
    if moment.date() == now.date():
        return f"{moment:%H:%M} UTC"
    return f"{moment:%Y-%m-%d %H:%M} UTC"
