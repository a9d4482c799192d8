"""Every route requires the token (fail-closed: a new route without it fails this test)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.routing import APIRoute, APIWebSocketRoute

from app.api.security import AUTH_DEPENDENCIES
from app.main import create_app
from app.settings import load_settings

OPEN_ROUTES = {"/healthz", "/console", "/console/", "/console/{name}"}
"""Routes that answer without a token: /healthz says nothing but "ok"; the console's routes
serve its static files only (app/api/console.py; the page asks for a key itself)."""


def _calls(dependant: object) -> set[object]:
    found = {getattr(dependant, "call", None)}
    for child in getattr(dependant, "dependencies", []):
        found |= _calls(child)
    return found


def _flatten(routes: list[Any]) -> list[Any]:
    """Routes, with those of included routers (FastAPI keeps them nested) listed too."""
    flat: list[Any] = []
    for route in routes:
        included = getattr(route, "original_router", None)
        flat.extend(_flatten(list(included.routes)) if included is not None else [route])
    return flat


def test_every_api_route_depends_on_the_token(tmp_path: Path) -> None:
    settings = load_settings(
        storage={"data_dir": str(tmp_path)}, workspaces={"roots": [str(tmp_path)]}
    )
    app = create_app(settings)
    checked = 0
    open_routes: set[str] = set()
    for route in _flatten(list(app.routes)):
        if isinstance(route, APIRoute):
            if route.path in OPEN_ROUTES:
                assert not AUTH_DEPENDENCIES & _calls(route.dependant)
                assert route.methods == {"GET"}, f"{route.path} is open for reading only"
                open_routes.add(route.path)
                continue
            assert AUTH_DEPENDENCIES & _calls(route.dependant), f"{route.path} has no token check"
            checked += 1
        elif isinstance(route, APIWebSocketRoute):
            source = route.endpoint.__code__.co_names
            assert "require_ws_token" in source, f"{route.path} has no token check"
            checked += 1
        else:
            raise AssertionError(f"unexpected route {route!r}: every route must be an API route")
    assert checked >= 15
    assert open_routes == OPEN_ROUTES


def test_metrics_answer_without_a_key_only_when_metrics_public_is_set(tmp_path: Path) -> None:
    for public in (False, True):
        settings = load_settings(
            server={"metrics_public": public}, storage={"data_dir": str(tmp_path)}
        )
        (route,) = [
            r
            for r in _flatten(list(create_app(settings).routes))
            if isinstance(r, APIRoute) and r.path == "/metrics"
        ]
        assert bool(AUTH_DEPENDENCIES & _calls(route.dependant)) is not public
