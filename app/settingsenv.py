"""The ``GATEWAY_*`` environment source of the settings (app/settings.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import EnvSettingsSource


class EnvSource(EnvSettingsSource):
    """``GATEWAY_*`` variables, keeping the case of names under ``providers.<name>.env``.

    pydantic-settings matches variable names case-insensitively by lower-casing them, which
    would turn ``GATEWAY_PROVIDERS__CLAUDE_CODE__ENV__ANTHROPIC_API_KEY`` into a child
    variable named ``anthropic_api_key``; the names the CLI sees are taken from the environment
    as written.
    """

    def explode_env_vars(
        self, field_name: str, field: FieldInfo, env_vars: Mapping[str, str | None]
    ) -> dict[str, Any]:
        exploded = super().explode_env_vars(field_name, field, env_vars)
        if field_name != "providers":
            return exploded
        written = {name.lower(): name for name in os.environ}
        for provider, values in exploded.items():
            overlay = values.get("env") if isinstance(values, dict) else None
            if isinstance(overlay, dict):
                nest = self.env_nested_delimiter
                prefix = f"{self.env_prefix}providers{nest}{provider}{nest}env{nest}".lower()
                values["env"] = {
                    written.get(prefix + key, prefix + key)[len(prefix) :]: value
                    for key, value in overlay.items()
                }
        return exploded
