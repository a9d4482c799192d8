"""The ``[acp]`` section of the configuration: the gateway as an Agent Client Protocol agent
(``/v1/acp``, docs/acp.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class AcpSettings(BaseModel):
    """What editors attached over ACP may do."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Serve ``/v1/acp``, the gateway as an ACP agent for editors (behind the same keys as
    every route)."""
    client_mcp_servers: Literal["refuse", "ignore"] = "refuse"
    """MCP servers a client names in ``session/new``: ``refuse`` the session (the client
    is told why), or ``ignore`` them (dropped, the client is told so). A ``stdio`` server,
    a command to run on the gateway's machine, is refused either way."""
    models: dict[str, list[str]] = {}
    """Provider name → models offered in a session's model option, besides the provider's
    default and the session's own (editors show them as a list)."""
