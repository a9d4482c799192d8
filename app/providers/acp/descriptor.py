"""The ``acp`` family as the catalog knows it: one descriptor per built-in agent, and the family's
own for the agents an operator adds (``[providers."acp:<name>"] command = [...]``)."""

from __future__ import annotations

from app.providers.acp.agents import BUILTIN, GENERIC, AgentRecipe
from app.providers.acp.provider import CAPABILITIES, AcpProvider, capabilities_of
from app.providers.descriptor import ProviderDescriptor

FAMILY_NAME = "acp"


FAMILY = ProviderDescriptor(
    name=FAMILY_NAME,
    family=True,
    command="",
    npm_package=None,
    capabilities=CAPABILITIES,
    credentials=GENERIC.credentials,
    passthrough=lambda _settings: (),
    build=AcpProvider,
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
        build=AcpProvider,
    )


MEMBERS = tuple(_member(recipe) for recipe in BUILTIN.values())
"""``acp:gemini``, ``acp:copilot``, …: present like every other provider."""
