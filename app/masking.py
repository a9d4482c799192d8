"""The one masker of secrets for everything that leaves the gateway: ``SecretMask``.

Events, turn rows, approvals, logs, hand-offs to another agent and problem details all pass
through the same ``SecretMask``; each configured secret is replaced by ``[redacted]`` in every
form the masker can know it by:

- the value itself (and, in a JSON document, its JSON-escaped spellings);
- its UTF-8 bytes in hex, lower and upper case;
- its percent-encoded (URL) forms, upper- and lower-case escapes, space as ``%20`` or ``+``;
- its bytes in base64, standard and URL-safe alphabets, with or without padding, at each of
  the three byte alignments a secret can have inside a longer base64 text. At an alignment
  the characters wholly made of the secret's bits are matched; the one character on each side
  that mixes its bits with a neighbour's (and any ``=`` padding) is taken too when it is one
  the secret allows there, so no character carrying the secret's bits is left behind.

All forms of all secrets are one compiled pattern (a trie of the literals, so the regular
expression engine tries a handful of characters at a position, not every form): masking a
text is one pass over it, whatever the number of secrets. ``add`` makes a new secret known
(a rotated token) from then on; ``watch`` registers a check run before a use (at most once a
millisecond; one that notices a token file changed and calls ``add``).
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 8
"""Shorter configured values are not masked (they would blank common words)."""
MAX_PADDING = 2
WATCH_EVERY_S = 0.001
"""How often, at most, the checks given to ``watch`` run: before a use, once a millisecond
has passed since the last (a stat of the token file is dearer than masking an event)."""

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_URL_SAFE = str.maketrans("+/", "-_")
_ESCAPE = re.compile(r"%[0-9A-F]{2}")


@dataclass(frozen=True, kw_only=True)
class Form:
    """One spelling of a secret: the literal matched, and the partial base64 characters that
    may stand right before and right after it (then ``=`` padding, when ``padded``)."""

    text: str
    before: frozenset[str] = frozenset()
    after: frozenset[str] = frozenset()
    padded: bool = False


def forms_of(secret: str) -> list[Form]:
    """Every spelling of ``secret`` the masker looks for in plain text."""
    data = secret.encode()
    found = [Form(text=secret), Form(text=data.hex()), Form(text=data.hex().upper())]
    for safe, plus in (("", False), ("/", False), ("", True)):
        quoted = (
            urllib.parse.quote_plus(secret, safe=safe)
            if plus
            else urllib.parse.quote(secret, safe=safe)
        )
        lower = _ESCAPE.sub(lambda m: m.group().lower(), quoted)
        found += [Form(text=quoted), Form(text=lower)]
    for alignment in range(3):
        found += _base64_forms(data, alignment)
    return [f for f in found if len(f.text) >= MIN_SECRET_LENGTH]


def _base64_forms(data: bytes, alignment: int) -> list[Form]:
    """``data`` in base64 when ``alignment`` bytes of something else precede it in the encoded
    text (modulo 3), in both alphabets."""
    prefix = bytes(alignment)
    encoded = base64.b64encode(prefix + data).decode()
    start = (8 * alignment + 5) // 6  # the first character made only of the secret's bits
    end = 8 * (alignment + len(data)) // 6  # past the last such character
    core = encoded[start:end]
    before: set[str] = set()
    if alignment == 1:  # 2 bits of the byte before, 4 of the secret
        before = {base64.b64encode(bytes((p,)) + data).decode()[1] for p in range(4)}
    elif alignment == 2:  # 4 bits of the byte before, 2 of the secret
        before = {base64.b64encode(bytes((0, p)) + data).decode()[2] for p in range(16)}
    after: set[str] = set()
    partial = 8 * (alignment + len(data)) % 6 != 0
    if partial:  # the secret's last bits, then the next byte's (or zeros, at the end)
        after = {encoded[end]}
        after |= {base64.b64encode(prefix + data + bytes((n,))).decode()[end] for n in range(256)}
    forms = []
    for table in (None, _URL_SAFE):
        if table is None:
            forms.append(
                Form(text=core, before=frozenset(before), after=frozenset(after), padded=partial)
            )
        else:
            forms.append(
                Form(
                    text=core.translate(table),
                    before=frozenset(c.translate(table) for c in before),
                    after=frozenset(c.translate(table) for c in after),
                    padded=partial,
                )
            )
    return forms


def _json_spellings(form: Form) -> list[Form]:
    """``form`` as it stands inside a JSON string, with and without ``\\u`` escapes."""
    spellings = {json.dumps(form.text, ensure_ascii=a)[1:-1] for a in (False, True)}
    return [
        Form(text=s, before=form.before, after=form.after, padded=form.padded) for s in spellings
    ]


def trie_pattern(words: Iterable[str]) -> re.Pattern[str] | None:
    """One regular expression matching any of ``words`` (the longest at a position), built
    as a trie so shared prefixes are tried once."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    if not root:
        return None
    return re.compile(_node_pattern(root))


def _node_pattern(node: dict[str, Any]) -> str:
    branches = []
    for first, child in sorted(node.items()):
        if not first:
            continue
        run, rest = [first], child
        while len(rest) == 1 and "" not in rest:  # a chain: no choice until it ends
            ((char, rest),) = rest.items()
            run.append(char)
        branches.append(re.escape("".join(run)) + _node_pattern(rest))
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if "" in node else body


