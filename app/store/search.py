"""Finding sessions by what a person remembers of them: a few words of the title, the id, or
the workspace, repository or branch it ran in.

Every word of the search must appear (case-insensitive, as a plain substring: ``%`` and
``_`` match themselves) in one of those columns; words are matched independently, so
"fix login" finds "Fix the login page". Case folding is the database's: ASCII letters on
SQLite, every letter on PostgreSQL.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, and_, or_

from app.store.tables import SessionRow

SEARCH_MAX_WORDS = 8
"""Words past this many are ignored (each adds a scan of the searched columns)."""

_SEARCHED = (
    SessionRow.title,
    SessionRow.id,
    SessionRow.workspace,
    SessionRow.repository,
    SessionRow.branch,
)


def _escaped(word: str) -> str:
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def matching(search: str) -> ColumnElement[bool]:
    """The condition a session meets when it matches every word of ``search``."""
    words = search.split()[:SEARCH_MAX_WORDS]
    return and_(
        *(
            or_(*(column.ilike(f"%{_escaped(word)}%", escape="\\") for column in _SEARCHED))
            for word in words
        )
    )
