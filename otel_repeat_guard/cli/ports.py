"""Whether the dashboard's port is free, asked before anything is printed or started.

Streamlit finds a taken port only after the CLI has announced the dashboard's address, and then
says so in its own words and exits 1. The CLI asks first, the way Streamlit's server binds (every
address the host resolves to, with ``SO_REUSEADDR``, so a socket in TIME_WAIT is not "busy"), and
refuses in one line with exit code 2. A port taken between this check and Streamlit's bind still
gets Streamlit's own message: the check narrows the gap, it cannot close it.
"""

from __future__ import annotations

import errno
import socket


def busy_port(host: str, port: int, *, choose_with: str = "--port") -> str | None:
    """Why ``host:port`` cannot be listened on, in one line, or None when it can. ``choose_with`` is how the
    user chooses another port where the command was started (``make demo PORT=…`` under the Makefile)."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        return f"cannot listen on {host}: {exc.strerror or exc}"
    for family, kind, proto, _, address in addresses:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"port {port} on {host} is in use: stop what listens there or choose another with {choose_with}"
            if exc.errno == errno.EADDRNOTAVAIL:  # the address, not the port: no interface of this host has it
                return f"{host} is no address of this machine: give one of its own with --host (127.0.0.1 by default)"
            return f"port {port} on {host} cannot be bound: {exc.strerror or exc}"
    return None
