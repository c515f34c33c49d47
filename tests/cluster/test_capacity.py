"""Where kiln places a sandbox on a swarm: the roomiest reachable node, counting its own
placements in flight (the real nodes' capacity: tests/cluster/test_swarm_sandboxes.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sandbox.cluster.capacity import NodeCapacity, roomiest_node
from sandbox.errors import SandboxCapacity

GIB = 2**30


def node(node_id: str, memory_gib: int, reserved_gib: int, sandboxes: int = 0) -> NodeCapacity:
    return NodeCapacity(
        node_id,
        "",
        "ready",
        "active",
        "tcp://x",
        memory_gib * GIB,
        0,
        reserved_gib * GIB,
        sandboxes,
    )


@pytest.mark.parametrize(
    ("nodes", "reachable", "placing", "picked"),
    [
        pytest.param([node("a", 8, 6), node("b", 8, 2)], {"a", "b"}, {}, "b", id="most-free"),
        pytest.param(
            [node("a", 8, 2), node("b", 8, 2, sandboxes=3)], {"a", "b"}, {}, "a", id="fewer"
        ),
        pytest.param([node("a", 8, 6), node("b", 8, 2)], {"a"}, {}, "a", id="unreachable"),
        pytest.param(
            [node("a", 8, 3), node("b", 8, 2)], {"a", "b"}, {"b": 2 * GIB}, "a", id="placing-now"
        ),
    ],
)
def test_the_roomiest_reachable_node_is_picked(
    nodes: list[NodeCapacity], reachable: set[str], placing: dict[str, int], picked: str
) -> None:
    assert roomiest_node(nodes, GIB, reachable, placing).node_id == picked


def test_no_node_with_room_is_capacity_in_words() -> None:
    full = [node("a", 8, 8), replace(node("b", 8, 0), state="down")]
    with pytest.raises(SandboxCapacity, match=f"no swarm node has {GIB} bytes"):
        roomiest_node(full, GIB, {"a", "b"}, {})


def test_a_drained_node_takes_no_sandbox() -> None:
    drained = replace(node("a", 8, 0), availability="drain")
    assert roomiest_node([drained, node("b", 8, 6)], GIB, {"a", "b"}, {}).node_id == "b"
