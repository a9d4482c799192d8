#!/usr/bin/env bash
# Runs pytest inside a private network namespace that has only loopback, so no test can reach
# beyond 127.0.0.1 even by mistake, and names the 25 slowest tests at the end (the suite is
# kept under 25 minutes). Needs root (CI and the dev machines run as root); elsewhere it says
# so and runs the tests in the normal namespace.
set -euo pipefail
cd "$(dirname "$0")/.."
# Spread over workers (pytest-xdist), one per core and at least two: most tests wait on a CLI,
# a socket or a timeout, but the real CLIs' start-up is CPU-bound, and the fault tests' short
# timeouts must not be eaten by more CLIs starting than there are cores. Tests sharing a wider
# fixture stay together (tests/conftest.py). TEST_WORKERS sets the count; `-n 0` after the
# arguments runs everything in one process.
workers=${TEST_WORKERS:-$(nproc)}
[ "$workers" -ge 2 ] || workers=2
pytest=(.venv/bin/pytest -p no:cacheprovider --durations=25 -n "$workers" --dist loadgroup "$@")
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null \
    && unshare -n true 2>/dev/null; then
  exec unshare -n -- sh -c 'ip link set lo up && exec "$@"' sh "${pytest[@]}"
fi
echo "run-tests: no private network namespace here (needs root, unshare and ip);" \
  "running in the current one" >&2
exec "${pytest[@]}"
