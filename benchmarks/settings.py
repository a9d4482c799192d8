"""The run's configuration, handed to every benchmark."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunConfig:
    quick: bool = False
    shared: dict[str, Any] = field(default_factory=dict)
    """Numbers one benchmark measured that a later one may reuse (e.g. the floor's rate)."""

    def pick(self, *, quick: int, full: int) -> int:
        return quick if self.quick else full

    def timeout(self, events: int) -> float:
        """How long a relay of ``events`` may take: generous, at 100 events/s or better."""
        return 30.0 + events / 100
