"""What an ACP thread is set to once it is open: the session mode that asks, and the model.

The mode comes from the recipe (``AgentRecipe.modes``, by the session's approval mode). The
model is the session's ``model``, chosen through the config option of category ``model`` the
agent advertises in its ``session/new`` (or resume, load) answer; an agent that offers no such
option, or does not offer that model, cannot run it, and the turn is refused rather than run
on whatever model the agent is configured with. Without a ``model`` the agent runs its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from acp import RequestError
from acp.client.connection import ClientSideConnection
from acp.schema import (
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectGroup,
    SessionModeState,
)

from app.events import ApprovalMode
from app.providers.acp.agents import AgentRecipe

ConfigOptions = Sequence[SessionConfigOptionSelect | SessionConfigOptionBoolean] | None
"""A thread's config options, as the agent advertised them (None: it has none)."""

_SHOWN = 20
"""How many of the models an agent offers a refusal names."""


def model_option(options: ConfigOptions) -> SessionConfigOptionSelect | None:
    """The agent's model selector: the select option of category ``model`` (else id ``model``)."""
    selects = [o for o in options or () if isinstance(o, SessionConfigOptionSelect)]
    for option in selects:
        if option.category == "model":
            return option
    return next((o for o in selects if o.id == "model"), None)


def offered_models(option: SessionConfigOptionSelect) -> list[str]:
    """Every value the selector offers, groups flattened."""
    values: list[str] = []
    for entry in option.options:
        if isinstance(entry, SessionConfigSelectGroup):
            values += [choice.value for choice in entry.options]
        else:
            values.append(entry.value)
    return values


def model_refusal(model: str, options: ConfigOptions, *, cli: str) -> str | None:
    """Why the agent cannot run ``model`` on this thread, or None when it can."""
    option = model_option(options)
    if option is None:
        return (
            f"{cli} cannot choose a model per session (it offers no model option over ACP), "
            f"so it cannot run {model!r}: leave `model` unset to use the model the agent is "
            "configured with"
        )
    offered = offered_models(option)
    if model in offered:
        return None
    shown = ", ".join(offered[:_SHOWN]) + (", …" if len(offered) > _SHOWN else "")
    return f"{cli} does not offer model {model!r}; it offers: {shown or '(none)'}"


async def apply_model(
    connection: ClientSideConnection,
    thread: str,
    model: str | None,
    options: ConfigOptions,
    *,
    cli: str,
) -> str | None:
    """Set the thread's model to ``model`` (None: the agent's own); why not, if it cannot."""
    if model is None:
        return None
    refusal = model_refusal(model, options, cli=cli)
    if refusal is not None:
        return refusal
    option = model_option(options)
    assert option is not None
    if option.current_value == model:
        return None
    try:
        await connection.set_config_option(config_id=option.id, session_id=thread, value=model)
    except RequestError as exc:
        return f"{cli} refused model {model!r}: {exc}"
    return None


async def apply_mode(
    connection: ClientSideConnection,
    thread: str,
    recipe: AgentRecipe,
    approval_mode: ApprovalMode,
    modes: SessionModeState | None,
    *,
    cli: str,
) -> str | None:
    """Put the thread in the mode of ``approval_mode``; why not, if the agent refused it."""
    wanted = recipe.modes.get(approval_mode) or recipe.modes.get("ask")
    if wanted is None or modes is None:
        return None  # the agent's own default (recipes without modes ask by default)
    available = {mode.id for mode in modes.available_modes}
    if wanted not in available:
        wanted = recipe.modes.get("ask")
    if wanted is None or wanted == modes.current_mode_id:
        return None
    try:
        await connection.set_session_mode(session_id=thread, mode_id=wanted)
    except RequestError as exc:
        return (
            f"{cli} refused session mode {wanted!r}, the one that asks before running tools: {exc}"
        )
    return None
