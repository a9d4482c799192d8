"""OpenCode's own fork of a thread: ``POST /session/{id}/fork`` before the next turn's prompt,
made where each session has a data directory of its own (the sandbox on).

    copy the parent's thread database into the child's home (SQLite's backup: consistent
         while the parent's server runs); in the copy, the parent's thread moves to the
         child's workspace
    a server in the child's sandbox:
      GET   /session/{parent}/message             ─► the user messages: one per turn
      POST  /session/{parent}/fork {messageID?}   ─► the fork, in the child's workspace
            messageID = the (keep_turns + 1)-th user message; none when there is no more
      PATCH /session/{fork} {title, permission}   ─► the child's approval mode

Observed with opencode-ai 1.18.33: the fork copies the messages *before* ``messageID`` (all of
them without one, and all of them too for an id it does not know: the id is always one the
thread listed). Every ``/session/{id}/…`` request runs in that thread's own directory,
whatever ``?directory=`` says, and a thread cannot be moved through the API: the fork lands in
the parent's directory, with the parent's metadata and without its permission ruleset (set
right after). So with the sandbox off (one shared server and database) a fork would run its
agent in the parent's workspace: there is no native fork then, the gateway hands the
conversation over instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.providers.base import ForkedThread, ForkFailed, ForkRequest
from app.providers.opencode.api import ApiError, OpenCodeApi
from app.providers.opencode.permissions import permission_ruleset
from app.providers.shared_server import Placement, ServerUnavailable

if TYPE_CHECKING:
    from app.providers.hosting import ServerProvider
    from app.providers.opencode.server import OpenCodeServer

    OpenCodeProvider = ServerProvider[Any, OpenCodeServer]

__all__ = ["fork_point", "fork_thread"]

DATA_DIR = Path(".local/share/opencode")
"""OpenCode's data directory inside a sandboxed session's home (``XDG_DATA_HOME``)."""


async def fork_thread(provider: OpenCodeProvider, request: ForkRequest) -> ForkedThread | None:
    """The fork of the parent's thread through its ``keep_turns``-th turn, in the child's
    workspace; None with the sandbox off (``ForkFailed`` when OpenCode refuses or fails)."""
    if not provider.sandbox.on:
        return None
    child = request.child
    server = provider.make_server(
        Placement(
            sandbox=provider.sandbox,
            session_id=child.session_id,
            workspace=child.workspace,
            roots=provider.workspace_roots,
            git_dir=child.git_dir,
        )
    )
    try:
        await asyncio.to_thread(_copy_database, provider, request)
        api = await server.ensure()
        thread_id = await _fork(api, request)
    except (ApiError, ServerUnavailable, OSError, sqlite3.Error) as exc:
        raise ForkFailed(f"OpenCode could not fork the thread: {exc}") from None
    finally:
        await server.aclose()
    return ForkedThread(thread_id=thread_id)


def fork_point(messages: list[dict[str, Any]], keep_turns: int) -> str | None:
    """The id of the message the fork stops before: the first of turn ``keep_turns + 1`` (its
    user message), or None when the thread has no such turn. Raises ``ForkFailed`` when it
    has fewer than ``keep_turns`` turns."""
    prompts = [
        m["info"]["id"]
        for m in messages
        if isinstance(m.get("info"), dict) and m["info"].get("role") == "user"
    ]
    if len(prompts) < keep_turns:
        raise ForkFailed(
            f"the thread holds {len(prompts)} user messages, fewer than the {keep_turns} "
            "turns to keep"
        )
    if len(prompts) == keep_turns:
        return None
    point = prompts[keep_turns]
    if not isinstance(point, str) or not point:
        raise ForkFailed(f"user message {keep_turns + 1} of the thread has no id")
    return point


async def _fork(api: OpenCodeApi, request: ForkRequest) -> str:
    parent, child = request.parent, request.child
    assert parent.thread_id is not None
    # Asked from the child's workspace: a sandboxed server sees only that one.
    messages = await api.messages(parent.thread_id, directory=child.workspace)
    before = fork_point(messages, request.keep_turns)
    # What fails from here on is removed with the child's home.
    thread_id, directory = await api.fork(parent.thread_id, before=before)
    if directory != str(child.workspace):
        raise ForkFailed(f"the fork was made in {directory}, not in the new workspace")
    await api.update_session(
        thread_id,
        directory=child.workspace,
        title=f"Agent Gateway {child.session_id}",
        permission=permission_ruleset(child.approval_mode),
    )
    return thread_id


def _copy_database(provider: OpenCodeProvider, request: ForkRequest) -> None:
    """Copy the parent's thread databases into the child's data directory, the parent's
    thread moved there to the child's workspace (where its fork is then made)."""
    sandbox = provider.sandbox
    source = sandbox.home(request.parent.session_id) / DATA_DIR
    databases = sorted(source.glob("*.db")) if source.is_dir() else []
    if not databases:
        raise ForkFailed(f"no OpenCode database under {source}")
    target = sandbox.home(request.child.session_id)
    target.mkdir(mode=0o700, exist_ok=True)
    for part in DATA_DIR.parts:
        target = target / part
        target.mkdir(mode=0o700, exist_ok=True)
    for database in databases:
        with (
            contextlib.closing(sqlite3.connect(database)) as reader,
            contextlib.closing(sqlite3.connect(target / database.name)) as writer,
        ):
            reader.backup(writer)
            moved = writer.execute(
                "UPDATE session SET directory = ? WHERE id = ?",
                (str(request.child.workspace), request.parent.thread_id),
            ).rowcount
            writer.commit()
        if moved == 1:
            return
    raise ForkFailed(f"thread {request.parent.thread_id} is in no database under {source}")
