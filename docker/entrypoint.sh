#!/usr/bin/env bash
# The container's entry point: prepare the agent user, its credentials and CLIs, migrate the
# database, then exec the command (CMD: `agent-gateway serve`) as the agent user.
#
# Started as root (the image's default), it
#   1. remaps the `agent` user to PUID/PGID when they are given and differ from its ids,
#   2. gives the agent its home volumes, its CLI prefix and the data directory (chown, skipped
#      when the top-level owner is already right), and the directories replicas share when
#      they are set elsewhere (GATEWAY_SANDBOX__HOMES_DIR, GATEWAY_SNAPSHOTS__DIR,
#      GATEWAY_WORKSPACES__WORKTREES_ROOT: made first, private, when missing) -- never the
#      workspace, which holds the user's own files,
#   3. and runs everything after that as the agent through setpriv.
# Started as any other user (compose `user:`), it skips 1 and 2 and runs as that user.
#
# Then, as the agent user:
#   - credentials from the environment go into the CLIs' own files and GATEWAY_TOKEN into the
#     token file (docker/credentials.py; secrets travel only in the environment and are
#     removed from it before anything else runs),
#   - CLAUDE_CODE_CLI_VERSION, CODEX_CLI_VERSION, OPENCODE_CLI_VERSION install that version
#     (or dist-tag) of the CLI over the pinned one,
#   - for `agent-gateway ... serve`: `agent-gateway ... migrate`, then exec the server.
#
# Paths follow the variables the image sets, so they can be pointed elsewhere: AGENT_USER,
# AGENT_HOME, AGENT_CLI_PREFIX, GATEWAY_STORAGE__DATA_DIR, CLAUDE_CONFIG_DIR, CODEX_HOME,
# XDG_CONFIG_HOME, XDG_DATA_HOME.
set -euo pipefail

say() { printf 'entrypoint: %s\n' "$*" >&2; }
die() {
  say "$*"
  exit 1
}

here="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
credentials_helper="$here/credentials.py"

agent_user="${AGENT_USER:-agent}"
agent_home="${AGENT_HOME:-/home/agent}"
cli_prefix="${AGENT_CLI_PREFIX:-$agent_home/.local/lib/agent-clis}"
data_dir="${GATEWAY_STORAGE__DATA_DIR:-/data}"
claude_dir="${CLAUDE_CONFIG_DIR:-$agent_home/.claude}"
codex_dir="${CODEX_HOME:-$agent_home/.codex}"
opencode_config="${XDG_CONFIG_HOME:-$agent_home/.config}/opencode"
opencode_data="${XDG_DATA_HOME:-$agent_home/.local/share}/opencode"
export HOME="$agent_home"

# The gateway's directories that may be set outside the data directory (replicas put them on
# a volume they share: docker-compose.replicas.yml).
shared_vars=(GATEWAY_SANDBOX__HOMES_DIR GATEWAY_SNAPSHOTS__DIR GATEWAY_WORKSPACES__WORKTREES_ROOT)

# The variables docker/credentials.py writes into files (its INJECTED); never passed on.
secret_vars=(ANTHROPIC_API_KEY ANTHROPIC_AUTH_TOKEN CLAUDE_CODE_OAUTH_TOKEN OPENAI_API_KEY
  OPENROUTER_API_KEY GATEWAY_TOKEN)

cli_overrides=(CLAUDE_CODE_CLI_VERSION=@anthropic-ai/claude-code CODEX_CLI_VERSION=@openai/codex
  OPENCODE_CLI_VERSION=opencode-ai)
# An exact version (1.2.3, 1.2.3-beta.1) or a dist-tag (latest, next); never a range, a URL
# or anything npm would read as an option.
version_shape='^(v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?|[A-Za-z][A-Za-z0-9._-]{0,63})$'

