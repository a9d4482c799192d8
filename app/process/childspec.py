"""What a child runs and within which bounds: its spec, its environment and its limits.

Pure values and a pure environment builder; ``app/process/runner.py`` spawns from them and the
watchdog enforces the limits it cannot see from the pipes (memory, process count).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.process.sandbox import Confinement

LimitReason = Literal["output_limit", "line_too_long", "memory_limit", "process_limit"]

BASE_ALLOWED: frozenset[str] = frozenset(
    {
        *("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR"),
        *("LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES"),
        *("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"),
        *("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS"),
        *("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"),
    }
)
"""Environment names every child may inherit; credentials must be named per provider."""


@dataclass(frozen=True, kw_only=True)
class LimitExceeded:
    """Which limit a child broke: ``observed`` against ``limit`` (bytes or processes)."""

    reason: LimitReason
    limit: int
    observed: int


@dataclass(frozen=True, kw_only=True)
class ProcessLimits:
    """Bounds the runner applies to every child (``limits.*`` in the gateway's settings)."""

    max_line_bytes: int = 16 * 1024 * 1024
    max_rss_bytes: int | None = None
    """Resident memory of the child's whole tree; checked by the watchdog."""
    max_processes: int | None = None
    """Processes in the child's whole tree; checked by the watchdog."""


@dataclass(frozen=True, kw_only=True)
class ProcessSpec:
    """What to run: ``argv`` is executed directly (never through a shell) with ``env``.

    ``max_line_bytes`` None means the runner's ``ProcessLimits.max_line_bytes``.
    """

    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str]
    max_line_bytes: int | None = None
    stderr_tail_bytes: int = 16 * 1024
    label: str = "unknown"
    """Who the child works for (a provider name), in log lines and metrics."""
    confine_to: tuple[Path, ...] | None = None
    """Roots ``cwd`` must lie in. Then ``cwd`` must be a real path: ``spawn`` opens it without
    following symlinks (``workspaces.open_confined``) and starts the child in the directory it
    opened, or refuses with ``cwd_rejected`` (``bad_cwd`` if it is gone)."""
    sandbox: Confinement | None = None
    """Run inside this bubblewrap sandbox (app/process/sandbox.py); its workspace is bound
    from the directory the runner opened for ``cwd``."""

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("argv must name an executable")
        if (self.max_line_bytes is not None and self.max_line_bytes < 1) or (
            self.stderr_tail_bytes < 0
        ):
            raise ValueError("max_line_bytes must be positive and stderr_tail_bytes non-negative")


def child_environment(
    parent: Mapping[str, str], *, passthrough: Iterable[str], overlay: Mapping[str, str]
) -> dict[str, str]:
    """Return ``BASE_ALLOWED`` and ``passthrough`` names found in ``parent``, then ``overlay``."""
    allowed = BASE_ALLOWED.union(passthrough)
    env = {name: value for name, value in parent.items() if name in allowed}
    env.update(overlay)
    return env
