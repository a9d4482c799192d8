"""What ``serve`` says once it listens: where the console is, where the admin token is and
how to print it, which agents can run a turn (and, for each that cannot, why, in the words
of its health check), and where the documentation is.

On a terminal (text logs) it is one block for a person::

    Agent Gateway 0.1.0 is ready.
      Console  http://127.0.0.1:8765/console/ (sign in with the admin token)
      Token    in /home/me/.local/share/agent-gateway/token; print it with: agent-gateway token show
      Agents   claude_code  ready (2.1.3)
               codex        not ready: 'codex' was not found: run `make setup` ...
      Docs     README.md and docs/ in the source; agent-gateway --help; API: GET /openapi.json
    Stop it with Ctrl-C.

With JSON logs it is one log line (event ``server.ready``) with the same facts as fields. An
agent whose check takes longer than the gateway waits for it is shown as still being checked,
and gets a line of its own when its check ends (``late_line``; event ``agent.checked``).
Nothing here writes or probes anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from app import __version__

DOCS = "README.md and docs/ in the source; agent-gateway --help; API: GET /openapi.json"
"""Where the documentation is (the API's document needs the token, like every route)."""

TokenSource = Literal["generated", "file", "configured"]


@dataclass(frozen=True, kw_only=True)
class AgentState:
    """One provider as its health check found it."""

    name: str
    ready: bool | None
    """None: its check has not finished yet."""
    reason: str | None
    """Why it cannot run a turn, phrased as what to fix (its health check's reason, as is)."""
    version: str | None = None
    needs_login: bool = False
    """It runs but has no credential: the reason says how to give it one."""


@dataclass(frozen=True, kw_only=True)
class Banner:
    """The facts of a gateway that has just started listening."""

    url: str
    """The base URL this machine reaches the gateway on (``http://127.0.0.1:8765``)."""
    source: TokenSource
    """Where the admin token comes from."""
    token_file: str
    token_command: str
    """The command that prints the token (``agent-gateway token show``, with the same
    ``--config`` as ``serve`` when one was given)."""
    agents: tuple[AgentState, ...]
    token: str | None = None
    """The token itself: only when it was generated just now and stderr is a terminal."""
    version: str = __version__

    @property
    def console_url(self) -> str:
        return f"{self.url}/console/"

    @property
    def token_hint(self) -> str:
        """Where the token is and how to print it (never the token)."""
        if self.source == "configured":
            where = "server.token from the configuration (or GATEWAY_SERVER__TOKEN)"
        elif self.source == "generated":
            where = f"new, saved in {self.token_file}"
        else:
            where = f"in {self.token_file}"
        return f"{where}; print it with: {self.token_command}"

    def summary(self) -> str:
        """One line: the log message of ``server.ready``."""
        groups = {
            "agents ready": [a.name for a in self.agents if a.ready],
            "not ready": [a.name for a in self.agents if a.ready is False],
            "still being checked": [a.name for a in self.agents if a.ready is None],
        }
        agents = "; ".join(f"{k}: {', '.join(v)}" for k, v in groups.items() if v)
        return (
            f"Agent Gateway {self.version} ready on {self.url}; console {self.console_url}; "
            f"token {self.token_hint}; {agents or 'no agent configured'}"
        )

    def fields(self) -> dict[str, Any]:
        """The facts as log fields (``extra=``)."""
        return {
            "event": "server.ready",
            "version": self.version,
            "url": self.url,
            "console_url": self.console_url,
            "token_source": self.source,
            "token_file": None if self.source == "configured" else self.token_file,
            "token_command": self.token_command,
            "agents": {
                a.name: {
                    "ready": a.ready,
                    "needs_login": a.needs_login,
                    "reason": a.reason,
                    "version": a.version,
                }
                for a in self.agents
            },
            "docs": DOCS,
        }

    def text(self) -> str:
        """The block for a person, without a trailing newline."""
        lines = [
            f"Agent Gateway {self.version} is ready.",
            f"  Console  {self.console_url} (sign in with the admin token)",
        ]
        if self.token is not None:
            lines.append(f"  Token    {self.token}")
            lines.append(f"           ({self.token_hint})")
        else:
            lines.append(f"  Token    {self.token_hint}")
        width = max((len(a.name) for a in self.agents), default=0)
        for index, agent in enumerate(self.agents):
            label = "  Agents   " if index == 0 else " " * 11
            lines.append(f"{label}{agent.name.ljust(width)}  {_state(agent)}")
        if not self.agents:
            lines.append("  Agents   none configured")
        lines.append(f"  Docs     {DOCS}")
        lines.append("Stop it with Ctrl-C.")
        return "\n".join(lines)


def late_line(agent: AgentState) -> str:
    """The line for an agent whose check ended after the block was written."""
    return f"Agent {agent.name}: {_state(agent)}"


def _state(agent: AgentState) -> str:
    if agent.ready is None:
        return "still being checked (the console and GET /v1/providers show the result)"
    if agent.ready:
        return f"ready ({agent.version})" if agent.version else "ready"
    if agent.needs_login:
        return f"needs login: {agent.reason}" if agent.reason else "needs login"
    return f"not ready: {agent.reason}" if agent.reason else "not ready"
