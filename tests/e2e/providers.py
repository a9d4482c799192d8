"""How the end-to-end tests point each real CLI at the stub LLM (gateway configuration).

Each function returns the ``providers.<name>`` section for a gateway whose CLI must talk only
to ``stub`` on loopback, with its state (HOME, config dirs) under ``home``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.stub_llm import StubLLM


def claude_code(stub: StubLLM, home: Path) -> dict[str, Any]:
    return {
        "turn_idle_timeout_s": 60,
        "env": {
            "ANTHROPIC_BASE_URL": stub.base_url,
            "ANTHROPIC_API_KEY": "stub-key",
            "HOME": str(home),
            "CLAUDE_CODE_MAX_RETRIES": "0",
        },
    }


def codex(stub: StubLLM, home: Path) -> dict[str, Any]:
    raise NotImplementedError("filled in with the Codex provider")


def opencode(stub: StubLLM, home: Path) -> dict[str, Any]:
    raise NotImplementedError("filled in with the OpenCode provider")


CONFIGS = {"claude_code": claude_code, "codex": codex, "opencode": opencode}
