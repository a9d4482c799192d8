#!/usr/bin/env bash
# Installs, from Debian's packages, the system tools the setup and the tests need, and only
# those that are missing: each tool is checked on its own and, when absent, its package is
# asked for on a line of its own, so one package apt refuses never blocks the others and a
# tool that already works (npm bundled with a NodeSource Node.js, say) is never asked for.
#
#   scripts/system-packages.sh                 every tool below
#   scripts/system-packages.sh chromium        only the named tools
#   scripts/system-packages.sh --simulate      what a fresh machine would meet: every step
#                                              runs as `apt-get install -s`, as if its tool
#                                              were missing; nothing is installed
#
# Tools (checked in this order):
#   python-venv  python3 -m venv works          python3-venv
#   ip           network namespaces for tests   iproute2
#   make         the Makefile                   make
#   node         the agent CLIs                 nodejs
#   npm          the agent CLIs' installer      npm, unless the nodejs package provides it
#   chromium     the browser tests              chromium (without its recommends: they
#                                               pull in systemd, avahi and printing)
#   postgresql   the tests' private PostgreSQL  postgresql (server and psql), unless some
#                (tests/dbservers.py)           /usr/lib/postgresql/<major>/bin has initdb
#   redis-server the tests' private Redis       redis-server
#   bwrap        the agents' sandbox            bubblewrap (sandbox.mode = auto uses it
#                (app/process/sandbox.py)       wherever it can start a sandbox)
#   git          the workspace snapshots        git (the gateway refuses to start without
#                (app/process/snapshots/)       it while snapshots.enabled is on)
#
# The tests start their own PostgreSQL and Redis on free loopback ports and never use the
# ones these packages may set up and start on 5432 and 6379.
#
# Installing needs root; as another user it prints the apt-get line to run and exits 1.
set -euo pipefail

APT_GET=${APT_GET:-apt-get}
APT_CACHE=${APT_CACHE:-apt-cache}
PYTHON=${PYTHON:-python3}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
POSTGRESQL_LIB=${POSTGRESQL_LIB:-/usr/lib/postgresql}
ALL_TOOLS=(python-venv ip make node npm chromium postgresql redis-server bwrap git)

simulate=false
tools=()
for arg in "$@"; do
  case "$arg" in
    --simulate) simulate=true ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    python-venv | ip | make | node | npm | chromium | postgresql | redis-server | bwrap | git) tools+=("$arg") ;;
    *) echo "system-packages: unknown tool or option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#tools[@]} -gt 0 ] || tools=("${ALL_TOOLS[@]}")

wanted() {
  local tool
  for tool in "${tools[@]}"; do [ "$tool" = "$1" ] && return 0; done
  return 1
}

present() {
  case "$1" in
    python-venv) "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1 ;;
    chromium) [ -x "$CHROMIUM" ] ;;
    # The server, not only the client: postgresql-client-<major> fills the same bin directory
    # with psql and friends, but initdb comes with the server package alone.
    postgresql)
      local initdb
      for initdb in "$POSTGRESQL_LIB"/*/bin/initdb; do
        [ -x "$initdb" ] && return 0
      done
      return 1
      ;;
    *) command -v "$1" >/dev/null ;;
  esac
}

# npm is a package of its own only with Debian's nodejs; NodeSource's nodejs bundles npm,
# provides it and conflicts with Debian's npm package, so asking for it makes apt refuse.
nodejs_provides_npm() {
  local version
  version=$("$APT_CACHE" policy nodejs 2>/dev/null | awk '$1 == "Installed:" && $2 != "(none)" { print $2 }')
  [ -n "$version" ] \
    || version=$("$APT_CACHE" policy nodejs 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')
  [ -n "$version" ] && [ "$version" != "(none)" ] || return 1
  # Read whole before grep: `grep -q` stops at the first match, which with pipefail made a
  # long record's SIGPIPE to apt-cache fail the check at random.
  local record
  record=$("$APT_CACHE" show "nodejs=$version" 2>/dev/null) || return 1
  grep -Eq '^Provides:.*(^|[ ,])npm([ ,(]|$)' <<<"$record"
}

updated=false
failed=()

install() {
  local tool=$1
  shift
  local line=("$APT_GET" install -y -qq --no-install-recommends "$@")
  if $simulate; then
    local output
    if output=$("$APT_GET" install -s -y --no-install-recommends "$@" 2>&1); then
      echo "ok: $tool: apt-get install --no-install-recommends $*"
    else
      echo "REFUSED: $tool: apt-get install --no-install-recommends $*" >&2
      printf '%s\n' "$output" | grep -E '^(E:| [^ ].*:)' >&2 || printf '%s\n' "$output" >&2
      failed+=("$tool")
    fi
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "system-packages: $tool is missing; install it with:" \
      "sudo apt-get install --no-install-recommends $*" >&2
    failed+=("$tool")
    return 0
  fi
  if ! $updated; then
    "$APT_GET" update -qq
    updated=true
  fi
  echo "system-packages: installing $* (for $tool)"
  if ! DEBIAN_FRONTEND=noninteractive "${line[@]}" >/dev/null; then
    echo "system-packages: apt-get could not install $* (for $tool)" >&2
    failed+=("$tool")
  elif ! present "$tool"; then
    echo "system-packages: $* is installed but $tool still does not work" >&2
    failed+=("$tool")
  fi
}

for tool in "${ALL_TOOLS[@]}"; do
  wanted "$tool" || continue
  if ! $simulate && present "$tool"; then
    continue
  fi
  case "$tool" in
    python-venv) install "$tool" python3-venv ;;
    ip) install "$tool" iproute2 ;;
    make) install "$tool" make ;;
    bwrap) install "$tool" bubblewrap ;;
    git) install "$tool" git ;;
    node) install "$tool" nodejs ;;
    npm)
      if nodejs_provides_npm; then
        if $simulate; then
          echo "ok: npm: comes with the nodejs package (no package of its own)"
        else
          echo "system-packages: npm is missing although the installed nodejs package" \
            "provides it: reinstall nodejs (apt-get install --reinstall nodejs)" >&2
          failed+=(npm)
        fi
      else
        install "$tool" npm
      fi
      ;;
    chromium) install "$tool" chromium ;;
    postgresql) install "$tool" postgresql ;;
    redis-server) install "$tool" redis-server ;;
  esac
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "system-packages: not installed: ${failed[*]}" >&2
  exit 1
fi
