"""The handle a caller gets for one sandbox (see
:class:`sandbox.lifecycle.manager.SandboxManager`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A handle on one sandbox; its address is valid until the container is replaced."""

    id: str
    template: str
    container_id: str
    volume: str
    network: str
    ip: str
    dev_port: int
    owner: str = ""
    chat: str = ""
    # ``host:port`` where kiln reaches the dev server, when the backend says where (a swarm
    # node's preview relay); "" means the container's address and the dev port.
    preview: str = ""

    @property
    def dev_url(self) -> str:
        """The dev server's URL, reachable from the host."""
        return f"http://{self.preview or f'{self.ip}:{self.dev_port}'}"
