"""A sandbox as a one-replica Swarm service, from the same hardening table as ``docker run``.

:func:`sandbox.containers.hardening.container_run_kwargs` stays the one statement of how a
sandbox is hardened. This module carries each of its keys into a service (:data:`CARRIED`), or
names what the node's engine must provide because a service cannot express it
(:data:`NODE_PROVIDES`: the daemon flag, and how it is checked on a node,
:mod:`sandbox.cluster.node_checks`). A key in neither table is refused
(:class:`~sandbox.errors.SandboxConfigError`), so a new hardening setting cannot be dropped
silently on a swarm.

What the swarm adds (:func:`sandbox_service_kwargs`):

- resources: the memory limit is also the memory *reservation*, so the scheduler places a
  sandbox only on a node with that much unreserved memory (per-node capacity; a full cluster
  leaves the task pending); CPU is limited, not reserved (sandboxes idle most of the time);
- placement: the scheduler's own spread (a one-replica service goes to the node with the fewest
  tasks), optional spread preferences over node labels, and constraints (always Linux nodes);
- ``restart_policy`` none: a sandbox that dies is an event kiln handles (restore elsewhere),
  never a fresh empty container the swarm starts behind kiln's back;
- endpoint mode ``dnsrr``: no virtual IP (the routing mesh needs IPVS, which nodes may lack,
  and kiln reaches a sandbox on its node, never through a service address).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from docker.types import EndpointSpec, Mount, Resources, RestartPolicy

from sandbox.containers.disk_quota import QuotaDisk
from sandbox.containers.hardening import container_run_kwargs
from sandbox.containers.labels import volume_name
from sandbox.env_settings import size_bytes
from sandbox.errors import SandboxConfigError
from sandbox.images.templates import Template
from sandbox.settings import SandboxSettings

ENGINE_LABEL = "kiln.engine"  # a swarm node's label: the URL of that node's own engine
LINUX_ONLY = "node.platform.os==linux"


@dataclass(frozen=True)
class NodeRequirement:
    """A hardening setting a service cannot carry: what the node's engine must provide."""

    setting: str  # the ``docker run`` keyword it stands for
    daemon_flag: str  # how an operator provides it
    why: str


NODE_PROVIDES: dict[str, NodeRequirement] = {
    "security_opt": NodeRequirement(
        "security_opt=no-new-privileges",
        "dockerd --no-new-privileges",
        "a service has no --security-opt; the daemon flag applies it to every container",
    ),
    "memswap_limit": NodeRequirement(
        "memswap_limit=mem_limit",
        "a node without swap, or kiln's `docker update --memory-swap` on the node engine",
        "a service has no swap limit; the engine then allows swap of twice the memory",
    ),
}
# Keys of ``docker run`` that mean nothing for a service.
NOT_APPLICABLE = frozenset({"detach"})


def _mounts(volumes: Mapping[str, Mapping[str, str]]) -> list[Mount]:
    """``volumes`` of ``docker run`` as service mounts: named volumes (made on the node when
    the task starts) and absolute host paths (which the node must have)."""
    return [
        Mount(
            target=spec["bind"],
            source=source,
            type="bind" if source.startswith("/") else "volume",
            read_only=spec.get("mode") == "ro",
        )
        for source, spec in volumes.items()
    ]


def _tmpfs_mounts(tmpfs: Mapping[str, str]) -> list[Mount]:
    """``tmpfs`` of ``docker run`` (``size=…,mode=…``) as tmpfs service mounts."""
    mounts = []
    for target, options in tmpfs.items():
        parts = dict(option.split("=", 1) for option in options.split(","))
        mounts.append(
            Mount(
                target=target,
                source=None,
                type="tmpfs",
                tmpfs_size=size_bytes(parts["size"]),
                tmpfs_mode=int(parts["mode"], 8),
            )
        )
    return mounts


def _log(config: Any) -> dict[str, Any]:
    return {"log_driver": config["Type"], "log_driver_options": dict(config["Config"])}


# ``docker run`` keyword -> its part of ``services.create``'s arguments. Lists are joined and
# "limits" merged by :func:`sandbox_service_kwargs`.
CARRIED: dict[str, Callable[[Any], dict[str, Any]]] = {
    "image": lambda v: {"image": v},
    "command": lambda v: {"command": list(v)},
    "name": lambda v: {"name": v},
    "hostname": lambda v: {"hostname": v},
    "user": lambda v: {"user": v},
    "working_dir": lambda v: {"workdir": v},
    "cap_drop": lambda v: {"cap_drop": list(v)},
    "init": lambda v: {"init": v},
    "read_only": lambda v: {"read_only": v},
    "environment": lambda v: {"env": [f"{k}={value}" for k, value in v.items()]},
    "labels": lambda v: {"labels": dict(v), "container_labels": dict(v)},
    "network": lambda v: {"networks": [v]},
    "volumes": lambda v: {"mounts": _mounts(v)},
    "tmpfs": lambda v: {"mounts": _tmpfs_mounts(v)},
    "log_config": _log,
    "mem_limit": lambda v: {"limits": {"MemoryBytes": size_bytes(v)}},
    "nano_cpus": lambda v: {"limits": {"NanoCPUs": v}},
    "pids_limit": lambda v: {"limits": {"Pids": v}},  # Engine API 1.41 (Docker 20.10)
}


def carried_kwargs(run_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The service arguments :data:`CARRIED` makes of ``run_kwargs``; refuses a key that is
    in no table (module docstring)."""
    unknown = set(run_kwargs) - set(CARRIED) - set(NODE_PROVIDES) - NOT_APPLICABLE
    if unknown:
        raise SandboxConfigError(f"hardening settings with no swarm form: {sorted(unknown)!r}")
    merged: dict[str, Any] = {"mounts": [], "limits": {}}
    for key, value in run_kwargs.items():
        for part, carried in CARRIED.get(key, lambda _: {})(value).items():
            if part == "mounts":
                merged["mounts"] += carried
            elif part == "limits":
                merged["limits"].update(carried)
            else:
                merged[part] = carried
    return merged


def sandbox_service_kwargs(
    settings: SandboxSettings,
    template: Template,
    sandbox_id: str,
    *,
    network: str,
    created: float,
    owner: str = "",
    chat: str = "",
    constraints: Sequence[str] = (),
    spread_labels: Sequence[str] = (),
    disk: QuotaDisk | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``client.services.create`` (a manager's client) that start one
    hardened sandbox on a node the swarm picks; ``constraints`` like
    ``node.labels.kiln.sandboxes==true``, ``spread_labels`` node labels to spread over;
    ``disk`` the node's quota-limited disk the workspace volume is on (its folders bound in,
    the root read-only, as on one engine)."""
    run_kwargs = container_run_kwargs(
        settings,
        template,
        sandbox_id,
        volume=volume_name(sandbox_id),
        network=network,
        created=created,
        owner=owner,
        chat=chat,
        disk=disk,
    )
    kwargs = carried_kwargs(run_kwargs)
    limits = kwargs.pop("limits")
    resources = Resources(mem_reservation=limits["MemoryBytes"])
    resources["Limits"] = limits
    kwargs.update(
        resources=resources,
        restart_policy=RestartPolicy(condition="none"),
        endpoint_spec=EndpointSpec(mode="dnsrr"),
        constraints=[LINUX_ONLY, *constraints],
        preferences=[("spread", f"node.labels.{label}") for label in spread_labels],
    )
    return kwargs
