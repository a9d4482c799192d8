"""What the runtime keeps of each workspace: its state at every turn's start and end, in the
snapshot store (app/process/snapshots/), and what a revert tells the agent's next prompt.

    turn started ─► record refs/turns/<turn>/start   over the cap: a warning, nothing kept
    turn ended   ─► record refs/turns/<turn>/end     ─► turn.completed carries ``changes``
    revert       ─► the files back as at a turn's start ─► a note for the next prompt

Recording never fails a turn: a workspace over the cap or a Git failure becomes a
``warning`` event, and that turn has no recorded state. ``files_after`` is what a fork
starts from: the files as they were when a turn ended.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from app.errors import SnapshotUnavailable, WorkspaceTooLarge
from app.events import ChangedFile, ChangesSummary, Warning
from app.process.snapshots import NOW, Changes, GitError, SnapshotStore, TooLarge
from app.process.snapshots.store import Moment, turn_ref
from app.records import TurnRecord
from app.settings import Settings

log = logging.getLogger(__name__)

NOTE_FILES = 20
"""The most files a revert's note to the agent names (the rest are counted)."""
NOTE_PROMPT_CHARS = 200
"""What the reverted-to turn's prompt is cut to in that note."""
_REVERTED: dict[str, str] = {
    # A revert's changes go from the workspace as it was back to the turn's start.
    "added": "restored",
    "deleted": "removed",
    "modified": "changed back",
    "renamed": "renamed back",
}


@dataclass(frozen=True, kw_only=True)
class Ended:
    """A turn's end as recorded: its changes in short, or the warning saying why not."""

    changes: ChangesSummary | None = None
    warning: Warning | None = None


def summary(changes: Changes) -> ChangesSummary:
    return ChangesSummary(
        files=len(changes.files), additions=changes.additions, deletions=changes.deletions
    )


def changed_files(changes: Changes) -> list[ChangedFile]:
    return [
        ChangedFile(
            path=change.path,
            status=change.status,
            old_path=change.old_path,
            additions=change.additions,
            deletions=change.deletions,
            binary=change.binary,
        )
        for change in changes.files
    ]


def revert_note(turn: TurnRecord, changes: Changes) -> str:
    """What the agent's next prompt is told about a revert to ``turn``'s start (pure)."""
    prompt = " ".join(turn.prompt.split())
    if len(prompt) > NOTE_PROMPT_CHARS:
        prompt = prompt[: NOTE_PROMPT_CHARS - 1] + "…"
    named = [f"{c.path} ({_REVERTED[c.status]})" for c in changes.files[:NOTE_FILES]]
    more = len(changes.files) - len(named)
    listed = ", ".join(named) + (f" and {more} more" if more > 0 else "")
    return (
        f"[Note from the gateway: the user reverted the workspace's files to how they were "
        f"at the start of turn {turn.number} (their request then: {prompt!r}). Everything "
        f"changed in the files since then was undone"
        + (f": {listed}." if listed else " (nothing had changed).")
        + " Read files again before relying on what you remember of them.]"
    )


def _reason(exc: Exception) -> str:
    return exc.detail if isinstance(exc, TooLarge | GitError) else str(exc)


