"""The hand-off: what a new agent is told when a session moves to it mid-conversation.

A session that fails over (app/runtime/failover.py) starts a fresh thread on another
provider, which has never seen the conversation. Its first prompt is built here, from the
event log alone (pure, no I/O; the caller reads the log from its end, newest turns first)::

    preamble (which agent stopped, and why)
    ## Turn k … ## Turn n      each: the user's prompt, the tools the agent ran and how they
                               ended, the files it changed, its final text
    ## Now                     what the failed turn had done before the failure, then its
                               prompt, which the new agent answers

``max_chars`` is a hard bound on the whole prompt. The preamble (its reason cut to
``REASON_CHARS``) and the failed turn's prompt come first; then, while they fit, what the
failed turn had done; then the earlier turns from the newest back: each whole while it
fits, else summarized (prompt and final text cut to ``SUMMARY_CHARS``, tool list dropped),
and once not even the summary fits, it and every older turn are left out (counted in the
preamble). The failed turn's prompt is never cut: when the preamble and it alone do not fit
in ``max_chars``, the new agent gets that prompt as it is and nothing else (the request is
never changed, and it is what the agent would have got without a hand-off).

A fork that cannot fork its agent's thread (app/runtime/forking.py) gets the same turns with
``build_fork_handoff``: a preamble saying where the conversation comes from, the turns up to
the fork, and a "Now" heading, told before the new session's first prompt.

Every text taken from the conversation goes through ``mask`` (the gateway's ``SecretMask``)
before it is measured: nothing a secret was seen in leaves for the other vendor, and the
bound holds for what is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SUMMARY_CHARS = 400
"""What an older turn's prompt and final text are cut to when the whole turn does not fit."""
INPUT_CHARS = 160
"""What a tool call's input is cut to in the tool list."""
REASON_CHARS = 300
"""What the failure's message is cut to in the preamble."""
INTRO = "Before it stopped, the previous agent had, in this request:"
_PATH_KEYS = ("file_path", "filePath", "path", "notebook_path")


HANDOFF_TYPES = (
    "turn.started",
    "turn.completed",
    "turn.failed",
    "turn.interrupted",
    "message.completed",
    "tool.started",
    "tool.completed",
)
"""The events a hand-off (a failover's or a fork's) is built from: the store skips deltas
and the rest."""


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

    def progress(self) -> list[str]:
        """What this (the failed) turn had done, one line each, for the "Now" section."""
        lines = [f"- ran {tool}" for tool in self.tools]
        if self.files:
            lines.append(f"- changed {', '.join(dict.fromkeys(self.files))}")
        if self.text:
            lines.append(f"- said: {_cut(self.text, SUMMARY_CHARS)}")
        return lines

    def summary(self, number: int) -> str:
        lines = [f"## Turn {number} (summarized)", f"User: {_cut(self.prompt, SUMMARY_CHARS)}"]
        if self.tools:
            lines.append(f"Agent ran {len(self.tools)} tool call(s).")
        if self.files:
            lines.append(f"Files changed: {', '.join(dict.fromkeys(self.files))}")
        if self.text:
            lines.append(f"Agent: {_cut(self.text, SUMMARY_CHARS)}")
        return "\n".join(lines)


def _unchanged(text: str) -> str:
    return text


def build_handoff(
    events: Iterable[Mapping[str, Any]],
    *,
    current_turn_id: str,
    prompt: str,
    from_provider: str,
    reason: str,
    max_chars: int,
    earlier: int = 0,
    mask: Callable[[str], str] = _unchanged,
) -> Handoff:
    """The hand-off prompt for the turn ``current_turn_id`` (whose prompt is ``prompt``),
    from the session's event envelopes (``{type, turn_id, data}``) in order, at most
    ``max_chars`` long unless ``prompt`` alone is longer (then it is ``prompt`` alone).

    ``earlier``: how many turns the session had before this one (the events may begin after
    the oldest); turns are numbered from it back."""
    turns, current = _turns(events, current_turn_id, mask)
    prompt, reason = mask(prompt), _cut(mask(reason), REASON_CHARS)
    total = max(earlier, len(turns))
    progress = current.progress() if current is not None else []
    alone = Handoff(prompt=prompt, turns=0, chars=len(prompt))
    if not turns and not progress:
        return alone  # nothing to hand over: the new agent gets the request as it is
    ask = f"User: {prompt}"
    longest_preamble = _preamble(from_provider, reason, total, total)
    budget = max_chars - len(longest_preamble) - len("\n\n## Now\n") - len(ask)
    if budget < 0:
        return alone
    now = ["## Now"]
    share = budget // 2  # the rest is for the earlier turns
    if progress and len(INTRO) + 1 <= share:
        now.append(INTRO)
        share -= len(INTRO) + 1
        for shown, line in enumerate(progress):
            rest = f"- and {len(progress) - shown} more (left out for length)"
            room = share if shown == len(progress) - 1 else share - len(rest) - 1
            if len(line) + 1 > room:
                if len(rest) + 1 <= share:
                    now.append(rest)
                break
            now.append(line)
            share -= len(line) + 1
        budget -= sum(len(line) + 1 for line in now[1:])
    now.append(ask)
    kept = _newest_that_fit(turns, total, budget)
    if len(now) == 2 and not kept:
        return alone  # nothing of the conversation fits: the request as it is
    parts = [_preamble(from_provider, reason, total, total - len(kept)), *reversed(kept)]
    text = "\n\n".join([*parts, "\n".join(now)])
    if len(text) > max_chars:  # pragma: no cover - the budget above holds it
        return alone
    return Handoff(prompt=text, turns=len(kept), chars=len(text))


