"""Tool output as events carry it: text, capped at one size for every provider."""

from __future__ import annotations

MAX_TOOL_OUTPUT_BYTES = 64 * 1024
"""Tool output longer than this (UTF-8) is cut, with a marker saying how much was dropped."""


def tool_output(content: object) -> str | None:
    """The text of a tool_result's ``content`` (a string or text blocks), capped."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        texts = [
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
        if not texts:
            return None
        text = "\n".join(texts)
    else:
        return None
    return _cap(text)


def _cap(text: str) -> str:
    if len(text) * 4 <= MAX_TOOL_OUTPUT_BYTES:  # cheap exit: at most 4 bytes per character
        return text
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= MAX_TOOL_OUTPUT_BYTES:
        return text
    marker = f"\n[… output truncated: {{}} of {len(data)} bytes omitted]"
    # The marker's "{}" (2 characters) becomes the omitted count: leave room for 10 digits.
    keep = MAX_TOOL_OUTPUT_BYTES - len(marker.encode()) - 8
    # "ignore" drops a character cut in half at the boundary.
    return data[:keep].decode("utf-8", errors="ignore") + marker.format(len(data) - keep)
