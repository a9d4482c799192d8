"""The hand-off: what a new agent is told when a session moves to it mid-conversation.

A session that fails over (app/runtime/failover.py) starts a fresh thread on another
provider, which has never seen the conversation. Its first prompt is built here, from the
event log alone (pure, no I/O)::

    preamble (which agent stopped, and why)
    ## Turn 1 … ## Turn n      each: the user's prompt, the tools the agent ran and how they
                               ended, the files it changed, its final text
    ## Now                     what the failed turn had done before the failure, then its
                               prompt, which the new agent answers

Bounded by ``max_chars``: the newest turns are kept whole while they fit; older ones are
summarized by truncation (their prompt and final text cut short, their tool list dropped), and
the oldest are left out (counted in the preamble) once even that does not fit. The failed
turn's prompt is always whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

SUMMARY_CHARS = 400
"""What an older turn's prompt and final text are cut to when the whole turn does not fit."""
INPUT_CHARS = 160
"""What a tool call's input is cut to in the tool list."""
_PATH_KEYS = ("file_path", "filePath", "path", "notebook_path")


@dataclass(frozen=True, kw_only=True)
class Handoff:
    """The new agent's first prompt, and how much of the conversation it carries."""

    prompt: str
    turns: int
    """Earlier turns included (whole or summarized)."""
    chars: int
    """Length of ``prompt``."""


@dataclass(kw_only=True)
class _Turn:
    prompt: str = ""
    tools: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    text: str = ""
    outcome: str = ""
    _started: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    def whole(self, number: int) -> str:
        lines = [f"## Turn {number}", f"User: {self.prompt}"]
        lines += [f"Agent ran: {tool}" for tool in self.tools]
        if self.files:
            lines.append(f"Files changed: {', '.join(dict.fromkeys(self.files))}")
        if self.text:
            lines.append(f"Agent: {self.text}")
        if self.outcome:
            lines.append(f"({self.outcome})")
        return "\n".join(lines)

    def summary(self, number: int) -> str:
        lines = [f"## Turn {number} (summarized)", f"User: {_cut(self.prompt, SUMMARY_CHARS)}"]
        if self.tools:
            lines.append(f"Agent ran {len(self.tools)} tool call(s).")
        if self.files:
            lines.append(f"Files changed: {', '.join(dict.fromkeys(self.files))}")
        if self.text:
            lines.append(f"Agent: {_cut(self.text, SUMMARY_CHARS)}")
        return "\n".join(lines)


def build_handoff(
    events: Iterable[Mapping[str, Any]],
    *,
    current_turn_id: str,
    prompt: str,
    from_provider: str,
    reason: str,
    max_chars: int,
) -> Handoff:
    """The hand-off prompt for the turn ``current_turn_id`` (whose prompt is ``prompt``),
    from the session's event envelopes (``{type, turn_id, data}``) in order."""
    turns, current = _turns(events, current_turn_id)
    now = ["## Now"]
    if current is not None and (current.tools or current.text):
        now.append("Before it stopped, the previous agent had, in this request:")
        now += [f"- ran {tool}" for tool in current.tools]
        if current.files:
            now.append(f"- changed {', '.join(dict.fromkeys(current.files))}")
        if current.text:
            now.append(f"- said: {_cut(current.text, SUMMARY_CHARS)}")
    now.append(f"User: {prompt}")
    tail = "\n".join(now)
    kept: list[str] = []  # newest first
    budget = max_chars - len(tail) - len(_preamble(from_provider, reason, len(turns), 0))
    for number in range(len(turns), 0, -1):
        turn = turns[number - 1]
        for text in (turn.whole(number), turn.summary(number)):
            if len(text) + 2 <= budget:
                kept.append(text)
                budget -= len(text) + 2
                break
        else:
            break  # this one and every older one are left out
    omitted = len(turns) - len(kept)
    if not turns and len(now) == 2:
        text = prompt  # nothing to hand over: the new agent gets the request as it is
    else:
        parts = [_preamble(from_provider, reason, len(turns), omitted), *reversed(kept), tail]
        text = "\n\n".join(parts)
    return Handoff(prompt=text, turns=len(kept), chars=len(text))


def _preamble(from_provider: str, reason: str, total: int, omitted: int) -> str:
    lines = [
        f"This conversation began with another coding agent ({from_provider}), which "
        f"stopped: {reason}. You are taking over in the same workspace. Here is the "
        "conversation so far, oldest first; the files it changed are on disk as it left "
        'them. Continue from it and answer the request under "Now".',
    ]
    if omitted:
        lines.append(f"({omitted} of {total} earlier turns are left out for length.)")
    return "\n".join(lines)


def _turns(
    events: Iterable[Mapping[str, Any]], current_turn_id: str
) -> tuple[list[_Turn], _Turn | None]:
    """The session's earlier turns in order, and what the current one did so far."""
    by_id: dict[str, _Turn] = {}
    for event in events:
        turn_id, kind, data = event.get("turn_id"), event.get("type"), event.get("data")
        if not isinstance(turn_id, str) or not isinstance(data, dict):
            continue
        if kind == "turn.started":
            by_id[turn_id] = _Turn(prompt=_str(data.get("prompt")))
            continue
        turn = by_id.get(turn_id)
        if turn is None:
            continue
        if kind == "tool.started":
            turn._started[_str(data.get("tool_id"))] = data
            turn.files += _paths(data)
        elif kind == "tool.completed":
            started = turn._started.get(_str(data.get("tool_id")))
            name = _str(started.get("name")) if started else _str(data.get("tool_id"))
            shown = _cut(_input(started.get("input")), INPUT_CHARS) if started else ""
            status = _str(data.get("status"))
            turn.tools.append(f"{name} {shown} → {status}" if shown else f"{name} → {status}")
        elif kind == "message.completed":
            turn.text = _str(data.get("text")) or turn.text
        elif kind == "turn.completed":
            turn.text = _str(data.get("final_text")) or turn.text
        elif kind == "turn.failed":
            error = data.get("error")
            failure = _str(error.get("kind")) if isinstance(error, dict) else "unknown"
            turn.outcome = f"this turn failed: {failure}"
        elif kind == "turn.interrupted":
            turn.outcome = "this turn was interrupted"
    current = by_id.pop(current_turn_id, None)
    return [turn for turn in by_id.values() if turn.prompt], current


def _paths(tool: Mapping[str, Any]) -> list[str]:
    """The files a file-changing tool call names."""
    tool_input = tool.get("input")
    if tool.get("kind") != "file_change" or not isinstance(tool_input, dict):
        return []
    found = [v for k in _PATH_KEYS if isinstance(v := tool_input.get(k), str)]
    changes = tool_input.get("changes")  # Codex: [{path, kind, diff}]
    if isinstance(changes, list):
        found += [
            c["path"] for c in changes if isinstance(c, dict) and isinstance(c.get("path"), str)
        ]
    return found


def _input(value: object) -> str:
    """A tool call's input in one short line: the command, the path, else the JSON."""
    if not isinstance(value, dict):
        return ""
    for key in ("command", "cmd", *_PATH_KEYS, "pattern", "url", "query"):
        found = value.get(key)
        if isinstance(found, str):
            return found
        if isinstance(found, list) and all(isinstance(part, str) for part in found):
            return " ".join(found)
    return ", ".join(f"{k}={v}" for k, v in value.items())


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""
