"""Which swarm nodes' engines answer kiln, as kiln has seen it (the swarm backend's memory of lost
nodes).

The manager marks a node ``down`` only after missed heartbeats; until then it keeps scheduling
tasks there. kiln learns sooner, from its own calls to the node's engine: a node whose engine
failed a call is **avoided** (no network set-up there, no volume lookups, and placements
constrained off it: :meth:`NodeReach.constraints`) until a short ping answers again, tried at
most every :data:`RECHECK_SECONDS`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import closing

import docker

from sandbox.docker_boundary import call
from sandbox.errors import SandboxError

RECHECK_SECONDS = 5.0
log = logging.getLogger(__name__)


class NodeReach:
    """The nodes whose engine failed a call, until it answers again."""

    def __init__(
        self,
        ping_client: Callable[[str], docker.DockerClient],
        on_back: Callable[[str], None] | None = None,
    ) -> None:
        """``ping_client(url)``: a short-timeout client of the engine at ``url``; ``on_back``
        is told of a node that answers again (it may have restarted: what kiln set up there
        is to be checked anew)."""
        self._ping_client = ping_client
        self._on_back = on_back
        self._failed: dict[str, float] = {}  # node ID -> when it last failed

    def failed(self, node_id: str, why: object) -> None:
        """The engine of ``node_id`` failed a call."""
        if node_id not in self._failed:
            # Its words only: a log record keeps its arguments, and an exception its frames.
            log.warning("swarm node %r does not answer, avoided: %s", node_id, str(why))
        self._failed[node_id] = time.monotonic()

    async def answers(self, node_id: str, url: str) -> bool:
        """Whether ``node_id``'s engine (at ``url``) is to be used: never failed, or a ping
        answers now (tried at most every :data:`RECHECK_SECONDS`)."""
        failed = self._failed.get(node_id)
        if failed is None:
            return True
        if time.monotonic() - failed < RECHECK_SECONDS:
            return False
        try:
            with closing(self._ping_client(url)) as client:
                await call(client.ping)
        except SandboxError as exc:
            self.failed(node_id, exc)
            return False
        del self._failed[node_id]
        log.warning("swarm node %r answers again", node_id)
        if self._on_back is not None:
            self._on_back(node_id)
        return True

    def constraints(self) -> list[str]:
        """Placement constraints keeping new sandboxes off the avoided nodes."""
        return [f"node.id!={node_id}" for node_id in sorted(self._failed)]
