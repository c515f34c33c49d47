"""The engine probe asks the engine with a client of its own."""

from __future__ import annotations

import docker
import pytest

from sandbox.backends.engine_probe import EngineProbe

pytestmark = pytest.mark.anyio


@pytest.mark.docker
async def test_a_probe_of_the_engine_gets_an_answer_with_a_client_of_its_own() -> None:
    client = docker.from_env()
    probe = EngineProbe(client)
    try:
        await probe.ping()
    finally:
        await probe.aclose()
        client.close()
