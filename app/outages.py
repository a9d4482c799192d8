"""One log line when a dependency stops answering and one when it answers again, instead of a
warning (or a traceback) on every call that fails meanwhile.

    answering ──failed(why)──► failing      DEBUG (one failed call is not an outage yet)
    failing   ──answered()───► answering    DEBUG
    failing   ──failed(…)────► away         WARNING "<name> unreachable: <why>"   (once; the
                                            first failure's why, timed from it)
    away      ──failed(…)────► away         DEBUG, counted
    away      ──answered()───► answering    INFO "<name> reachable again after N s (M failed calls)"

A single failure between answers is not an outage: after a restart, each connection a client
pooled before it fails once on its first use, while the others answer.

A process has one Redis and one database, so each has one tracker for the whole process
(``REDIS``, ``DATABASE``): every call through ``app.cluster.redis.cluster_errors`` or
``app.store.db.storage_errors`` reports to it, whichever client or engine made the call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Outage:
    """Whether ``name`` answers, as the calls to it found; logs each change once."""

    def __init__(
        self,
        name: str,
        *,
        logger: logging.Logger = log,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._log = logger
        self._clock = clock
        self._since: float | None = None
        """When the first of the failed calls since the last answer failed."""
        self._announced = False
        self.reason: str | None = None
        """Why the first of the failed calls since the last answer failed."""
        self.failures = 0
        """Calls that failed since the last answer."""

    @property
    def down(self) -> bool:
        """An outage was announced and has not ended."""
        return self._announced

    def failed(self, why: str) -> bool:
        """A call found it unreachable; True when that made it an outage (the one line)."""
        self.failures += 1
        if self._since is None:
            self._since = self._clock()
            self.reason = why
            self.failures = 1
            self._log.debug("%s did not answer: %s", self.name, why)
            return False
        if self._announced:
            self._log.debug("%s still unreachable: %s", self.name, why)
            return False
        self._announced = True
        self._log.warning(
            "%s unreachable: %s",
            self.name,
            self.reason,
            extra={"event": "outage.began", "dependency": self.name},
        )
        return True

    def answered(self) -> None:
        """A call succeeded: ends an outage (logged once), else nothing."""
        since = self._since
        if since is None:
            return
        lasted = self._clock() - since
        if self._announced:
            self._log.info(
                "%s reachable again after %.1f s (%d failed calls)",
                self.name,
                lasted,
                self.failures,
                extra={
                    "event": "outage.ended",
                    "dependency": self.name,
                    "outage_s": round(lasted, 3),
                },
            )
        else:
            self._log.debug("%s answered again after one failed call", self.name)
        self._since = None
        self._announced = False
        self.reason = None
        self.failures = 0


REDIS = Outage("redis")
"""The replicas' Redis (``cluster.redis_url``)."""
DATABASE = Outage("database")
"""The PostgreSQL server (``storage.url``), while it cannot be reached."""
