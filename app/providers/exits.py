"""How a CLI process ended, in words every provider's failure messages share."""

from __future__ import annotations

import signal


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
