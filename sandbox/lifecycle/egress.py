"""Egress is a lease, not a ``finally``: who may be on the egress network, and until when.

An install connects its sandbox to the egress network and disconnects it afterwards, in a
shielded ``finally`` (:func:`sandbox.containers.networks.egress_attached`). A kiln process killed
during the install (SIGKILL, a lost host) never runs that ``finally``, and the sandbox would keep
internet access until it is destroyed. So before connecting, the install takes a **lease** with a
deadline (its timeout plus a margin) in Redis, and gives it back after disconnecting;
:func:`reconcile` (run when a manager starts and on every reaper pass) disconnects every container
of the instance that is on the egress network without a live lease.

A lease is live while its deadline has not passed **and** its owner is alive: every manager
process keeps a heartbeat key that expires :data:`HEARTBEAT_TTL_SECONDS` after its last beat, so
the leases of a killed process die with its heartbeat, not minutes later at their deadline.

Keys: ``kiln:egress:<instance>``, a hash of container id -> ``<owner>|<deadline>``;
``kiln:egress-owner:<instance>:<owner>``, the owner's heartbeat.
"""

from __future__ import annotations

import secrets

import docker
import redis.asyncio

from sandbox.containers.docker_boundary import call
from sandbox.containers.labels import INSTANCE_LABEL
from sandbox.containers.networks import disconnect
from sandbox.errors import SandboxNotFound
from sandbox.redis_boundary import wrap_redis_errors

LEASE_MARGIN_SECONDS = 60.0  # past the install's own timeout
HEARTBEAT_TTL_SECONDS = 10.0
HEARTBEAT_EVERY_SECONDS = HEARTBEAT_TTL_SECONDS / 3
HEARTBEAT_MS = int(HEARTBEAT_TTL_SECONDS * 1000)


class EgressLeases:
    """The egress leases of one kiln instance, in Redis."""

    def __init__(self, client: redis.asyncio.Redis, instance: str) -> None:
        """Leases of ``instance`` kept with ``client``, owned by this process."""
        self._redis = client
        self.key = f"kiln:egress:{instance}"
        self._owners = f"kiln:egress-owner:{instance}:"
        self.owner = secrets.token_hex(8)

    async def beat(self) -> None:
        """Say this process is alive (its leases stay live for the heartbeat's TTL)."""
        with wrap_redis_errors("beating the egress heartbeat"):
            await self._redis.set(self._owners + self.owner, b"1", px=HEARTBEAT_MS)

    async def grant(self, container_id: str, until: float) -> None:
        """Allow ``container_id`` on the egress network until ``until`` (and while alive)."""
        await self.beat()
        with wrap_redis_errors(f"granting egress to {container_id[:12]!r}"):
            await self._redis.hset(self.key, container_id, f"{self.owner}|{until!r}")

    async def end(self, container_id: str) -> None:
        """The install is over: the lease is given back."""
        with wrap_redis_errors(f"ending the egress of {container_id[:12]!r}"):
            await self._redis.hdel(self.key, container_id)

    async def live(self, now: float) -> set[str]:
        """Containers whose lease is live at ``now``: before its deadline, its owner alive."""
        return {cid for cid, alive in (await self._leases(now)).items() if alive}

    async def forget_dead(self, now: float) -> None:
        """Drop the leases that are no longer live (their containers are disconnected by now)."""
        dead = [cid for cid, alive in (await self._leases(now)).items() if not alive]
        if dead:
            with wrap_redis_errors("dropping egress leases"):
                await self._redis.hdel(self.key, *dead)

    async def _leases(self, now: float) -> dict[str, bool]:
        """Every lease's container id and whether it is live."""
        with wrap_redis_errors("reading egress leases"):
            leases = {_text(c): _text(v) for c, v in (await self._redis.hgetall(self.key)).items()}
            owners = sorted({value.partition("|")[0] for value in leases.values()})
            alive = {o for o in owners if await self._redis.exists(self._owners + o)}
        return {
            cid: value.partition("|")[0] in alive and float(value.partition("|")[2]) > now
            for cid, value in leases.items()
        }


async def reconcile(
    client: docker.DockerClient, leases: EgressLeases, network: str, instance: str, now: float
) -> list[str]:
    """Disconnect every container of ``instance`` on ``network`` without a live lease;
    the ids disconnected. Other instances' containers are never touched."""
    try:
        egress = await call(client.networks.get, network)
    except SandboxNotFound:
        return []
    attached = list((egress.attrs.get("Containers") or {}).keys())
    allowed = await leases.live(now)
    removed = []
    for container_id in attached:
        if container_id in allowed or not await _of_instance(client, container_id, instance):
            continue
        await disconnect(client, network, container_id)
        removed.append(container_id)
    await leases.forget_dead(now)
    return removed


async def _of_instance(client: docker.DockerClient, container_id: str, instance: str) -> bool:
    try:
        container = await call(client.containers.get, container_id)
    except SandboxNotFound:
        return False
    return bool(container.labels.get(INSTANCE_LABEL) == instance)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
