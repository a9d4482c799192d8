"""Debian's Chromium, as the browser tests and the coalescing benchmark launch it through
Playwright (``executable_path``; nothing is downloaded), with everything that would reach
beyond loopback turned off."""

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
