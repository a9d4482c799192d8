"""The console's static routes: open, only the three built files, strict security headers,
nothing that loads from elsewhere, HTML written in one place only (sanitized markdown), and
absent from the OpenAPI document."""

from __future__ import annotations

import re
import socket

import httpx
import pytest

from app.api.console import FILES
from tests.gateway import ROOT, GatewayProcess

CONSOLE = ROOT / "app" / "console"
SOURCES = ROOT / "console" / "src"
CSP = (
    "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


def assert_secured(response: httpx.Response) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert response.headers.get(name) == value, (name, response.headers)


def raw_get(port: int, target: bytes) -> tuple[int, bytes, bytes]:
    """GET ``target`` exactly as written (no client-side normalisation): status, head, body."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), head, body


def test_the_console_is_served_without_a_key_with_strict_headers(
    gateway: GatewayProcess,
) -> None:
    with httpx.Client(base_url=gateway.base_url, timeout=10) as anonymous:
        redirect = anonymous.get("/console")
        assert redirect.status_code == 308
        assert redirect.headers["location"] == "/console/"
        assert_secured(redirect)
        index = anonymous.get("/console/")
        assert index.status_code == 200
        assert index.headers["content-type"] == "text/html; charset=utf-8"
        assert index.content == (CONSOLE / "index.html").read_bytes()
        assert_secured(index)
        for name, media_type in FILES.items():
            response = anonymous.get(f"/console/{name}")
            assert response.status_code == 200, name
            assert response.headers["content-type"] == media_type
            assert response.content == (CONSOLE / name).read_bytes()
            assert_secured(response)
        # The page is open; what it shows is not.
        assert anonymous.get("/v1/sessions").status_code == 401


@pytest.mark.parametrize(
    "target",
    [
        b"/console/../pyproject.toml",
        b"/console/%2e%2e/pyproject.toml",
        b"/console/..%2fapi%2fconsole.py",
        b"/console/%2e%2e%2f%2e%2e%2fpyproject.toml",
        b"/console/.%2e/.%2e/etc/passwd",
        b"/console//etc/passwd",
        b"/console/app.js/",
        b"/console/app.js%00",
        b"/console/app.js%2f..%2f..%2fpyproject.toml",
        b"/console/__init__.py",
        b"/console/app.js.map",
        b"/console/INDEX.HTML",
        b"/console/.",
        b"/console/..",
    ],
)
def test_only_the_known_files_are_served(gateway: GatewayProcess, target: bytes) -> None:
    status, head, body = raw_get(gateway.port, target)
    if status == 307:  # the router's trailing-slash redirect, to a known file only
        assert b"\r\nlocation: http://127.0.0.1/console/app.js\r\n" in head.lower()
        return
    assert status in (400, 404), (target, status, body[:200])
    assert b"[project]" not in body
    assert b"root:" not in body
    assert b"import" not in body


def test_the_build_loads_nothing_from_elsewhere() -> None:
    assert sorted(path.name for path in CONSOLE.iterdir()) == sorted(FILES), "run `make setup`"
    page = (CONSOLE / "index.html").read_text()
    assert "style=" not in page  # inline styles would be refused by the CSP
    assert re.findall(r"<script[^>]*>", page) == [
        '<script type="module" crossorigin src="./app.js">'
    ]
    assert re.findall(r"<link[^>]*>", page) == [
        '<link rel="stylesheet" crossorigin href="./app.css">'
    ]
    assert not re.search(r"<script[^>]*>[^<]", page)  # no inline script
    style = (CONSOLE / "app.css").read_text()
    assert "url(" not in style
    assert "@import" not in style
    script = (CONSOLE / "app.js").read_text()
    # The bundle names XML namespaces and documentation pages in strings; it never loads one.
    assert not re.search(r"""(import\(|fetch\(|importScripts\()\s*["'`]https?:""", script)
    assert "new WebSocket(" not in script


def test_the_sources_write_html_only_from_the_sanitizer() -> None:
    """Agent, tool and gateway text is placed as text by Preact; the one exception is the
    agent's markdown, rendered by marked and sanitized by DOMPurify (console/src/markdown.ts)
    before ui/Markdown.tsx sets it."""
    writers: dict[str, list[str]] = {}
    for path in SOURCES.rglob("*.ts*"):
        text = path.read_text()
        for sink in (
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "dangerouslySetInnerHTML",
            "new Function",
        ):
            if sink in text:
                writers.setdefault(str(path.relative_to(SOURCES)), []).append(sink)
    assert writers == {"ui/Markdown.tsx": ["innerHTML"]}
    markdown = (SOURCES / "ui" / "Markdown.tsx").read_text()
    assert "innerHTML = renderMarkdown(text)" in markdown
    assert "DOMPurify.sanitize(" in (SOURCES / "markdown.ts").read_text()


def test_the_console_is_not_in_the_openapi_document(gateway: GatewayProcess) -> None:
    with gateway.client() as client:
        document = client.get("/openapi.json").json()
    assert not [path for path in document["paths"] if path.startswith("/console")]
