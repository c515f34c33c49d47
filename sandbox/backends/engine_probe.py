"""A short ping of the Docker engine, with a client of its own: whether the engine is away.

The backend's main client waits up to its whole timeout (long, for builds); a ping of a hung
engine must say so within seconds and not hold a thread for minutes
(:class:`~sandbox.lifecycle.outage.EngineWatch` shares the answer between acquires).
"""

from __future__ import annotations

from typing import Any

import anyio
import docker

from sandbox.docker_boundary import call

PING_TIMEOUT_SECONDS = 2.0


class EngineProbe:
    """Pings the engine with a Docker client of its own: the main one waits up to its whole
    timeout (long, for builds), and a ping of a hung engine must say so quickly and not hold a
    thread for minutes."""

    def __init__(self, client: docker.DockerClient) -> None:
        """A probe of the engine ``client`` talks to (its client is made on the first ping)."""
        self._client = client
        self._probe: Any = None  # a docker.DockerClient with a short timeout
        self._making = anyio.Lock()

    async def ping(self) -> None:
        """Raise ``DockerUnavailable`` unless the engine answers within
        :data:`PING_TIMEOUT_SECONDS`."""
        if self._probe is None:
            # The main client's API version: no version request of its own to hang on.
            version = self._client.api.api_version
            async with self._making:  # two first pings at once must not make two clients
                if self._probe is None:
                    self._probe = await call(
                        docker.DockerClient.from_env, timeout=PING_TIMEOUT_SECONDS, version=version
                    )
        await call(self._probe.ping)

    async def aclose(self) -> None:
        """Close the probe's own client, if one was made."""
        if self._probe is not None:
            await call(self._probe.close)
