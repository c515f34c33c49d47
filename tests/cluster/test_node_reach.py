"""Which nodes the swarm backend avoids: one whose engine failed a call, until a ping answers
(the real thing: the node loss test of tests/cluster/test_swarm_end_to_end.py)."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.cluster import node_reach
from sandbox.cluster.node_reach import NodeReach
from sandbox.errors import DockerUnavailable

pytestmark = pytest.mark.anyio


class Engine:
    """A stand-in client whose ping answers while ``up``."""

    def __init__(self, up: bool) -> None:
        self.up = up
        self.closed = 0

    def ping(self) -> bool:
        if not self.up:
            raise DockerUnavailable("docker: engine unreachable")
        return True

    def close(self) -> None:
        self.closed += 1


async def test_a_failed_node_is_avoided_until_a_ping_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = Engine(up=False)
    back: list[str] = []
    reach = NodeReach(lambda url: engine, back.append)  # type: ignore[arg-type,return-value]
    assert await reach.answers("n1", "unix:///n1.sock")
    assert reach.constraints() == []
    reach.failed("n1", "refused")
    assert reach.constraints() == ["node.id!=n1"]
    assert not await reach.answers("n1", "unix:///n1.sock")  # within the recheck: no ping
    assert engine.closed == 0
    monkeypatch.setattr(node_reach, "RECHECK_SECONDS", 0.0)
    assert not await reach.answers("n1", "unix:///n1.sock")  # pinged: still down
    assert back == []
    engine.up = True
    assert await reach.answers("n1", "unix:///n1.sock")
    assert back == ["n1"]  # told once it answers again: its set-up is checked anew
    assert reach.constraints() == []
    assert engine.closed == 2


def test_nodes_are_named_in_a_stable_order() -> None:
    reach = NodeReach(lambda url: Any)  # type: ignore[arg-type,return-value]
    for node in ("b", "a"):
        reach.failed(node, "refused")
    assert reach.constraints() == ["node.id!=a", "node.id!=b"]
