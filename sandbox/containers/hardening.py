"""The hardened run settings of a sandbox container, as a pure function of settings and ids.

What :func:`container_run_kwargs` returns goes straight to ``docker.containers.run``:

- non-root user ``1000:1000`` (the images have no sudo), ``cap_drop=["ALL"]``,
  ``security_opt=["no-new-privileges"]``, ``init=True`` (zombie reaping, signal forwarding);
- ``pids_limit``, ``mem_limit`` equal to ``memswap_limit`` (no swap on top), ``nano_cpus``;
- json-file logs rotated by size (``max-size`` / ``max-file``);
- labels for the reaper (:mod:`sandbox.containers.labels`);
- mounts: the sandbox's own workspace volume at ``/workspace`` and the optional CA bundle
  read-only. Never the Docker socket, and nothing writable that another sandbox also mounts:
  npm's cache (:data:`NPM_CACHE_DIR`) is the sandbox's own, because a shared cache let one
  sandbox rewrite the packages another one installs;
- with a disk quota (:mod:`sandbox.containers.disk_quota`): a read-only root filesystem, and
  home, ``/tmp`` and ``/var/tmp`` bound from the sandbox's quota-limited subvolume, so all it
  can write counts against its quota. Without one, npm's cache and temporary files are in the
  container's writable layer;
- npm is pinned to kiln's npm proxy (:mod:`sandbox.containers.npm_proxy`) and a user config
  the sandbox user cannot write (:data:`KILN_NPMRC`), so a workspace ``.npmrc`` cannot redirect
  it. The host's proxy variables are not forwarded: they may carry credentials, and generated
  code reads its environment (the npm proxy alone uses them);
- the sandbox's internal network only, always: installs reach the npm proxy on its gateway;
- a small tmpfs at :data:`~sandbox.images.templates.APP_ENV_DIR`, root's and read-only to the
  sandbox user, for the app's environment (:mod:`sandbox.execution.app_env`): memory only, so a
  secret never lands on the host's disk, and outside ``/workspace``, so never in the project.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docker.types import LogConfig

from sandbox.containers.disk_quota import QuotaDisk
from sandbox.containers.labels import container_name, sandbox_labels
from sandbox.images.templates import APP_ENV_DIR, SANDBOX_UID, WORKSPACE, Template
from sandbox.settings import SandboxSettings

NPM_CACHE_DIR = "/home/node/.npm"  # in the sandbox's home: its own
DEFAULT_NPM_REGISTRY = "https://registry.npmjs.org/"
# Under root-owned /etc: the sandbox user can neither create nor change it.
KILN_NPMRC = "/etc/kiln/npmrc"
CA_BUNDLE_PATH = "/etc/kiln/ca-bundle.pem"
SANDBOX_USER = f"{SANDBOX_UID}:{SANDBOX_UID}"
HOSTNAME = "sandbox"
# Root's (Docker's default owner of a tmpfs), readable by all; room for the app's bounded
# variables (the app caps them at 64 KiB, written twice: shell and JSON) with some to spare.
APP_ENV_TMPFS = {APP_ENV_DIR: "size=512k,mode=0755"}


def npm_registry(settings: SandboxSettings) -> str:
    """The registry every npm call of a sandbox uses: kiln's npm proxy, once the manager knows
    its address (``sandbox_registry``). Before that, npm's default, which a sandbox cannot
    reach: there is no way out but the proxy."""
    return settings.sandbox_registry or DEFAULT_NPM_REGISTRY


def sandbox_environment(settings: SandboxSettings) -> dict[str, str]:
    """The container's environment: npm cache, registry, user config and the optional CA bundle.

    ``docker exec`` inherits it, so installs and commands see the same settings. No proxy
    variables: see the module docstring.
    """
    env = {
        "npm_config_cache": NPM_CACHE_DIR,
        "npm_config_registry": npm_registry(settings),
        "npm_config_userconfig": KILN_NPMRC,
        "npm_config_update_notifier": "false",
        "npm_config_fund": "false",
        "npm_config_audit": "false",
    }
    if settings.ca_bundle is not None:
        env["NODE_EXTRA_CA_CERTS"] = CA_BUNDLE_PATH
        env["npm_config_cafile"] = CA_BUNDLE_PATH
    return env


def sandbox_mounts(
    settings: SandboxSettings, volume: str, disk: QuotaDisk | None = None
) -> dict[str, dict[str, str]]:
    """The ``volumes`` argument: the sandbox's own workspace, its quota-limited home and
    temporary folders when its volume is on a ``disk``, and the (read-only) CA bundle."""
    mounts = {volume: {"bind": WORKSPACE, "mode": "rw"}}
    if disk is not None:
        for folder, target in disk.binds(volume).items():
            mounts[folder] = {"bind": target, "mode": "rw"}
    if settings.ca_bundle is not None:
        mounts[str(Path(settings.ca_bundle).resolve())] = {"bind": CA_BUNDLE_PATH, "mode": "ro"}
    return mounts


def object_labels(
    settings: SandboxSettings,
    template: str,
    sandbox_id: str,
    *,
    created: float,
    owner: str = "",
    chat: str = "",
) -> dict[str, str]:
    """The labels of a sandbox's container, network and volume (expiry from the lifetime)."""
    return sandbox_labels(
        sandbox_id,
        settings.instance,
        template=template,
        owner=owner,
        chat=chat,
        created=created,
        expiry=created + settings.max_lifetime_seconds,
        extra=settings.extra_labels,
    )


def container_run_kwargs(
    settings: SandboxSettings,
    template: Template,
    sandbox_id: str,
    *,
    volume: str,
    network: str,
    created: float,
    owner: str = "",
    chat: str = "",
    disk: QuotaDisk | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``client.containers.run`` that start one hardened sandbox
    (with a disk quota when its volume is on ``disk``)."""
    labels = object_labels(
        settings, template.name, sandbox_id, created=created, owner=owner, chat=chat
    )
    return {
        "image": template.image,
        "command": list(template.dev_command),
        "name": container_name(sandbox_id),
        "hostname": HOSTNAME,
        "detach": True,
        "user": SANDBOX_USER,
        "working_dir": WORKSPACE,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "init": True,
        "pids_limit": settings.pids_limit,
        "mem_limit": settings.mem_limit,
        "memswap_limit": settings.mem_limit,
        "nano_cpus": settings.nano_cpus,
        "log_config": LogConfig(
            type=LogConfig.types.JSON,
            config={"max-size": settings.log_max_size, "max-file": str(settings.log_max_files)},
        ),
        "labels": labels,
        "environment": sandbox_environment(settings),
        "volumes": sandbox_mounts(settings, volume, disk),
        "tmpfs": APP_ENV_TMPFS,
        # With a disk quota nothing outside its folders may be writable (module docstring).
        "read_only": disk is not None,
        "network": network,
    }
