"""The ``limits`` section of the configuration: bounds that keep one client, session or CLI
from starving the others.

Two of them are global caps shared by every key: event subscribers
(``limits.max_subscribers``) and per-session CLI processes (``limits.max_live_processes``).
Of each, one key may hold at most ``max_key_share`` (when the gateway has more than one key),
and the last ``admin_reserve_share`` is kept for admin keys (app/runtime/shares.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

EnforcementMode = Literal["auto", "cgroup", "rlimit", "watchdog"]


class LimitsSettings(BaseModel):
    """Bounds that keep one client, session or CLI from starving the others."""

    model_config = ConfigDict(extra="forbid")

    max_live_processes: int = Field(default=64, ge=1)
    """Live per-session CLI processes; at the cap the longest-idle is closed, else 503
    ``at_capacity``."""
    max_open_sessions_per_key: int = Field(default=500, ge=1)
    """Sessions a key may hold open (not closed or failed); beyond this creation gets 429."""
    session_creates_per_minute: int = Field(default=60, ge=1)
    """Session creations (and runs) per key per minute; beyond this 429 with Retry-After."""
    auth_failures_per_minute: int = Field(default=30, ge=1)
    """Failed authentications per client address per minute before it gets 429."""
    max_subscribers_per_session: int = Field(default=64, ge=1)
    """SSE and WebSocket subscribers of one session; beyond this 429."""
    max_subscribers: int = Field(default=4096, ge=1)
    """SSE and WebSocket subscribers in all; beyond this 503."""
    max_key_share: float = Field(default=0.5, gt=0, le=1)
    """The part of ``max_subscribers`` and of ``max_live_processes`` one key may hold
    (rounded down, at least one), admin keys included; beyond it that key gets 429
    ``key_share_exceeded`` while other keys go on. Applies once the gateway has more than
    one key (``server.api_keys``); the admin key alone holds the whole caps."""
    admin_reserve_share: float = Field(default=0.05, ge=0, le=0.5)
    """The last part of ``max_subscribers`` and of ``max_live_processes`` (rounded down)
    that only admin keys may take: when the other keys together fill the rest, they get 503
    ``at_capacity`` and an operator can still watch and act."""
    subscriber_max_lag_events: int = Field(default=10_000, ge=100)
    """A subscriber this many events behind the newest is sent ``evicted`` and closed."""
    max_line_bytes: int = Field(default=16 * 1024 * 1024, ge=64 * 1024)
    """Longest line a CLI may print; a longer one fails the turn as ``resource_limit``
    (reason ``line_too_long``)."""
    max_turn_output_bytes: int = Field(default=256 * 1024 * 1024, ge=64 * 1024)
    """Bytes a per-session CLI may print in one attempt, and bytes of events one turn may
    record (``resource_limit``, reason ``output_limit``)."""
    max_process_rss_bytes: int = Field(default=8 * 1024**3, ge=16 * 1024**2)
    """Resident memory of one CLI's whole process tree (summed per process) before it is
    killed (``memory_limit``)."""
    max_process_count: int = Field(default=512, ge=2)
    """Processes in one CLI's tree (itself, its tools, their children) before it is killed
    (``process_limit``)."""
    watch_interval_s: float = Field(default=1.0, gt=0)
    """How often the memory and process-count limits are checked (sampled from ``/proc``)."""
    enforcement: EnforcementMode = "auto"
    """How ``max_process_rss_bytes`` and ``max_process_count`` are enforced
    (app/process/bounds.py). ``cgroup``: by the kernel, in a cgroup v2 group per CLI (the
    gateway must be able to make groups with the ``memory`` and ``pids`` controllers, else it
    refuses to start): ``<own cgroup>/agent-gateway/<tag>`` with ``memory.max``,
    ``memory.swap.max`` 0, ``memory.oom.group`` 1 and ``pids.max`` (which counts threads too).
    ``rlimit``: memory by ``RLIMIT_DATA`` on every process of the tree (a CLI that exits with a
    failure after reaching 90 % of it is reported as ``memory_limit``), the process count by
    the watchdog, since ``RLIMIT_NPROC`` counts every process of the user on the host.
    ``watchdog``: both sampled from ``/proc`` every ``watch_interval_s`` (a fast allocation
    or fork bomb can outrun it). ``auto`` (the default): ``cgroup`` where it works, else
    ``rlimit``; ``doctor`` and ``/readyz`` say which and why."""
    max_metadata_bytes: int = Field(default=64 * 1024, ge=1024, le=1024 * 1024)
    """A session's ``metadata`` as compact UTF-8 JSON; a larger one is refused (422)."""
    max_page_bytes: int = Field(default=4 * 1024 * 1024, ge=64 * 1024)
    """A list page's items (their stored size); a page ends early there (at least one item)."""
