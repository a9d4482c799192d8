"""The web console: three static files under ``/console/``, served without a key.

The files are the build of the console's sources (``console/``, TypeScript with Vite; ``make
setup`` writes them into ``app/console/``). They hold no data (the page asks for the key and
sends it on every API call), so these routes are open, like ``/healthz``. Only the files named
in ``FILES`` are served, read from the package once; any other name is a 404, and a checkout
where the console was never built answers 503 saying how to build it. Every answer carries a
strict Content-Security-Policy: the page may load only its own script and style and talk only
to this gateway.

``/`` sends a browser to the console. ``/docs`` and ``/redoc``, where a FastAPI service keeps
its interactive API pages, answer 404 saying where the documentation is: those pages load their
scripts from a CDN, which the policy above forbids.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from app.errors import NotFound, Unavailable

FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
"""The console's files and their media types; nothing else under /console/ is served."""

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; "
        "script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

router = APIRouter(tags=["console"], include_in_schema=False)


NOT_BUILT = "the console is not built here: run `make setup` (it builds console/ into app/console/)"


@cache
def _read(name: str) -> bytes:
    try:
        return files("app").joinpath("console", name).read_bytes()
    except FileNotFoundError:
        raise Unavailable(NOT_BUILT) from None


def _file(name: str) -> Response:
    media_type = FILES.get(name)
    if media_type is None:
        raise NotFound(f"the console has no file {name[:100]!r}; open /console/")
    return Response(_read(name), media_type=media_type, headers=SECURITY_HEADERS)


DOCS_ELSEWHERE = (
    "this gateway serves no interactive API pages (they would load scripts from a CDN). The "
    "API reference is GET /openapi.json (with the admin token) and docs/openapi.json in the "
    "source; the guides are README.md and docs/ in the source; the console is at /console/"
)


@router.get("/")
async def root_redirect() -> RedirectResponse:
    """``/`` → the console (307: the root may serve more one day, so no browser keeps it)."""
    return RedirectResponse("/console/", status_code=307, headers=SECURITY_HEADERS)


@router.get("/docs")
async def docs_elsewhere() -> Response:
    """Where the documentation is, as a 404 problem."""
    raise NotFound(DOCS_ELSEWHERE)


@router.get("/redoc")
async def redoc_elsewhere() -> Response:
    """Where the documentation is, as a 404 problem."""
    raise NotFound(DOCS_ELSEWHERE)


@router.get("/console")
async def console_redirect() -> RedirectResponse:
    """``/console`` → ``/console/``, so the page's relative URLs resolve under it."""
    return RedirectResponse("/console/", status_code=308, headers=SECURITY_HEADERS)


@router.get("/console/")
async def console_index() -> Response:
    """The console page."""
    return _file("index.html")


@router.get("/console/{name}")
async def console_file(name: str) -> Response:
    """One of the console's static files (``FILES``)."""
    return _file(name)
