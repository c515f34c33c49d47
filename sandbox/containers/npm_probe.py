"""Can a sandbox get packages? A short-lived container answers (``kiln doctor``).

The probe runs ``npm view npm version`` in a container of the ``vanilla`` image with the very
settings an install has: the sandbox user, the hardened options, npm's registry (the instance's
npm proxy, started or adopted here: :mod:`sandbox.containers.npm_proxy`) and user config, on the
sandbox network. The answer crosses the proxy to its upstream, so a missing firewall opening for
the proxy, an upstream that is blocked, or a host proxy that needs a CA shows up here, in words,
before a user's first install fails. The container is labelled with the
instance and an expiry, so one left behind by a killed doctor is reaped; it is removed at the end.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, replace
from pathlib import Path

import docker

from sandbox.containers.hardening import (
    CA_BUNDLE_PATH,
    DEFAULT_NPM_REGISTRY,
    SANDBOX_USER,
    npm_registry,
    sandbox_environment,
)
from sandbox.containers.labels import sandbox_labels
from sandbox.containers.networks import ensure_sandbox_network
from sandbox.containers.npm_proxy import ensure_proxy
from sandbox.docker_boundary import call
from sandbox.errors import SandboxError
from sandbox.images.templates import TEMPLATES
from sandbox.settings import SandboxSettings

PROBE_TEMPLATE = "vanilla"
PROBE_TIMEOUT_SECONDS = 45.0
# One attempt, 20 s: npm's own retries back off for over a minute before giving up.
PROBE_COMMAND = ("npm", "view", "--fetch-retries=0", "--fetch-timeout=20000", "npm", "version")
OUTPUT_LIMIT = 4000  # characters of npm's output kept for the report (its first lines say why)


@dataclass(frozen=True, slots=True)
class NpmProbe:
    """What the probe found: whether npm got an answer, the registry, the CA bundle in use
    (``None``: the image's own roots only) and what npm said."""

    ok: bool
    registry: str
    ca_bundle: Path | None
    output: str
    upstream: str = ""  # where the proxy fetches from


async def probe_npm(
    client: docker.DockerClient, settings: SandboxSettings, timeout: float = PROBE_TIMEOUT_SECONDS
) -> NpmProbe:
    """Run the probe from a sandbox-like container on the sandbox network (see above)."""
    await ensure_sandbox_network(client, settings.network, settings.instance)
    settings = replace(settings, sandbox_registry=await ensure_proxy(client, settings))
    now = time.time()
    probe_id = f"doctor-{secrets.token_hex(4)}"
    container = await call(
        client.containers.run,
        TEMPLATES[PROBE_TEMPLATE].image,
        list(PROBE_COMMAND),
        detach=True,
        name=f"kiln-{probe_id}",
        user=SANDBOX_USER,
        environment=sandbox_environment(settings),
        volumes=_ca_mount(settings),
        network=settings.network,
        labels=sandbox_labels(probe_id, settings.instance, created=now, expiry=now + 2 * timeout),
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        mem_limit=settings.mem_limit,
        pids_limit=settings.pids_limit,
    )
    try:
        status = await call(container.wait, timeout=timeout)
        output = (await call(container.logs)).decode(errors="replace")
        ok = status.get("StatusCode") == 0
    except SandboxError:  # the wait timed out: no answer is an answer too
        ok, output = False, f"npm gave no answer within {timeout:.0f} s"
    finally:
        await call(container.remove, force=True)
    upstream = settings.npm_registry or DEFAULT_NPM_REGISTRY
    output = output.strip()[:OUTPUT_LIMIT]
    return NpmProbe(ok, npm_registry(settings), settings.ca_bundle, output, upstream)


def _ca_mount(settings: SandboxSettings) -> dict[str, dict[str, str]]:
    """The CA bundle, read-only where installs find it (none when there is none)."""
    if settings.ca_bundle is None:
        return {}
    return {str(settings.ca_bundle.resolve()): {"bind": CA_BUNDLE_PATH, "mode": "ro"}}
