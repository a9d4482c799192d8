"""``agent-gateway-acp``: an Agent Gateway as a local Agent Client Protocol agent.

An editor starts this command and speaks ACP to it on stdio (one JSON-RPC message a line); it
relays every message to the gateway's ``/v1/acp`` WebSocket and back, and when the connection
drops it reconnects and picks the editor's sessions up where they were (docs/acp.md).
"""

__version__ = "0.1.0"
