"""How a CLI process ended, in words every provider's failure messages share."""

from __future__ import annotations

import signal
from typing import assert_never

from app.events import FailureKind, TurnError
from app.process.childspec import LimitExceeded, LimitReason
from app.process.managed import SpawnError


def how_it_ended(returncode: int, *, suffix: str = "") -> str:
    """``was killed by SIGKILL`` / ``exited with code 3``, plus ``suffix``.

    ``returncode`` follows ``asyncio.subprocess``: negative for the signal that ended it.
    """
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}{suffix}"
    return f"exited with code {returncode}{suffix}"


_LIMIT_SETTINGS: dict[LimitReason, str] = {
    "output_limit": "limits.max_turn_output_bytes",
    "line_too_long": "limits.max_line_bytes",
    "memory_limit": "limits.max_process_rss_bytes",
    "process_limit": "limits.max_process_count",
}


def _mib(n: int) -> str:
    return f"{n / 1024**2:.1f} MiB"


def limit_error(exceeded: LimitExceeded, *, cli: str, provider: str) -> TurnError:
    """The ``resource_limit`` failure of a CLI the gateway killed for breaking a limit.

    Never retryable: another attempt would break it again. The message names the setting.
    """
    limit, observed = exceeded.limit, exceeded.observed
    match exceeded.reason:
        case "output_limit":
            what = f"printed more than {limit} bytes in one turn"
        case "line_too_long":
            what = f"printed a line longer than {limit} bytes"
        case "memory_limit":
            what = f"used {_mib(observed)} of memory (its whole process tree), over {_mib(limit)}"
        case "process_limit":
            what = f"ran {observed} processes (its whole process tree), over {limit}"
        case _:
            assert_never(exceeded.reason)
    setting = _LIMIT_SETTINGS[exceeded.reason]
    return TurnError(
        kind="resource_limit",
        reason=exceeded.reason,
        message=f"{cli} {what} and was stopped; raise {setting} if this is expected.",
        retryable=False,
        provider=provider,
    )


def spawn_error(exc: SpawnError, *, cli: str, provider: str) -> TurnError:
    """Why a CLI could not be started, with what to fix.

    A missing or non-executable CLI is ``cli_missing`` (``reason`` says which); a workspace
    that is no longer a directory is ``invalid_request`` (``bad_cwd``), and one that no
    longer leads to its own directory inside a root is ``workspace_error``'s; anything else
    (out of memory or processes) is ``cli_crashed``, which a later attempt may get past.
    """
    argv0 = exc.argv0
    match exc.kind:
        case "cwd_rejected":
            return workspace_error(exc.detail, cli=cli, provider=provider)
        case "cli_missing":
            kind: FailureKind = "cli_missing"
            message = (
                f"cannot start {cli}: {argv0} was not found; install it or set "
                f"providers.{provider}.executable"
            )
        case "permission_denied":
            kind = "cli_missing"
            message = (
                f"cannot start {cli}: {argv0} is not executable (permission denied); "
                f"make it executable or set providers.{provider}.executable"
            )
        case "bad_cwd":
            kind = "invalid_request"
            message = (
                f"cannot start {cli}: the session's workspace is no longer a directory "
                f"({exc.detail}); create a new session on an existing workspace"
            )
        case "spawn_failed":
            kind = "cli_crashed"
            message = f"cannot start {cli}: {exc.detail}"
        case _:
            assert_never(exc.kind)
    return TurnError(
        kind=kind,
        reason=exc.kind,
        message=message,
        retryable=kind == "cli_crashed",
        provider=provider,
    )


def workspace_error(detail: str, *, cli: str, provider: str) -> TurnError:
    """A session's workspace no longer is the directory it was created on, inside a root.

    ``invalid_request`` with reason ``workspace_rejected``, never retryable: the CLI was not
    started in it or pointed at it, and another attempt would find the same.
    """
    return TurnError(
        kind="invalid_request",
        reason="workspace_rejected",
        message=(
            f"{cli} was not run: the session's workspace no longer resolves to the directory "
            f"it was created on inside a configured root ({detail}); restore the directory "
            "or create a new session"
        ),
        retryable=False,
        provider=provider,
    )
