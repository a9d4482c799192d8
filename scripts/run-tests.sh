#!/usr/bin/env bash
# Runs pytest inside a private network namespace that has only loopback, so no test can reach
# beyond 127.0.0.1 even by mistake, and names the 25 slowest tests at the end (the suite is
# meant to stay under 25 minutes). Needs root (CI and the dev machines run as root); elsewhere
# it says so and runs the tests in the normal namespace.
set -euo pipefail
cd "$(dirname "$0")/.."
# TEST_WORKERS=N spreads the tests over N pytest-xdist workers; tests sharing a wider fixture
# stay together (tests/conftest.py). Not the default yet: a gateway a test starts is given a
# port that was free a moment before, and another worker's gateway can take it first.
parallel=()
if [ -n "${TEST_WORKERS:-}" ]; then
  parallel=(-n "$TEST_WORKERS" --dist loadgroup)
fi
pytest=(.venv/bin/pytest -p no:cacheprovider --durations=25 "${parallel[@]}" "$@")
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null \
    && unshare -n true 2>/dev/null; then
  exec unshare -n -- sh -c 'ip link set lo up && exec "$@"' sh "${pytest[@]}"
fi
echo "run-tests: no private network namespace here (needs root, unshare and ip);" \
  "running in the current one" >&2
exec "${pytest[@]}"
