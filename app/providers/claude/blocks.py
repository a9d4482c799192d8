"""One message id per text or thinking block, across its deltas and its completion.

With ``--include-partial-messages`` a block streams as ``content_block_*`` events keyed by
``api_message_id`` + ``index``; the CLI then repeats the finished block on an ``assistant``
line that carries the message id but no index (2.1.330). Each such block is paired with the
earliest streamed, not yet completed block of the same kind in that message, so
``MessageCompleted`` reuses the id of its deltas. A block that never streamed gets its
position in the message (the CLI writes one block per ``assistant`` line, in order).

The CLI finishes one API message before it starts the next, so when another message id
appears, the blocks still streaming in earlier messages were abandoned: a stream cut that the
CLI re-asks without streaming leaves the cut answer's deltas and then prints the answer under
a new id. ``enter`` completes those blocks with what streamed, before anything of the new
message, so that every streamed block ends in order with exactly the text its deltas carried.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from app.events import MessageCompleted, MessageDelta, ReasoningCompleted, ReasoningDelta

__all__ = ["BlockKind", "ContentBlocks"]

BlockKind = Literal["text", "thinking"]
ContentItem = MessageDelta | MessageCompleted | ReasoningDelta | ReasoningCompleted


@dataclass(slots=True)
class _Block:
    index: int
    kind: BlockKind
    parts: list[str] = field(default_factory=list)
    """Streamed text, kept only until the block completes."""
    completed: bool = False


@dataclass(slots=True)
class _Message:
    streamed: list[_Block] = field(default_factory=list)
    assistant_blocks: int = 0
    """Blocks seen on ``assistant`` lines: the API index of the next one."""

    def block(self, index: int, kind: BlockKind) -> _Block:
        for block in self.streamed:
            if block.index == index:
                return block
        block = _Block(index=index, kind=kind)
        self.streamed.append(block)
        return block

    def claim(self, kind: BlockKind) -> _Block | None:
        for block in self.streamed:
            if block.kind == kind and not block.completed:
                block.completed = True
                block.parts.clear()
                return block
        return None


class ContentBlocks:
    """Tracks one turn's text and thinking blocks; ``flush`` at the end of the turn."""

    def __init__(self) -> None:
        self._messages: dict[str, _Message] = {}

    def enter(self, message_id: str) -> list[ContentItem]:
        """Note that ``message_id`` is being printed; complete blocks other messages abandoned."""
        if message_id in self._messages:
            return []
        return self._complete_streaming()

    def started(self, message_id: str, index: int, kind: BlockKind) -> None:
        """Record a ``content_block_start`` of a text or thinking block."""
        self._message(message_id).block(index, kind)

    def delta(self, message_id: str, index: int, kind: BlockKind, text: str) -> list[ContentItem]:
        """Return the delta item for streamed text (none for an empty chunk)."""
        self._message(message_id).block(index, kind).parts.append(text)
        if not text:
            return []
        item_id = f"{message_id}:{index}"
        if kind == "text":
            return [MessageDelta(message_id=item_id, text=text)]
        return [ReasoningDelta(message_id=item_id, text=text)]

    def assistant_block(
        self, message_id: str, kind: BlockKind | None, text: str
    ) -> list[ContentItem]:
        """Account for one block of an ``assistant`` line (``kind`` None: not text/thinking).

        Returns the completion for a streamed block; for one that never streamed (partial
        messages off), a delta with the whole text and then the completion, so that clients
        rendering only deltas see it too.
        """
        message = self._message(message_id)
        position = message.assistant_blocks
        message.assistant_blocks += 1
        if kind is None:
            return []
        streamed = message.claim(kind)
        if streamed is not None:
            return [_completion(kind, f"{message_id}:{streamed.index}", text)]
        if not text:
            return []
        item_id = f"{message_id}:{position}"
        delta: ContentItem = (
            MessageDelta(message_id=item_id, text=text)
            if kind == "text"
            else ReasoningDelta(message_id=item_id, text=text)
        )
        return [delta, _completion(kind, item_id, text)]

    def flush(self) -> list[ContentItem]:
        """Complete blocks that streamed but never got their ``assistant`` line, and reset.

        An interrupt mid-stream abandons them (``message_stop.abandoned_blocks``); a
        completion with the text streamed so far closes what clients already show.
        """
        items = self._complete_streaming()
        self._messages.clear()
        return items

    def _complete_streaming(self) -> list[ContentItem]:
        items: list[ContentItem] = []
        for message_id, message in self._messages.items():
            for block in message.streamed:
                if not block.completed and block.parts:
                    item_id = f"{message_id}:{block.index}"
                    items.append(_completion(block.kind, item_id, "".join(block.parts)))
                    block.completed = True
                    block.parts.clear()
        return items

    def _message(self, message_id: str) -> _Message:
        message = self._messages.get(message_id)  # one lookup per delta, no allocation
        if message is None:
            message = self._messages[message_id] = _Message()
        return message


def _completion(kind: BlockKind, item_id: str, text: str) -> ContentItem:
    if kind == "text":
        return MessageCompleted(message_id=item_id, text=text)
    return ReasoningCompleted(message_id=item_id, text=text)
