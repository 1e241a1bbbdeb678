"""The embedded dev server refuses a port another process holds instead of adopting it."""

from __future__ import annotations

import socket

import pytest

from statecore.core._errors import StatecoreError
from statecore.temporal._devserver import port_is_free, start_dev_server


async def test_a_busy_port_is_refused_not_mistaken_for_our_server() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert not port_is_free(port)
        with pytest.raises(StatecoreError, match=f"port {port} is already in use"):
            await start_dev_server(port=port)
    assert port_is_free(port)
