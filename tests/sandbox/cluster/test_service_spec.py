"""sandbox.cluster.service_spec: every hardening setting of ``docker run`` reaches the service or
is named as the node's to provide, and the swarm's own parts (resources, placement, restart)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.cluster.service_spec import (
    CARRIED,
    LINUX_ONLY,
    NODE_PROVIDES,
    NOT_APPLICABLE,
    carried_kwargs,
    sandbox_service_kwargs,
)
from sandbox.containers.disk_quota import SandboxDisk
from sandbox.containers.hardening import container_run_kwargs
from sandbox.errors import SandboxConfigError
from sandbox.images.templates import APP_ENV_DIR, WORKSPACE, get_template
from sandbox.settings import SandboxSettings

SETTINGS = SandboxSettings(instance="unit", mem_limit="256m", nano_cpus=500_000_000)
TEMPLATE = get_template("vanilla")


def service(**overrides: object) -> dict[str, object]:
    return sandbox_service_kwargs(
        SETTINGS, TEMPLATE, "abc123", network="kiln-sandboxes-unit", created=0.0, **overrides
    )


@pytest.mark.parametrize(
    "disk",
    [
        pytest.param(None, id="no-quota"),
        pytest.param(SandboxDisk(Path("/q"), "unit", 1 << 30), id="quota"),
    ],
)
def test_every_hardening_setting_has_a_swarm_form(disk: SandboxDisk | None) -> None:
    run_kwargs = container_run_kwargs(
        SETTINGS, TEMPLATE, "abc123", volume="v", network="n", created=0.0, disk=disk
    )
    covered = set(CARRIED) | set(NODE_PROVIDES) | NOT_APPLICABLE
    assert set(run_kwargs) <= covered, set(run_kwargs) - covered


def test_a_setting_with_no_swarm_form_is_refused() -> None:
    with pytest.raises(SandboxConfigError, match="'privileged'"):
        carried_kwargs({"image": "x", "privileged": True})


def test_resources_limit_and_reserve_the_memory() -> None:
    resources = service()["resources"]
    assert resources == {
        "Limits": {"MemoryBytes": 256 * 1024 * 1024, "NanoCPUs": 500_000_000, "Pids": 512},
        "Reservations": {"MemoryBytes": 256 * 1024 * 1024},
    }


def test_mounts_are_the_workspace_volume_and_the_app_env_tmpfs() -> None:
    mounts = {m["Target"]: m for m in service()["mounts"]}  # type: ignore[attr-defined]
    assert mounts[WORKSPACE]["Type"] == "volume"
    assert mounts[WORKSPACE]["Source"] == "kiln-ws-abc123"
    assert mounts[APP_ENV_DIR]["Type"] == "tmpfs"
    assert mounts[APP_ENV_DIR]["TmpfsOptions"] == {"SizeBytes": 512 * 1024, "Mode": 0o755}


def test_the_swarm_never_restarts_and_gives_no_virtual_ip() -> None:
    kwargs = service()
    assert kwargs["restart_policy"]["Condition"] == "none"  # type: ignore[index]
    assert kwargs["endpoint_spec"] == {"Mode": "dnsrr"}


def test_placement_is_linux_nodes_plus_constraints_and_spread_labels() -> None:
    kwargs = service(constraints=["node.labels.kiln.sandboxes==true"], spread_labels=["zone"])
    assert kwargs["constraints"] == [LINUX_ONLY, "node.labels.kiln.sandboxes==true"]
    assert kwargs["preferences"] == [("spread", "node.labels.zone")]


def test_the_container_keeps_kiln_hardening() -> None:
    kwargs = service()
    assert kwargs["user"] == "1000:1000"
    assert kwargs["cap_drop"] == ["ALL"]
    assert kwargs["init"] is True
    assert kwargs["networks"] == ["kiln-sandboxes-unit"]
    assert kwargs["container_labels"]["kiln.instance"] == "unit"  # type: ignore[index]
    assert "npm_config_registry=https://registry.npmjs.org/" in kwargs["env"]  # type: ignore[operator]