(($# > 0)) || set -- agent-gateway serve

# --- check the input before changing anything ----------------------------------------------

shared_dirs=()
for var in "${shared_vars[@]}"; do
  dir="${!var:-}"
  [[ -n "$dir" ]] || continue
  [[ "$dir" == /* ]] || die "$var=$(printf '%q' "$dir") must be an absolute path"
  shared_dirs+=("$dir")
done

for spec in "${cli_overrides[@]}"; do
  var="${spec%%=*}"
  version="${!var:-}"
  if [[ -n "$version" && ! "$version" =~ $version_shape ]]; then
    die "$var=$(printf '%q' "$version") is not a version (1.2.3, 1.2.3-beta.1) or an npm" \
      "dist-tag (latest, next); leave it empty to use the version pinned in the image"
  fi
done

# `agent-gateway [options] serve [options]`: migrate with the same options first.
serve_at=0
if [[ "$1" == agent-gateway ]]; then
  for ((i = 2; i <= $#; i++)); do
    if [[ "${!i}" == serve ]]; then
      serve_at=$i
      break
    fi
  done
fi

# --- as root: the agent's ids and what it owns ---------------------------------------------

as_root=0
[[ "$(id -u)" == 0 ]] && as_root=1

if ((as_root)); then
  for var in PUID PGID; do
    value="${!var:-}"
    if [[ -n "$value" && ! "$value" =~ ^[0-9]+$ ]]; then
      die "$var=$(printf '%q' "$value") is not a numeric id"
    fi
    if [[ "$value" == 0 ]]; then
      die "$var=0 would run the agents as root; give the ids of an ordinary user (id -u, id -g)"
    fi
  done
  gid="$(id -g "$agent_user")"
  if [[ -n "${PGID:-}" && "$PGID" != "$gid" ]]; then
    say "group $agent_user: gid $gid -> $PGID (PGID)"
    groupmod -o -g "$PGID" "$agent_user"
  fi
  uid="$(id -u "$agent_user")"
  if [[ -n "${PUID:-}" && "$PUID" != "$uid" ]]; then
    say "user $agent_user: uid $uid -> $PUID (PUID)"
    usermod -o -u "$PUID" "$agent_user"
  fi
  uid="$(id -u "$agent_user")"
  gid="$(id -g "$agent_user")"

  # own PATH [-R]: give PATH (and with -R all below it) to the agent unless it already has it.
  # A symlink is never followed: the agent could have planted it to get root to chown a
  # file elsewhere (chown -R does not follow links below PATH either).
  own() {
    [[ -e "$1" && ! -L "$1" ]] || return 0
    [[ "$(stat -c %u:%g "$1")" == "$uid:$gid" ]] && return 0
    if [[ "${2:-}" == -R ]]; then
      say "giving $1 to uid $uid:$gid"
      chown -R "$uid:$gid" "$1"
    else
      chown -h "$uid:$gid" "$1"
    fi
  }
  for dir in "$agent_home" "$agent_home/.config" "$agent_home/.local" \
    "$agent_home/.local/share" "$agent_home/.local/lib"; do
    own "$dir"
  done
  for dir in "${shared_dirs[@]}"; do
    # A fresh shared volume is root's: the directory is made here, private to the agent.
    if [[ ! -e "$dir" && ! -L "$dir" ]]; then
      mkdir -p "$dir"
      chmod 700 "$dir"
    fi
  done
  for dir in "$claude_dir" "$codex_dir" "$opencode_config" "$opencode_data" "$cli_prefix" \
    "$agent_home/.gemini" "$agent_home/.copilot" "$agent_home/.qwen" "$agent_home/.codebuddy" \
    "$data_dir" "${shared_dirs[@]}"; do
    own "$dir" -R
  done
  # The database and token files themselves too: an admin command run as root (`docker exec`
  # without `-u agent`) leaves root-owned files in a data directory the agent still owns.
  shopt -s nullglob dotglob
  for file in "$data_dir"/*; do
    own "$file"
  done
  shopt -u nullglob dotglob
  as_agent() { setpriv --reuid="$uid" --regid="$gid" --init-groups -- "$@"; }
else
  if [[ -n "${PUID:-}${PGID:-}" && "${PUID:-$(id -u)}:${PGID:-$(id -g)}" != "$(id -u):$(id -g)" ]]; then
    say "started as uid $(id -u):$(id -g) (compose user:), so PUID/PGID are ignored"
  fi
  if [[ ! -d "$data_dir" || ! -w "$data_dir" ]]; then
    die "the data directory $data_dir is missing or not writable by uid $(id -u); give it to" \
      "that user, or start the container as root with PUID/PGID instead of user:"
  fi
  as_agent() { "$@"; }
fi

# --- as the agent: credentials, CLI versions, migrations -----------------------------------

helper_args=()
((serve_at > 0)) && helper_args+=(--require-token)
as_agent python3 -I -S "$credentials_helper" "${helper_args[@]}" || exit $?
unset "${secret_vars[@]}"

for spec in "${cli_overrides[@]}"; do
  var="${spec%%=*}"
  package="${spec#*=}"
  version="${!var:-}"
  [[ -n "$version" ]] || continue
  say "installing $package@$version ($var) into $cli_prefix"
  if ! as_agent npm install --prefix "$cli_prefix" --no-save --no-audit --no-fund \
    --loglevel=error "$package@$version"; then
    die "could not install $package@$version (from $var): npm failed. Check that this" \
      "version exists (npm view $package versions) and that the container can reach the npm" \
      "registry, or unset $var to use the pinned version"
  fi
done

if ((serve_at > 0)); then
  as_agent "${@:1:serve_at-1}" migrate || die "agent-gateway migrate failed (see above)"
fi

if ((as_root)); then
  exec setpriv --reuid="$uid" --regid="$gid" --init-groups -- "$@"
fi
exec "$@"
