"""sandbox.cluster.capacity: a node's room for sandboxes (the swarm's own report is tested on
real nodes in tests/cluster/test_swarm_sandboxes.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sandbox.cluster.capacity import NodeCapacity

GIB = 1 << 30
NODE = NodeCapacity(
    node_id="n1",
    address="10.0.0.1",
    state="ready",
    availability="active",
    engine="tcp://10.0.0.1:2376",
    memory_bytes=8 * GIB,
    nano_cpus=4_000_000_000,
    reserved_bytes=3 * GIB,
    sandboxes=3,
)


def test_room_is_the_unreserved_memory_in_sandboxes() -> None:
    assert NODE.room(GIB) == 5
    assert NODE.room(2 * GIB) == 2


def test_an_overcommitted_node_has_no_room() -> None:
    assert replace(NODE, reserved_bytes=9 * GIB).room(GIB) == 0


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"state": "down"}, id="down"),
        pytest.param({"availability": "drain"}, id="drained"),
        pytest.param({"availability": "pause"}, id="paused"),
        pytest.param({"engine": ""}, id="no-engine-label"),
    ],
)
def test_a_node_that_cannot_take_sandboxes_has_no_room(change: dict[str, str]) -> None:
    node = replace(NODE, **change)  # type: ignore[arg-type]
    assert not node.usable
    assert node.room(GIB) == 0
