"""``python -m agent_gateway_acp``: the same as the ``agent-gateway-acp`` command."""

from agent_gateway_acp.cli import main

raise SystemExit(main())
