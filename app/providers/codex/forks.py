"""Codex's own fork of a thread: ``thread/fork`` through its N-th turn, on an app-server.

    thread/turns/list {threadId, sortDirection: asc, limit: N}   ─► the N-th turn's id
    thread/fork {threadId, lastTurnId, cwd, model, approvalPolicy, sandbox, config,
                 excludeTurns: true}                                ─► the new thread's id

Observed with codex-cli 0.171.0 (``app-server generate-json-schema``, and against the stub):
0.171.0 has no ``thread/rollback``; ``thread/fork`` takes ``lastTurnId`` ("fork through,
inclusive") and the fork's next model request holds the turns up to it only. A forked
thread's rollout records its lineage rather than a copy of the parent's history: it is
resumed only where the parent's rollout is too ("invalid paginated history lineage …:
missing source rollout"). So with the sandbox on (a Codex home per session) the parent's
rollouts are copied into the fork's home first, and the fork is made by a server started in
the fork's own sandbox, which resumes the parent's thread first (a server lists no turns of a
thread it has not loaded); with it off, the shared server makes it. Without ``model`` the fork
runs Codex's default model (and compacts the history for it first): it is always given.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from app.providers.base import ForkedThread, ForkFailed, ForkRequest, SessionSpec
from app.providers.codex.argv import thread_config, thread_policy
from app.providers.codex.jsonrpc import JsonRpcClient, RpcError, RpcFailure
from app.providers.codex.server import ServerUnavailable
from app.providers.shared_server import Placement

if TYPE_CHECKING:
    from app.providers.codex.server import CodexServer
    from app.providers.hosting import ServerProvider

    CodexProvider = ServerProvider[Any, CodexServer]

__all__ = ["discard_thread", "fork_thread"]

CODEX_HOME = ".codex"
"""``CODEX_HOME`` inside a sandboxed session's home (the descriptor's ``config_dirs``)."""


async def fork_thread(provider: CodexProvider, request: ForkRequest) -> ForkedThread:
    """The fork of the parent's thread through its ``keep_turns``-th turn, for the child's
    workspace (``ForkFailed`` when Codex refuses or fails)."""
    server, own = _server(provider, request.child)
    try:
        if own:
            await asyncio.to_thread(_copy_rollouts, provider, request)
        client = await server.client()
        thread_id = await _fork(client, server, request, load=own)
    except (RpcError, RpcFailure, ServerUnavailable, OSError, KeyError, TypeError) as exc:
        raise ForkFailed(f"Codex could not fork the thread: {exc}") from None
    finally:
        if own:
            await server.aclose()
    return ForkedThread(thread_id=thread_id)


async def discard_thread(provider: CodexProvider, spec: SessionSpec, thread_id: str) -> None:
    """Delete a fork made for a session that was not created (the shared server's; a
    sandboxed session's home, where its own would be, is removed with it)."""
    if provider.sandbox.on:
        return
    client = await provider.server.client()
    await client.request(
        "thread/delete", {"threadId": thread_id}, timeout_s=provider.server.request_timeout_s
    )


def _server(provider: CodexProvider, child: SessionSpec) -> tuple[CodexServer, bool]:
    """The server that makes the fork, and whether it is one started for it (in the child's
    sandbox: the fork's rollout is written to the child's Codex home)."""
    if not provider.sandbox.on:
        return provider.server, False
    placement = Placement(
        sandbox=provider.sandbox,
        session_id=child.session_id,
        workspace=child.workspace,
        roots=provider.workspace_roots,
        git_dir=child.git_dir,
    )
    return provider.make_server(placement), True


async def _fork(
    client: JsonRpcClient, server: CodexServer, request: ForkRequest, *, load: bool
) -> str:
    """``load``: the parent's thread is resumed first (a server started for the fork over
    copied rollouts lists no turns of a thread it has not loaded: 0.171.0, observed)."""
    parent, child = request.parent, request.child
    timeout_s = server.request_timeout_s
    policy, sandbox = thread_policy(child.approval_mode)
    settings: dict[str, JsonValue] = {
        "cwd": str(child.workspace),
        "approvalPolicy": policy,
        "sandbox": sandbox,
        "config": thread_config(child.workspace),
        "excludeTurns": True,
    }
    if child.model is not None:
        settings["model"] = child.model
    if load:
        resume = {"threadId": parent.thread_id, **settings}
        await client.request("thread/resume", resume, timeout_s=timeout_s)
    listed = await client.request(
        "thread/turns/list",
        {"threadId": parent.thread_id, "sortDirection": "asc", "limit": request.keep_turns},
        timeout_s=timeout_s,
    )
    turns: list[Any] = listed["data"]
    if len(turns) < request.keep_turns:
        raise ForkFailed(
            f"thread {parent.thread_id} has {len(turns)} turns, fewer than the "
            f"{request.keep_turns} to keep"
        )
    params: dict[str, JsonValue] = {
        "threadId": parent.thread_id,
        "lastTurnId": str(turns[request.keep_turns - 1]["id"]),
        **settings,
    }
    result = await client.request("thread/fork", params, timeout_s=timeout_s)
    thread_id = result["thread"]["id"]
    if not isinstance(thread_id, str) or not thread_id:
        raise TypeError("thread/fork returned no thread id")
    return thread_id


def _copy_rollouts(provider: CodexProvider, request: ForkRequest) -> None:
    """Copy the parent's rollouts (its threads and their lineage) into the child's home."""
    sandbox = provider.sandbox
    source = sandbox.home(request.parent.session_id) / CODEX_HOME / "sessions"
    if not source.is_dir():
        raise ForkFailed(f"no Codex threads under {source}")
    home = sandbox.home(request.child.session_id)
    home.mkdir(mode=0o700, exist_ok=True)
    target: Path = home / CODEX_HOME / "sessions"
    target.parent.mkdir(mode=0o700, exist_ok=True)
    shutil.copytree(source, target, symlinks=False, dirs_exist_ok=True)
