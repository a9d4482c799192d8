"""The turns ACP prompts started, by the ``promptId`` their client gave them.

A client that lost its connection between sending a ``session/prompt`` and hearing of its
turn (the stdio relay, agent-gateway-acp) sends it again with the same
``_meta.agentGateway.promptId``: the gateway then starts no second turn, and answers when
the first one ends. Kept per gateway process (the newest ``size``): a prompt sent again to
another replica is a new one.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from app.api.acp.options import invalid_params

MAX_PROMPT_ID = 128


class PromptBook:
    """(session, promptId) → the turn it started."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._turns: OrderedDict[tuple[str, str], asyncio.Future[str | None]] = OrderedDict()

    async def turn_for(
        self, session_id: str, prompt_id: str, start: Callable[[], Awaitable[str]]
    ) -> tuple[str, bool]:
        """The turn of ``prompt_id`` in the session, and whether it was started now (by
        ``start``) rather than by an earlier request with the same id."""
        key = (session_id, prompt_id)
        known = self._turns.get(key)
        if known is not None:
            turn_id = await asyncio.shield(known)
            if turn_id is None:
                raise invalid_params(
                    {"detail": f"the prompt {prompt_id!r} was refused; send it again"}
                )
            return turn_id, False
        started: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._turns[key] = started
        while len(self._turns) > self._size:
            self._turns.popitem(last=False)
        try:
            turn_id = await start()
        except BaseException:
            self._turns.pop(key, None)
            started.set_result(None)
            raise
        started.set_result(turn_id)
        return turn_id, True


def prompt_id_of(meta: dict[str, object]) -> str | None:
    """``_meta.agentGateway.promptId``, checked."""
    prompt_id = meta.get("promptId")
    if prompt_id is None:
        return None
    if not isinstance(prompt_id, str) or not 0 < len(prompt_id) <= MAX_PROMPT_ID:
        raise invalid_params(
            {"detail": f"_meta.agentGateway.promptId: a string of 1 to {MAX_PROMPT_ID} characters"}
        )
    return prompt_id