def _newest_that_fit(turns: Sequence[_Turn], total: int, budget: int) -> list[str]:
    """The turns' texts, newest first, each whole or else summed up, while they fit in
    ``budget`` (a turn that does not fit leaves it and every older one out)."""
    kept: list[str] = []
    for index, turn in enumerate(reversed(turns)):
        number = total - index
        for text in (turn.whole(number), turn.summary(number)):
            if len(text) + 2 <= budget:
                kept.append(text)
                budget -= len(text) + 2
                break
        else:
            break
    return kept


FORK_NOW = "## Now"
"""The last line of a fork's hand-off: the new session's first prompt follows it."""


def build_fork_handoff(
    events: Iterable[Mapping[str, Any]],
    *,
    from_provider: str,
    max_chars: int,
    earlier: int = 0,
    mask: Callable[[str], str] = _unchanged,
) -> Handoff:
    """What a fork's first prompt is told before its own text: the turns of ``events`` (the
    parent's envelopes up to the turn forked at, in order), at most ``max_chars`` long, the
    newest kept first as for ``build_handoff``; an empty ``prompt`` when none fits.

    ``earlier``: how many turns the parent had up to the fork (the events may begin after
    the oldest)."""
    turns, _ = _turns(events, "", mask)
    total = max(earlier, len(turns))
    budget = max_chars - len(_fork_preamble(from_provider, total, total)) - len(FORK_NOW) - 2
    kept = _newest_that_fit(turns, total, budget)
    if not kept:
        return Handoff(prompt="", turns=0, chars=0)
    preamble = _fork_preamble(from_provider, total, total - len(kept))
    text = "\n\n".join([preamble, *reversed(kept), FORK_NOW])
    return Handoff(prompt=text, turns=len(kept), chars=len(text))


def _fork_preamble(from_provider: str, total: int, omitted: int) -> str:
    lines = [
        f"This session is a fork of another one, in which a coding agent ({from_provider}) "
        "worked with the user. Here is that conversation up to the fork, oldest first; the "
        "workspace holds the files as they were then. Continue from it and answer the "
        'request under "Now".',
    ]
    if omitted:
        lines.append(f"({omitted} of {total} earlier turns are left out for length.)")
    return "\n".join(lines)


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
    events: Iterable[Mapping[str, Any]], current_turn_id: str, mask: Callable[[str], str]
) -> tuple[list[_Turn], _Turn | None]:
    """The session's earlier turns in order, and what the current one did so far."""
    by_id: dict[str, _Turn] = {}
    for event in events:
        turn_id, kind, data = event.get("turn_id"), event.get("type"), event.get("data")
        if not isinstance(turn_id, str) or not isinstance(data, dict):
            continue
        if kind == "turn.started":
            by_id[turn_id] = _Turn(prompt=mask(_str(data.get("prompt"))))
            continue
        turn = by_id.get(turn_id)
        if turn is None:
            continue
        if kind == "tool.started":
            turn._started[_str(data.get("tool_id"))] = data
            turn.files += [mask(path) for path in _paths(data)]
        elif kind == "tool.completed":
            started = turn._started.get(_str(data.get("tool_id")))
            name = _str(started.get("name")) if started else _str(data.get("tool_id"))
            shown = _cut(mask(_input(started.get("input"))), INPUT_CHARS) if started else ""
            status = _str(data.get("status"))
            name = mask(name)
            turn.tools.append(f"{name} {shown} → {status}" if shown else f"{name} → {status}")
        elif kind == "message.completed":
            turn.text = mask(_str(data.get("text"))) or turn.text
        elif kind == "turn.completed":
            turn.text = mask(_str(data.get("final_text"))) or turn.text
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
