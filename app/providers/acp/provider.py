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
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from app.events import ApprovalMode
from app.process.childspec import child_environment
from app.process.runner import ProcessRunner
from app.providers.acp.agents import AgentRecipe
from app.providers.base import Capabilities, Provider, SessionSpec
from app.providers.raw import merged
from app.settings import LimitsSettings, ProviderSettings

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


def capabilities_of(recipe: AgentRecipe) -> Capabilities:
    """What one member of the family can do: the family's, less a model it cannot choose."""
    return replace(CAPABILITIES, model_choice=recipe.chooses_model)


class AcpProvider(Provider):
    """``acp:<member>``: one recipe (built in, or an operator's ``command``)."""

    capabilities = CAPABILITIES

    def __init__(
        self,
        *,
        name: str,
        recipe: AgentRecipe,
        settings: ProviderSettings,
        executable: str,
        runner: ProcessRunner,
        parent_env: Mapping[str, str] | None = None,
        limits: LimitsSettings | None = None,
        workspace_roots: Sequence[Path] | None = None,
        node22: str | None = None,
    ) -> None:
        self.name = name  # type: ignore[misc]  # one class serves every member of the family
        self.recipe = recipe
        self.capabilities = capabilities_of(recipe)  # type: ignore[misc]  # per member
        self.cli = recipe.title
        self.settings = settings
        self.runner = runner
        self.parent_env = dict(os.environ if parent_env is None else parent_env)
        self.limits = LimitsSettings() if limits is None else limits
        self.workspace_roots = None if workspace_roots is None else tuple(workspace_roots)
        args = settings.command[1:] if settings.command else list(recipe.args)
        self.argv = (executable, *args, *settings.extra_args)
        self.node22 = node22
        self._settings_dir: str | None = None
        self._sessions: set[AcpSession] = set()

    def child_env(self, approval_mode: ApprovalMode) -> dict[str, str]:
        """The agent's environment: passthrough, the recipe's switches, its settings layer,
        Node 22 first on ``PATH`` where it needs it, then ``providers.<name>.env``."""
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
        return child_environment(self.parent_env, passthrough=recipe.passthrough, overlay=overlay)

    def _settings_file(self, recipe: AgentRecipe) -> str:
        assert recipe.settings is not None
        if self._settings_dir is None:
            self._settings_dir = tempfile.mkdtemp(prefix="agent-gateway-acp-")
        path = Path(self._settings_dir) / "settings.json"
        if not path.exists():
            content = merged(recipe.settings.content, self.settings.config)
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                json.dump(content, handle)
        return str(path)

    def open_session(self, spec: SessionSpec) -> AcpSession:
        # The ACP SDK's schema takes half a second to import: only a gateway that opens an
        # ACP session pays it, not every start (nor every command of the CLI).
        from app.providers.acp.session import AcpSession  # noqa: PLC0415

        session = AcpSession(provider=self, spec=spec)
        self._sessions.add(session)
        return session

    def forget(self, session: AcpSession) -> None:
        self._sessions.discard(session)

    async def aclose(self) -> None:
        await asyncio.gather(*(s.close() for s in list(self._sessions)), return_exceptions=True)
        if self._settings_dir is not None:
            shutil.rmtree(self._settings_dir, ignore_errors=True)
            self._settings_dir = None
