"""The sandbox handle built from a registry record."""

from __future__ import annotations

from sandbox.handle import Sandbox
from sandbox.lifecycle.registry import SandboxRecord


def test_a_handle_carries_the_record_and_the_templates_dev_url() -> None:
    record = SandboxRecord(
        id="abc",
        template="vite-react",
        volume="kiln-ws-abc",
        network="kiln-net-abc",
        container_id="c1",
        ip="172.18.0.2",
        owner="u1",
        chat="c1",
    )
    sandbox = Sandbox.from_record(record)
    assert (sandbox.id, sandbox.container_id, sandbox.volume, sandbox.network) == (
        "abc",
        "c1",
        "kiln-ws-abc",
        "kiln-net-abc",
    )
    assert (sandbox.owner, sandbox.chat) == ("u1", "c1")
    assert sandbox.dev_url == "http://172.18.0.2:5173"
