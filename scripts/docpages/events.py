"""docs/reference/events.md: every event type (``app.events``), its data field by field, the
types they share, and the closed sets they speak in."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel

from app.events import (
    RETRYABLE_KINDS,
    ApprovalDecision,
    ApprovalMode,
    BudgetMeasure,
    BudgetScope,
    Event,
    EventEnvelope,
    FailureKind,
    ForkConversation,
    PlanStatus,
    RoutingStrategy,
    SelectionReason,
    ToolKind,
)
from app.webhook_settings import WEBHOOK_EVENT_TYPES
from docpages.docstrings import attribute_docs, cell, class_doc, markdown
from docpages.types import models_in, type_name

SUMMARIES: dict[str, str] = {
    "session.created": "The session exists: its provider, workspace, model and approval mode.",
    "session.provider_selected": (
        "Which provider the selector chose and why (`reason`), the providers it skipped and "
        "why, and how the routing strategy ranked the candidates."
    ),
    "session.thread_bound": (
        "The CLI revealed its thread id; the session resumes that thread from now on "
        "(also after a restart)."
    ),
    "session.closed": "The session was closed (`DELETE`, retention); its history is kept.",
    "turn.started": "A turn began, with the client's prompt.",
    "turn.completed": "The turn ended with an answer: its final text, usage and changes.",
    "turn.failed": (
        "The turn ended in failure, once, after its retries and failover: the error's kind "
        "(see *Failure kinds*), message, whether it was retryable and, when the gateway ended "
        "it, `reason`."
    ),
    "turn.interrupted": (
        "The turn was stopped: by a client's interrupt, a session's delete, or the gateway "
        "shutting down (`reason`)."
    ),
    "message.completed": "A message of the agent, whole, once its deltas are all sent.",
    "reasoning.completed": "The agent's reasoning for this item, whole.",
    "tool.started": "The agent began a tool call: its name, kind and input.",
    "tool.completed": "A tool call ended: its status, output and, for a command, exit code.",
    "approval.requested": (
        "The agent asks before a tool call; answer with `POST …/approvals/{approval_id}` "
        "before `expires_at`."
    ),
    "approval.resolved": (
        "An approval's end: allowed or denied by a client, or by the gateway (expired, "
        "cancelled with its turn)."
    ),
    "retry.scheduled": (
        "A failed attempt will be tried again: by the CLI itself (`source` `cli`) or by the "
        "gateway in the same thread (`gateway`), after `delay_s` or at `resume_at`."
    ),
    "usage": "What one attempt used, as the CLI reported it.",
    "warning": (
        "Something the client should know that did not fail the turn: an unparseable line "
        "(`parse_error`), a lost context (`context_lost`), a workspace not recorded "
        "(`snapshot_skipped`), …"
    ),
}
"""What each event type means, for the payloads whose class carries no docstring of its own
(a payload's docstring is part of the API document, so these stay here)."""

CLOSED_SETS: list[tuple[str, Any, str]] = [
    ("Failure kinds", FailureKind, "`turn.failed`'s `error.kind`; retryable ones are marked."),
    ("Tool kinds", ToolKind, "`tool.started`'s `kind`."),
    ("Approval modes", ApprovalMode, "A session's `approval_mode`."),
    ("Approval decisions", ApprovalDecision, "What a client answers an approval with."),
    ("Routing strategies", RoutingStrategy, "How the selector ranks candidates."),
    ("Selection reasons", SelectionReason, "Why the chosen provider was chosen."),
    ("Budget scopes", BudgetScope, "Whose budget `budget.reached` speaks of."),
    ("Budget measures", BudgetMeasure, "What a budget counts."),
    ("Fork conversations", ForkConversation, "How a fork carries the conversation."),
    ("Plan entry statuses", PlanStatus, "A `plan.updated` entry's `status`."),
]


class Unexplained(Exception):
    """Event types the page could not say anything about."""


def event_types() -> list[tuple[str, type[BaseModel]]]:
    """Every event type with its payload model, in the order of the ``Event`` union."""
    union = get_args(get_args(Event)[0])
    found = []
    for envelope in union:
        literal = envelope.model_fields["type"].annotation
        found.append((get_args(literal)[0], envelope.model_fields["data"].annotation))
    return found


def _anchor(model: type[BaseModel]) -> str:
    return f"type-{model.__name__}"


def _link(model: type[BaseModel]) -> str:
    return f"[{model.__name__}](#{_anchor(model)})"


def _fields(model: type[BaseModel]) -> str:
    docs = attribute_docs(model)
    if not model.model_fields:
        return "No fields.\n"
    rows = ["| field | type | |\n", "|---|---|---|\n"]
    for name, field in model.model_fields.items():
        optional = "" if field.is_required() else " (optional)"
        kind = type_name(field.annotation, _link) + optional
        rows.append(f"| `{name}` | {kind} | {cell(docs.get(name, ''))} |\n")
    return "".join(rows)


def _shared(roots: list[type[BaseModel]]) -> list[type[BaseModel]]:
    """The models the payloads' fields name, at any depth, in order of first mention."""
    seen: list[type[BaseModel]] = []
    queue = list(roots)
    while queue:
        model = queue.pop(0)
        for field in model.model_fields.values():
            for found in models_in(field.annotation):
                if found not in seen and found not in roots:
                    seen.append(found)
                    queue.append(found)
    return seen


INTRO = """\
# Events reference

<!-- Generated by scripts/gen_docs.py from app/events. Do not edit: change the event
models' docstrings and run `python scripts/gen_docs.py`. -->

Every event, on every transport (SSE, WebSocket, the JSON events page, webhooks, a streamed
run), is one envelope: `{seq, session_id, turn_id, attempt, provider, at, type, data}`; `data`
is the payload of its `type`. How events are stored, numbered, replayed and joined is in
[Events and streams](../concepts/events.md); in the API document the envelope typed by `type`
is the `Event` union.

A new event type is an extension, not a breaking change: a client skips types it does not
know.

## The envelope

"""


def render() -> str:
    """The page."""
    types = event_types()
    unexplained = [name for name, model in types if not (class_doc(model) or SUMMARIES.get(name))]
    if unexplained:
        raise Unexplained("event types without a description: " + ", ".join(unexplained))
    parts = [INTRO, _fields(EventEnvelope), "\n## Event types\n\n"]
    parts.append("| type | |\n|---|---|\n")
    for name, model in types:
        about = markdown(class_doc(model) or SUMMARIES[name]).split(". ")[0].rstrip(".")
        parts.append(f"| [`{name}`](#{name}) | {cell(about)}. |\n")
    for name, model in types:
        about = markdown(class_doc(model) or SUMMARIES[name])
        parts.append(f"\n### `{name}` {{#{name}}}\n\n{about}\n\n{_fields(model)}")
    parts.append("\n## Shared types\n\nTypes the events' data is made of.\n")
    for model in _shared([model for _, model in types]):
        about = markdown(class_doc(model))
        parts.append(f"\n### {model.__name__} {{#{_anchor(model)}}}\n\n")
        parts.append(f"{about}\n\n" if about else "")
        parts.append(_fields(model))
    parts.append("\n## Closed sets\n")
    for title, literal, about in CLOSED_SETS:
        values = get_args(literal)
        shown = ", ".join(
            f"`{v}` (retryable)" if literal is FailureKind and v in RETRYABLE_KINDS else f"`{v}`"
            for v in values
        )
        parts.append(f"\n**{title}.** {about} {shown}.\n")
    hooks = ", ".join(f"`{name}`" for name in WEBHOOK_EVENT_TYPES)
    parts.append(
        "\n## Webhook event types\n\nWhat a webhook endpoint may subscribe to "
        f"([Webhooks](../concepts/webhooks.md)): {hooks}. Each but `session.idle` is the "
        "session event of that type; `session.idle` is derived (a turn ended and nothing "
        "runs).\n"
    )
    return "".join(parts)
