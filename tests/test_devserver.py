"""The embedded dev server refuses a port another process holds instead of adopting it."""

from __future__ import annotations

import socket

import pytest

from statecore.core._errors import StatecoreError
from statecore.temporal._devserver import DevServer, port_is_free, start_dev_server


async def test_a_busy_port_is_refused_not_mistaken_for_our_server() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert not port_is_free(port)
        with pytest.raises(StatecoreError, match=f"port {port} is already in use"):
            await start_dev_server(port=port)
    assert port_is_free(port)


async def test_a_server_tells_its_own_listening_socket_from_another_process_s() -> None:
    """A port chosen for the server can be taken by another process before the server binds
    it; the other process then answers as if it were the server. ``owns_port`` tells them
    apart (start_dev_server then picks another port)."""
    server = await start_dev_server()
    try:
        assert server.owns_port()
        with socket.socket() as foreign:
            foreign.bind(("127.0.0.1", 0))
            foreign.listen()
            impostor = DevServer(port=foreign.getsockname()[1], ui_port=None)
            impostor.process = server.process  # a server process that does not hold the port
            assert not impostor.owns_port()
    finally:
        server.stop()
