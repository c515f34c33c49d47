"""One data directory per instance: a server claims an explicit ``KILN_INSTANCE`` for its own.

Everything kiln makes in Docker carries its instance's label, and each server reaps, parks and
sweeps by that label. Two servers with the same ``KILN_INSTANCE`` but different data
directories (two registries, two Redis) would each see the other's sandboxes as orphans and
remove them, silently. So a server (``kiln serve``, ``kiln worker``) claims the instance at
start: a volume ``kiln-claim-<instance>``, labelled with the instance (shared: reapers and
parking keep it) and the resolved data directory. Docker's volume create is idempotent and the
first creator's labels stay, so two servers starting at once cannot both win. A server whose
data directory is not the one named refuses to start (:class:`InstanceClaimed`, in words).
Removing that volume releases the claim (the refusal says so), as does ``kiln sandbox reap
--all``, which removes everything of the instance. The default instance is named after the data
directory (:func:`sandbox.settings.instance_for`), so it needs no claim.

Hosts of one deployment (a shared database, issue 28) share their instance on purpose: their
sandboxes are recorded in one Redis registry. Such a host claims the instance for its
deployment (the database's identity, ``deployment``) instead of its data directory: any data
directory of that deployment finds the claim its own; another deployment, or a single-host kiln
on the instance, is still refused.
"""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread

from sandbox.containers.labels import ROLE_LABEL, shared_labels
from sandbox.docker_boundary import call, connect
from sandbox.errors import InstanceClaimed
from sandbox.settings import instance_for

DATA_DIR_LABEL = "kiln.data-dir"
DEPLOYMENT_LABEL = "kiln.deployment"
CLAIM_ROLE = "instance-claim"


def claim_volume_name(instance: str) -> str:
    """The volume whose labels say which data directory holds ``instance``."""
    return f"kiln-claim-{instance}"


async def claim_instance(instance: str, data_dir: Path, deployment: str | None = None) -> None:
    """Claim ``instance`` for ``data_dir``, or for ``deployment`` when given (a host of a
    multi-host deployment), or find it already ours; :class:`InstanceClaimed` when another
    holds it. Nothing to claim for the instance named after ``data_dir``. Call it before a
    sandbox manager of the instance is opened: even closing one removes the instance's network
    when it looks unused."""
    folder = str(data_dir.expanduser().resolve())
    if instance == instance_for(data_dir):
        return
    labels = {**shared_labels(instance), ROLE_LABEL: CLAIM_ROLE, DATA_DIR_LABEL: folder}
    if deployment is not None:
        labels[DEPLOYMENT_LABEL] = deployment
    client = await anyio.to_thread.run_sync(connect)
    try:
        name = claim_volume_name(instance)
        volume = await call(client.volumes.create, name=name, labels=labels)
    finally:
        await call(client.close)
    held = volume.attrs.get("Labels") or {}
    holder = held.get(DATA_DIR_LABEL)
    if held.get(DEPLOYMENT_LABEL) != deployment:
        raise InstanceClaimed(
            f"KILN_INSTANCE {instance!r} belongs to {_holder_words(held)}, not to "
            f"{_holder_words(labels)}: two deployments on one instance would remove each "
            "other's sandboxes. Use another KILN_INSTANCE; to move the instance here, stop the "
            f"kiln holding it and release it with `docker volume rm {name}`"
        )
    if deployment is None and holder != folder:
        raise InstanceClaimed(
            f"KILN_INSTANCE {instance!r} belongs to the data directory {holder!r}, not "
            f"{folder!r}: two data directories on one instance would remove each other's "
            "sandboxes. Use another KILN_INSTANCE (or none: each data directory then has its "
            f"own); to move the instance here, stop the kiln on {holder!r} and release it with "
            f"`docker volume rm {name}`"
        )


def _holder_words(labels: dict[str, str]) -> str:
    """Who a claim's labels name, in words."""
    deployment = labels.get(DEPLOYMENT_LABEL)
    if deployment is None:
        return f"the data directory {labels.get(DATA_DIR_LABEL)!r}"
    return f"the deployment {deployment!r} (a shared database)"
