"""Rows in, records out: the only place an ORM row turns into what the rest of the gateway sees
(``app.records``), and a record into the row that stores it. A record's fields are its row's
columns, but for the renames below."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from app.records import ApprovalRecord, BindingRecord, SessionRecord, TurnRecord
from app.store.tables import ApprovalRow, Base, BindingRow, SessionRow, TurnRow

R = TypeVar("R")
B = TypeVar("B", bound=Base)

RENAMES: dict[type[Any], dict[str, str]] = {
    SessionRecord: {"metadata": "metadata_"},  # ``metadata`` is SQLAlchemy's on a model
    TurnRecord: {"number": "seq_no"},
}
"""Record field → row attribute, where they differ."""


def _record(cls: type[R], row: Base) -> R:
    renames = RENAMES.get(cls, {})
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    return cls(**{f.name: getattr(row, renames.get(f.name, f.name)) for f in fields})


def _row(cls: type[B], record: Any, **overrides: Any) -> B:
    renames = RENAMES.get(type(record), {})
    values = {
        renames.get(f.name, f.name): getattr(record, f.name) for f in dataclasses.fields(record)
    }
    return cls(**(values | overrides))


def session_record(row: SessionRow) -> SessionRecord:
    return _record(SessionRecord, row)


def turn_record(row: TurnRow) -> TurnRecord:
    return _record(TurnRecord, row)


def approval_record(row: ApprovalRow) -> ApprovalRecord:
    return _record(ApprovalRecord, row)


def binding_record(row: BindingRow) -> BindingRecord:
    return _record(BindingRecord, row)


def session_row(record: SessionRecord) -> SessionRow:
    return _row(SessionRow, record)


def turn_row(record: TurnRecord, *, number: int) -> TurnRow:
    return _row(TurnRow, record, seq_no=number)


def approval_row(record: ApprovalRecord) -> ApprovalRow:
    return _row(ApprovalRow, record)
