"""What the gateway asks the editor (``session/request_permission``, ``elicitation/create``):
each shown to the editor once, however many times the gateway asks it.

After a reconnect the gateway asks every approval and question still pending again, with the
same ``_meta.agentGateway.approvalId`` / ``questionId`` and a new request id on the new
connection. The editor may still be showing the first one: the new request is then folded into
it, and the editor's answer to the first goes to the gateway as the answer to the new one. An
answer the editor gave that never reached the gateway (the connection dropped first) answers
the gateway's next request for the same approval at once.

The editor sees request ids of the relay's own (``next_id``): ids of different connections
would collide, and the editor must never see two requests with one id.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass

from agent_gateway_acp import messages
from agent_gateway_acp.messages import Request, RequestId, Response

log = logging.getLogger(__name__)

Key = tuple[str, str]
"""``("approvalId", id)`` or ``("questionId", id)``: what the gateway asks, across connections."""

REMEMBERED = 256
"""How many answers (by approval or question) are kept for a gateway that asks again."""


@dataclass(kw_only=True)
class Ask:
    """One request the editor is being asked, as the gateway last asked it."""

    editor_id: int
    key: Key | None
    server_id: RequestId
    generation: int
    """The connection the gateway asked it on (``RelayCore.generation``)."""


@dataclass(frozen=True, slots=True)
class ToEditor:
    text: str


@dataclass(frozen=True, slots=True)
class ToGateway:
    text: str


def key_of(request: Request) -> Key | None:
    found = messages.gateway_meta(request.params)
    for name in ("approvalId", "questionId"):
        value = found.get(name)
        if isinstance(value, str) and value:
            return (name, value)
    return None


class Asks:
    """The gateway's requests the editor has not answered yet, and answers kept for a gateway
    that asks again."""

    def __init__(self) -> None:
        self._next_id = 0
        self._by_editor_id: dict[int, Ask] = {}
        self._by_key: dict[Key, Ask] = {}
        self._answers: OrderedDict[Key, Response] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_editor_id)

    def asked(self, request: Request, *, generation: int) -> ToEditor | ToGateway | None:
        """The gateway asks ``request`` on connection ``generation``: show it to the editor,
        answer it with the editor's earlier answer, or (already shown) nothing."""
        key = key_of(request)
        if key is not None:
            answered = self._answers.get(key)
            if answered is not None:
                log.info("the gateway asked %s %s again; sent the editor's answer", *key)
                return ToGateway(messages.answer_with(answered, request.id))
            shown = self._by_key.get(key)
            if shown is not None:
                shown.server_id = request.id
                shown.generation = generation
                log.info("the gateway asked %s %s again; the editor is already asked", *key)
                return None
        editor_id = self._next_id
        self._next_id += 1
        ask = Ask(editor_id=editor_id, key=key, server_id=request.id, generation=generation)
        self._by_editor_id[editor_id] = ask
        if key is not None:
            self._by_key[key] = ask
        return ToEditor(messages.encode({**request.message, "id": editor_id}))

    def owns(self, response: Response) -> bool:
        return isinstance(response.id, int) and response.id in self._by_editor_id

    def answered(self, response: Response, *, generation: int | None) -> ToGateway | None:
        """The editor answers: to the gateway when the request came on the live connection
        ``generation`` (None: no connection), else kept for when it is asked again."""
        assert isinstance(response.id, int)
        ask = self._by_editor_id.pop(response.id)
        if ask.key is not None:
            self._by_key.pop(ask.key, None)
            self._answers[ask.key] = response
            self._answers.move_to_end(ask.key)
            while len(self._answers) > REMEMBERED:
                self._answers.popitem(last=False)
        if generation is not None and ask.generation == generation:
            return ToGateway(messages.answer_with(response, ask.server_id))
        if ask.key is None:
            log.warning(
                "the editor answered a request of a lost connection to the gateway; dropped"
            )
        else:
            log.info("the editor answered %s %s; held until the gateway asks again", *ask.key)
        return None
