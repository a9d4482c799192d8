"""The sockets ``serve`` listens on, bound before anything else is started or written, so
that an address it cannot use is said at once, in one line."""

from __future__ import annotations

import errno
import socket


class AddressUnavailable(Exception):
    """The gateway cannot listen on ``server.host``/``server.port``; the message says why and
    what to change."""


def bind(host: str, port: int) -> list[socket.socket]:
    """Sockets bound (not yet listening) on every address ``host`` names, as asyncio's
    ``create_server`` would bind them (``SO_REUSEADDR``; IPv6 sockets IPv6 only); raises
    ``AddressUnavailable``."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise AddressUnavailable(
            f"cannot listen on {where}: {host!r} is not an address of this machine "
            f"({exc.strerror}); set server.host (or --host) to one, e.g. 127.0.0.1"
        ) from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise AddressUnavailable(_bind_refusal(where, exc)) from None
    return sockets


def _bind_refusal(where: str, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {where}: the port is already in use by another program. Stop "
            "it, or choose another port: --port, server.port or GATEWAY_SERVER__PORT"
        )
    if exc.errno == errno.EACCES:
        return (
            f"cannot listen on {where}: permission denied (ports below 1024 need privileges); "
            "choose another port: --port, server.port or GATEWAY_SERVER__PORT"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"cannot listen on {where}: no network interface of this machine has that "
            "address; set server.host (or --host), e.g. 127.0.0.1"
        )
    return f"cannot listen on {where}: {exc.strerror or exc}"
