"""Commands between replicas, signed: a replica runs what another replica forwards through
Redis only when a replica holding the cluster secret sent it, for this replica, recently and
once; and it runs it as the key that asked.

    on the wire:  v1.<HMAC-SHA256, hex>.<payload: the exact bytes signed, JSON>

    command  {id, op, args, issuer: {name, admin}, to, issued_at, deadline, trace}
    answer   {id, result} | {id, error}

(``op`` and ``args``: the command's kind and fields as app/runtime/commands.py encodes them;
``trace``: the sender's span as W3C ``traceparent``/``tracestate`` headers, empty when it does
not trace. A command without it, or with one that is not such headers, runs untraced.)

The HMAC covers a purpose (``command`` or ``answer``) as well as the payload, so an answer is
never taken for a command. The ``issuer`` is the key the forwarding replica authenticated:
the receiver derives who may see the session from it (an admin key sees every session), never
from the arguments. Anyone who can write to Redis can push to a replica's command list; without
the secret they cannot make a command it runs.

A command is refused when it is not signed, is signed with another secret, does not parse, is
addressed to another replica, was signed more than the window ago (or further ahead, by the
sender's clock), or carries an id already run. The ids are remembered in this replica's memory
for the window: a command names the one replica it is for, so no other replica would run it,
and a memory kept in Redis could be erased by whoever can write there (the very party the
signature keeps out). A replica forgets the ids when it restarts, so it also refuses commands
signed before it started.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

VERSION = b"v1"
Purpose = Literal["command", "answer"]
Refusal = Literal["unsigned", "bad_signature", "malformed", "misdirected", "stale", "replayed"]
REFUSALS: tuple[Refusal, ...] = (
    "unsigned",
    "bad_signature",
    "malformed",
    "misdirected",
    "stale",
    "replayed",
)


class Refused(Exception):
    """A command or answer this replica will not act on; ``reason`` says why (its content is
    never part of the message: it may be an attacker's)."""

    def __init__(self, reason: Refusal) -> None:
        super().__init__(reason)
        self.reason: Refusal = reason


@dataclass(frozen=True, kw_only=True)
class Issuer:
    """The key that asked for a command, as the replica it reached authenticated it."""

    name: str
    admin: bool

    @property
    def owner(self) -> str | None:
        """The owner a session must have for this key to act on it; None (any) for admins."""
        return None if self.admin else self.name


@dataclass(frozen=True, kw_only=True)
class Command:
    id: str
    op: str
    args: dict[str, Any]
    issuer: Issuer
    to: str
    """The replica it is for."""
    issued_at: float
    """When it was signed, by the sender's clock (seconds since the epoch)."""
    deadline: float
    """When its sender stops waiting for the answer."""
    trace: dict[str, str] = field(default_factory=dict)
    """The span that sent it (W3C trace context headers), so its holder's spans join the
    sender's trace."""


class Signer:
    """Seals payloads with the first secret; opens those sealed with any of them."""

    def __init__(self, secrets: Sequence[bytes]) -> None:
        if not secrets:
            raise ValueError("a signer needs at least one secret")
        self._secrets = list(secrets)

    def seal(self, purpose: Purpose, payload: bytes) -> bytes:
        return b".".join((VERSION, _mac(self._secrets[0], purpose, payload).encode(), payload))

    def unseal(self, purpose: Purpose, sealed: bytes | str) -> bytes:
        """The payload, when ``sealed`` carries a valid signature for ``purpose``."""
        if isinstance(sealed, str):
            sealed = sealed.encode(errors="surrogateescape")
        parts = sealed.split(b".", 2)
        if len(parts) != 3 or parts[0] != VERSION:
            raise Refused("unsigned")
        _, signature, payload = parts
        valid = [
            hmac.compare_digest(_mac(secret, purpose, payload).encode(), signature)
            for secret in self._secrets
        ]
        if not any(valid):
            raise Refused("bad_signature")
        return payload


def _mac(secret: bytes, purpose: Purpose, payload: bytes) -> str:
    return hmac.new(secret, purpose.encode() + b"\n" + payload, hashlib.sha256).hexdigest()


def encode_command(command: Command, default: Callable[[Any], Any]) -> bytes:
    """The command's payload (``default`` encodes what JSON cannot: records, datetimes)."""
    body = {
        "id": command.id,
        "op": command.op,
        "args": command.args,
        "issuer": {"name": command.issuer.name, "admin": command.issuer.admin},
        "to": command.to,
        "issued_at": command.issued_at,
        "deadline": command.deadline,
        "trace": command.trace,
    }
    return json.dumps(body, default=default, separators=(",", ":")).encode()


def _decode_command(payload: bytes) -> Command:
    try:
        body = json.loads(payload)
        issuer = body["issuer"]
        command = Command(
            id=body["id"],
            op=body["op"],
            args=body["args"],
            issuer=Issuer(name=issuer["name"], admin=issuer["admin"]),
            to=body["to"],
            issued_at=float(body["issued_at"]),
            deadline=float(body["deadline"]),
            trace=_trace_headers(body.get("trace")),
        )
    except (ValueError, TypeError, KeyError):
        raise Refused("malformed") from None
    texts = (command.id, command.op, command.to, command.issuer.name)
    if not all(isinstance(text, str) and text for text in texts):
        raise Refused("malformed")
    if not isinstance(command.args, dict) or not isinstance(command.issuer.admin, bool):
        raise Refused("malformed")
    return command


TRACE_HEADERS = frozenset({"traceparent", "tracestate"})
MAX_TRACE_HEADER = 512
"""The W3C limit of ``tracestate`` (``traceparent`` is 55 characters)."""


def _trace_headers(value: object) -> dict[str, str]:
    """The trace context headers of a command; those that are not (or none) are dropped."""
    if not isinstance(value, dict):
        return {}
    return {
        k: v
        for k, v in value.items()
        if k in TRACE_HEADERS and isinstance(v, str) and len(v) <= MAX_TRACE_HEADER
    }


class Inbox:
    """What a replica accepts from its command list: signed commands for it, each once."""

    def __init__(
        self,
        signer: Signer,
        *,
        replica_id: str,
        window_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._signer = signer
        self._replica_id = replica_id
        self._window_s = window_s
        self._clock = clock
        self._started_at = clock()
        self._seen: dict[str, float] = {}
        """Ids run, with when they may be forgotten (their command is stale by then)."""

    def accept(self, sealed: bytes | str) -> Command:
        """The command, when it may run here now; else raises ``Refused``."""
        command = _decode_command(self._signer.unseal("command", sealed))
        if command.to != self._replica_id:
            raise Refused("misdirected")
        now = self._clock()
        if abs(now - command.issued_at) > self._window_s or command.issued_at < self._started_at:
            raise Refused("stale")
        self._forget(now)
        if command.id in self._seen:
            raise Refused("replayed")
        self._seen[command.id] = command.issued_at + self._window_s
        return command

    def _forget(self, now: float) -> None:
        for command_id, until in list(self._seen.items()):
            if until < now:
                del self._seen[command_id]


def seal_answer(signer: Signer, command_id: str, body: Mapping[str, Any], default: Any) -> bytes:
    """An answer to the command ``command_id``, signed."""
    payload = json.dumps({"id": command_id, **body}, default=default, separators=(",", ":"))
    return signer.seal("answer", payload.encode())


def open_answer(signer: Signer, command_id: str, sealed: bytes | str) -> dict[str, Any]:
    """The answer's body, when it is signed and answers ``command_id``; else ``Refused``."""
    try:
        body = json.loads(signer.unseal("answer", sealed))
    except ValueError:
        raise Refused("malformed") from None
    if not isinstance(body, dict):
        raise Refused("malformed")
    if body.get("id") != command_id:
        raise Refused("misdirected")
    return body
