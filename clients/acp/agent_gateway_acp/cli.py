"""``agent-gateway-acp`` (and ``agent-gateway acp``): the command an editor starts."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import TextIO

from agent_gateway_acp import __version__
from agent_gateway_acp.endpoint import UrlError, acp_endpoint
from agent_gateway_acp.relay import Relay
from agent_gateway_acp.stdio import EditorPipe

URL_ENV = "AGENT_GATEWAY_URL"
TOKEN_ENV = "AGENT_GATEWAY_TOKEN"  # noqa: S105 - the variable's name, not a key
PROG = "agent-gateway-acp"

DESCRIPTION = """\
Run an Agent Gateway as a local Agent Client Protocol agent. An editor (Zed, JetBrains,
Neovim's CodeCompanion, ...) starts this command and speaks ACP to it on stdin and stdout,
one JSON-RPC message a line; each message goes to the gateway's /v1/acp WebSocket and back.
When the connection drops it reconnects (backing off, up to 10 s between attempts), reopens
the editor's sessions where they were and settles a prompt that was running: the editor sees
one unbroken agent."""

EPILOG = f"""\
environment:
  {URL_ENV}    the gateway's URL, when --url is not given
  {TOKEN_ENV}  the gateway key (required). It is read only from the environment,
                       never from an option: a command line is visible to every user
                       of the machine (ps).

Logs go to stderr (or --log-file), never to stdout: stdout is the editor's protocol.
Exit status: 0 when the editor closes stdin (or on SIGTERM/SIGINT); 1 when the first
connection cannot be made or the relay fails; 2 for a missing or unusable URL or key, or a
key the gateway refuses (a request the editor already sent is answered with the reason)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The relay's options, for this command and for ``agent-gateway acp``."""
    parser.add_argument(
        "--url",
        default=os.environ.get(URL_ENV),
        help=f"the gateway, http(s)://host:port[/prefix] (default: ${URL_ENV}); "
        "/v1/acp is appended and http becomes ws, https wss",
    )
    parser.add_argument(
        "--log-file", type=Path, help="append the log to this file instead of stderr"
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="how much to log (default: info)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")


def parser(prog: str = PROG) -> argparse.ArgumentParser:
    built = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(built)
    return built


def configure_logging(level: str, log_file: Path | None) -> None:
    """The relay's log to ``log_file`` or stderr, never stdout."""
    handler: logging.Handler
    if log_file is None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(f"{PROG}: %(message)s"))
    else:
        handler = logging.FileHandler(log_file, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger("agent_gateway_acp")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    websockets = logging.getLogger("websockets")
    websockets.handlers[:] = [handler]
    websockets.setLevel(logging.WARNING)
    websockets.propagate = False


def _refuse(message: str, stderr: TextIO) -> int:
    stderr.write(f"{PROG}: {message}\n")
    return 2


def main(argv: list[str] | None = None, *, prog: str = PROG) -> int:
    args = parser(prog).parse_args(argv)
    if not args.url:
        return _refuse(f"no gateway URL: pass --url or set {URL_ENV}", sys.stderr)
    try:
        url = acp_endpoint(args.url)
    except UrlError as exc:
        return _refuse(str(exc), sys.stderr)
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        return _refuse(f"no gateway key: set {TOKEN_ENV}", sys.stderr)
    try:
        configure_logging(args.log_level, args.log_file)
    except OSError as exc:
        return _refuse(f"cannot write the log file: {exc}", sys.stderr)
    return asyncio.run(Relay(url=url, token=token, editor=EditorPipe()).run())
