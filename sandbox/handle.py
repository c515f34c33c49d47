"""The handle a caller gets for one sandbox (see
:class:`sandbox.lifecycle.manager.SandboxManager`)."""

from __future__ import annotations

from dataclasses import dataclass

from sandbox.images.templates import get_template
from sandbox.lifecycle.registry import SandboxRecord


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

    @property
    def dev_url(self) -> str:
        """The dev server's URL, reachable from the host."""
        return f"http://{self.ip}:{self.dev_port}"

    @classmethod
    def from_record(cls, record: SandboxRecord) -> Sandbox:
        """The handle for a registry record."""
        return cls(
            id=record.id,
            template=record.template,
            container_id=record.container_id,
            volume=record.volume,
            network=record.network,
            ip=record.ip,
            dev_port=get_template(record.template).dev_port,
            owner=record.owner,
            chat=record.chat,
        )
