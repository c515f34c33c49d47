"""A process that takes an egress lease for a sandbox, attaches it, says so, and then waits to be
killed: the install of a kiln process that dies with SIGKILL (tests/sandbox/lifecycle/test_egress).

Usage: python -m tests.sandbox.lifecycle.egress_holder INSTANCE REDIS_URL SANDBOX_ID
"""

from __future__ import annotations

import sys

import anyio

from sandbox.lifecycle.manager import SandboxManager
from tests.sandbox.docker_support import settings_for


async def hold(instance: str, redis_url: str, sandbox_id: str) -> None:
    """Attach the sandbox to the egress network under a lease, print ``attached``, wait."""
    manager = await SandboxManager.open(settings_for(instance, redis_url))
    async with manager, manager._egress(sandbox_id):
        print("attached", flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(hold, *sys.argv[1:4])