class _Compiled:
    """The forms of a set of secrets, as one pattern per kind of input."""

    def __init__(self, secrets: frozenset[str]) -> None:
        self.secrets = secrets
        text_forms = [form for secret in secrets for form in forms_of(secret)]
        json_forms = [s for form in text_forms for s in _json_spellings(form)]
        self.text, self.text_forms = _indexed(text_forms)
        self.json, self.json_forms = _indexed(json_forms)


def _indexed(forms: list[Form]) -> tuple[re.Pattern[str] | None, dict[str, Form]]:
    by_text: dict[str, Form] = {}
    for form in forms:
        known = by_text.get(form.text)
        # The same literal for two secrets or alignments: what either allows around it.
        by_text[form.text] = (
            form
            if known is None
            else Form(
                text=form.text,
                before=known.before | form.before,
                after=known.after | form.after,
                padded=known.padded or form.padded,
            )
        )
    return trie_pattern(by_text), by_text


class SecretMask:
    """Replaces known secrets, in all their known forms, with ``[redacted]``.

    Only values of at least ``MIN_SECRET_LENGTH`` characters with a letter in them are
    secrets (a number could be part of another number in a JSON document). Safe to use from
    several threads (the log's record factory runs in any thread): ``add`` swaps in a new
    compiled state whole.
    """

    def __init__(
        self, secrets: Iterable[str] = (), *, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._state = _Compiled(frozenset(_usable(secrets)))
        self._watchers: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._watching = threading.local()
        self._monotonic = monotonic
        self._checked = -WATCH_EVERY_S

    def __bool__(self) -> bool:
        return bool(self._current().secrets)

    def add(self, secrets: Iterable[str]) -> bool:
        """Mask ``secrets`` too from now on; True when one of them was new."""
        with self._lock:
            known = self._state.secrets
            fresh = frozenset(_usable(secrets)) - known
            if fresh:
                self._state = _Compiled(known | fresh)
        return bool(fresh)

    def watch(self, check: Callable[[], None]) -> None:
        """Run ``check`` before a use, at most every ``WATCH_EVERY_S`` (it runs on the event
        path); it calls ``add`` when it finds a new secret (a token file that changed)."""
        self._watchers.append(check)

    def text(self, value: str) -> str:
        state = self._current()
        return _masked(value, state.text, state.text_forms, in_json=False)

    def json(self, encoded: str) -> str:
        """``encoded`` (a JSON document) with each secret inside its strings replaced; the
        result is still a JSON document (an escape sequence is never cut in two)."""
        state = self._current()
        return _masked(encoded, state.json, state.json_forms, in_json=True)

    def values(self, value: Any) -> Any:
        """``value`` (JSON-like: dicts, lists, strings) with its strings masked."""
        state = self._current()
        return _values(value, state)

    def _current(self) -> _Compiled:
        if not self._watchers:
            return self._state
        now = self._monotonic()
        if now - self._checked < WATCH_EVERY_S:
            return self._state
        self._checked = now
        if not getattr(self._watching, "busy", False):
            self._watching.busy = True  # a check that logs comes back here: once is enough
            try:
                for check in self._watchers:
                    check()
            finally:
                self._watching.busy = False
        return self._state


def _usable(secrets: Iterable[str]) -> Iterable[str]:
    return (s for s in secrets if len(s) >= MIN_SECRET_LENGTH and any(c.isalpha() for c in s))


def _values(value: Any, state: _Compiled) -> Any:
    if isinstance(value, str):
        return _masked(value, state.text, state.text_forms, in_json=False)
    if isinstance(value, dict):
        return {k: _values(v, state) for k, v in value.items()}
    if isinstance(value, list):
        return [_values(v, state) for v in value]
    return value


def _masked(
    value: str, pattern: re.Pattern[str] | None, forms: dict[str, Form], *, in_json: bool
) -> str:
    if pattern is None:
        return value
    found = pattern.search(value)
    if found is None:
        return value
    parts: list[str] = []
    done = 0
    size = len(value)
    while found is not None:
        start, end = found.span()
        form = forms[found.group()]
        if start > done and value[start - 1] in form.before:
            start -= 1
        if end < size and value[end] in form.after:
            end += 1
        if form.padded:
            padding = 0
            while end < size and value[end] == "=" and padding < MAX_PADDING:
                end, padding = end + 1, padding + 1
        if in_json:
            start = max(done, _escape_start(value, start))
        parts += (value[done:start], REDACTED)
        done = end
        found = pattern.search(value, done)
    parts.append(value[done:])
    return "".join(parts)


def _escape_start(text: str, index: int) -> int:
    """Where the JSON escape sequence ``index`` falls inside begins (``index`` when it falls
    inside none): a match never starts in the middle of ``\\n`` or ``\\u00e9``."""
    for back in range(1, 6):
        at = index - back
        if at < 0:
            break
        if text[at] != "\\":
            continue
        slashes = 1
        while at - slashes >= 0 and text[at - slashes] == "\\":
            slashes += 1
        if slashes % 2 == 0:
            return index  # an escaped backslash: what follows is plain text
        length = 6 if at + 1 < len(text) and text[at + 1] == "u" else 2
        return at if at + length > index else index
    return index
