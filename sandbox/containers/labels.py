"""The Docker labels kiln puts on everything it creates, and the names derived from a sandbox id.

Every container, network and volume carries ``kiln.sandbox`` (the sandbox id, or ``shared`` for the
shared sandbox network and the npm proxy's container and cache volume) and ``kiln.instance`` (which
deployment or test session made it). The reaper finds its objects by these labels alone, so a crash
that loses the Redis registry still leaves nothing it cannot find. Labels are fixed at creation: a
warm-pool container's owner and chat labels stay empty, and its assignment lives in the registry.
"""

from __future__ import annotations

from sandbox.settings import LABEL

SHARED = "shared"  # the value of ``kiln.sandbox`` on objects every sandbox of an instance uses
INSTANCE_LABEL = "kiln.instance"
OWNER_LABEL = "kiln.owner"
CHAT_LABEL = "kiln.chat"
TEMPLATE_LABEL = "kiln.template"
CREATED_LABEL = "kiln.created"
EXPIRY_LABEL = "kiln.expiry"  # unix seconds after which the reaper removes the object regardless
ROLE_LABEL = "kiln.role"  # what a shared helper is: npm proxy, relay, disk keeper, render browser
RENDER_ROLE = "render-check"  # the render check's browser (sandbox.preview.render_check)


def sandbox_labels(
    sandbox_id: str,
    instance: str,
    *,
    template: str = "",
    owner: str = "",
    chat: str = "",
    created: float = 0.0,
    expiry: float = 0.0,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The labels of one sandbox's container, network and volume."""
    labels = dict(extra or {})
    labels.update(
        {
            LABEL: sandbox_id,
            INSTANCE_LABEL: instance,
            TEMPLATE_LABEL: template,
            OWNER_LABEL: owner,
            CHAT_LABEL: chat,
            CREATED_LABEL: f"{created:.0f}",
            EXPIRY_LABEL: f"{expiry:.0f}",
        }
    )
    return labels


def shared_labels(instance: str) -> dict[str, str]:
    """The labels of an object all sandboxes of ``instance`` share (network, npm proxy)."""
    return {LABEL: SHARED, INSTANCE_LABEL: instance}


def instance_filter(instance: str) -> dict[str, list[str]]:
    """A Docker ``filters`` argument selecting every kiln object of ``instance``."""
    return {"label": [LABEL, f"{INSTANCE_LABEL}={instance}"]}


def container_name(sandbox_id: str) -> str:
    """The Docker name of a sandbox's container."""
    return f"kiln-sb-{sandbox_id}"


def network_name(sandbox_id: str) -> str:
    """The Docker name of a sandbox's own internal network: sandboxes made before they all
    shared one network (``SandboxSettings.network``) still have one."""
    return f"kiln-net-{sandbox_id}"


def volume_name(sandbox_id: str) -> str:
    """The Docker name of a sandbox's workspace volume."""
    return f"kiln-ws-{sandbox_id}"