class WorkspaceHistory:
    """The sessions' workspace records; with ``store`` None (``snapshots.enabled = false``)
    nothing is recorded and every read says so."""

    def __init__(self, store: SnapshotStore | None) -> None:
        self.store = store

    @property
    def enabled(self) -> bool:
        return self.store is not None

    def _store(self) -> SnapshotStore:
        if self.store is None:
            raise SnapshotUnavailable(
                "this gateway does not record workspaces (snapshots.enabled = false)"
            )
        return self.store

    async def admit(self, workspace: Path) -> None:
        """Refuse (422) a new session's workspace over the cap, saying what is too big."""
        if self.store is None:
            return
        size = await self.store.measure(workspace)
        refusal = self.store.over(size)
        if refusal is not None:
            raise WorkspaceTooLarge(
                refusal.detail,
                files=size.files,
                bytes=size.bytes,
                max_files=refusal.max_files,
                max_bytes=refusal.max_bytes,
            )

    # --- turns ---------------------------------------------------------------------------

    async def turn_started(self, session_id: str, workspace: Path, turn_id: str) -> Warning | None:
        """Record the workspace as the turn starts (kept from before when the turn already
        has it: a turn resumed after a restart); the warning when it could not be."""
        if self.store is None:
            return None
        try:
            await self.store.record(session_id, workspace, turn_ref(turn_id, "start"), keep=True)
        except (TooLarge, GitError) as exc:
            log.warning("turn %s: workspace not recorded at its start: %s", turn_id, exc)
            return Warning(
                code="snapshot_skipped",
                message=f"the workspace was not recorded at this turn's start, so its changes "
                f"cannot be shown or reverted: {_reason(exc)}",
            )
        return None

    async def turn_ended(self, session_id: str, workspace: Path, turn_id: str) -> Ended:
        """Record the workspace as the turn ends; what it changed since its start."""
        if self.store is None:
            return Ended()
        try:
            start = await self.store.resolve(session_id, turn_ref(turn_id, "start"))
            if start is None:  # its start said why already
                return Ended()
            end = await self.store.record(session_id, workspace, turn_ref(turn_id, "end"))
            return Ended(
                changes=summary(await self.store.counts(session_id, workspace, start, end))
            )
        except (TooLarge, GitError) as exc:
            log.warning("turn %s: workspace not recorded at its end: %s", turn_id, exc)
            return Ended(
                warning=Warning(
                    code="snapshot_skipped",
                    message=f"the workspace was not recorded at this turn's end: {_reason(exc)}",
                )
            )

    def take_notes(self, session_id: str) -> str | None:
        """What the next prompt is to be told (a revert), taken once."""
        return None if self.store is None else self.store.take_notes(session_id)

    # --- reading -------------------------------------------------------------------------

    async def state(self, session_id: str, turn: TurnRecord, moment: Moment) -> str:
        """The recorded state (a tree id) of ``turn`` at its start or end (409 when there is
        none)."""
        store = self._store()
        state = await store.resolve(session_id, turn_ref(turn.id, moment))
        if state is None:
            raise SnapshotUnavailable(
                f"the workspace was not recorded at the {moment} of turn {turn.id} (snapshots "
                "off then, the workspace over their cap, or a failure: the turn's warning "
                "event says which)",
                turn_id=turn.id,
            )
        return state

    async def changes(self, session_id: str, workspace: Path, base: str, target: str) -> Changes:
        try:
            return await self._store().changes(session_id, workspace, base, target)
        except TooLarge as exc:
            raise _too_large(exc) from None

    async def patch(
        self, session_id: str, workspace: Path, base: str, target: str, *, binary: bool
    ) -> bytes:
        try:
            return await self._store().patch(session_id, workspace, base, target, binary=binary)
        except TooLarge as exc:
            raise _too_large(exc) from None

    async def files_after(self, session_id: str, turn: TurnRecord, destination: Path) -> None:
        """Write the files as they were when ``turn`` ended into ``destination``."""
        state = await self.state(session_id, turn, "end")
        await self._store().materialize(session_id, state, destination)

    # --- reverting -----------------------------------------------------------------------

    async def revert(self, session_id: str, workspace: Path, turn: TurnRecord) -> Changes:
        """Put the files back as they were when ``turn`` started, and keep the note that
        tells the agent's next prompt; what changed."""
        state = await self.state(session_id, turn, "start")
        store = self._store()
        try:
            changes = await store.restore(session_id, workspace, state)
        except TooLarge as exc:
            raise _too_large(exc) from None
        store.add_note(session_id, revert_note(turn, changes))
        return changes

    def forget(self, session_ids: list[str]) -> int:
        """Remove the records of sessions retention forgot; how many there were."""
        return 0 if self.store is None else self.store.forget(session_ids)


def _too_large(exc: TooLarge) -> WorkspaceTooLarge:
    return WorkspaceTooLarge(
        exc.detail,
        files=exc.size.files,
        bytes=exc.size.bytes,
        max_files=exc.max_files,
        max_bytes=exc.max_bytes,
    )


def history_for(settings: Settings) -> WorkspaceHistory:
    """The history ``settings`` ask for (``[snapshots]``)."""
    section = settings.snapshots
    if not section.enabled:
        return WorkspaceHistory(None)
    return WorkspaceHistory(
        SnapshotStore(
            settings.snapshots_dir,
            git=section.git,
            max_files=section.max_files,
            max_bytes=section.max_bytes,
            timeout_s=section.timeout_s,
        )
    )


__all__ = ["NOW", "Ended", "WorkspaceHistory", "history_for", "revert_note"]
