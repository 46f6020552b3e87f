"""Planned ports (client/cluster.py): free, below the ephemeral range, and passed by for a while by other planners
while the server they were planned for can still bind them."""

from __future__ import annotations

import socket

import pytest

from client.cluster import _ephemeral_range, free_port, free_port_range


def test_a_planned_port_is_passed_by_other_planners_but_bindable_by_a_server() -> None:
    port = free_port()
    assert 10_000 <= port < _ephemeral_range()[0]
    with socket.socket() as other_planner, socket.socket() as server:
        with pytest.raises(OSError):  # how another planner checks a port
            other_planner.bind(("127.0.0.1", port))
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()


def test_planned_ports_do_not_repeat() -> None:
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    base = free_port_range(3)
    assert not {base, base + 1, base + 2} & set(ports)
