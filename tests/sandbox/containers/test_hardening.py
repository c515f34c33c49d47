"""The hardened run settings as a pure function (the live container is checked in test_manager)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandbox.containers.disk_quota import SandboxDisk
from sandbox.containers.hardening import (
    CA_BUNDLE_PATH,
    DEFAULT_NPM_REGISTRY,
    KILN_NPMRC,
    NPM_CACHE_DIR,
    container_run_kwargs,
    sandbox_environment,
)
from sandbox.images.templates import get_template
from sandbox.settings import LABEL, SandboxSettings

PROXY = "http://172.30.0.1:4873/"


def _kwargs(settings: SandboxSettings, **overrides: Any) -> dict[str, Any]:
    return container_run_kwargs(
        settings,
        get_template("vite-react"),
        "abc123",
        volume="kiln-ws-abc123",
        network="kiln-net-abc123",
        created=1000.0,
        **overrides,
    )


def test_the_container_runs_unprivileged_with_limits() -> None:
    settings = SandboxSettings(mem_limit="768m", nano_cpus=500_000_000, pids_limit=256)
    kwargs = _kwargs(settings)
    assert kwargs["user"] == "1000:1000"
    assert kwargs["cap_drop"] == ["ALL"]
    assert "cap_add" not in kwargs
    assert kwargs["security_opt"] == ["no-new-privileges"]
    assert kwargs["init"] is True
    assert "privileged" not in kwargs
    assert (kwargs["pids_limit"], kwargs["nano_cpus"]) == (256, 500_000_000)
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == "768m"
    assert kwargs["image"] == "kiln/sandbox-vite-react:latest"
    assert kwargs["command"] == ["node", "/usr/local/lib/kiln/kiln-dev.mjs"]  # the supervisor
    assert kwargs["working_dir"] == "/workspace"
    assert kwargs["network"] == "kiln-net-abc123"


def test_logs_rotate() -> None:
    log_config = _kwargs(SandboxSettings(log_max_size="5m", log_max_files=2))["log_config"]
    assert log_config["Type"] == "json-file"
    assert log_config["Config"] == {"max-size": "5m", "max-file": "2"}


def test_labels_carry_what_the_reaper_needs() -> None:
    settings = SandboxSettings(instance="t1", max_lifetime_seconds=60, extra_labels={"x": "y"})
    labels = _kwargs(settings, owner="u1", chat="c1")["labels"]
    assert labels == {
        LABEL: "abc123",
        "kiln.instance": "t1",
        "kiln.template": "vite-react",
        "kiln.owner": "u1",
        "kiln.chat": "c1",
        "kiln.created": "1000",
        "kiln.expiry": "1060",
        "x": "y",
    }


def test_mounts_are_the_own_workspace_and_the_ca(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("pem")
    volumes = _kwargs(SandboxSettings(ca_bundle=bundle))["volumes"]
    assert volumes == {
        "kiln-ws-abc123": {"bind": "/workspace", "mode": "rw"},
        str(bundle.resolve()): {"bind": CA_BUNDLE_PATH, "mode": "ro"},
    }


@pytest.mark.parametrize(
    "quota", [pytest.param(False, id="volume"), pytest.param(True, id="quota")]
)
def test_two_sandboxes_share_no_writable_mount(tmp_path: Path, quota: bool) -> None:
    """One sandbox can never write where another reads (a shared npm cache was such a place):
    every read-write source is the sandbox's own; only read-only ones (the CA) are shared."""
    bundle = tmp_path / "ca.pem"
    bundle.write_text("pem")
    settings = SandboxSettings(ca_bundle=bundle, disk_root=Path("/q"), instance="inst")
    disk = SandboxDisk(Path("/q"), "inst", 2**30) if quota else None

    def writable(sandbox_id: str) -> set[str]:
        volumes = container_run_kwargs(
            settings,
            get_template("vite-react"),
            sandbox_id,
            volume=f"kiln-ws-{sandbox_id}",
            network="kiln-net",
            created=1000.0,
            disk=disk,
        )["volumes"]
        return {source for source, mount in volumes.items() if mount["mode"] != "ro"}

    first, second = writable("abc123"), writable("def456")
    assert len(first) == (4 if quota else 1)
    assert first.isdisjoint(second)


def test_without_a_ca_bundle_nothing_is_mounted_or_exported_for_it() -> None:
    kwargs = _kwargs(SandboxSettings())
    assert len(kwargs["volumes"]) == 1
    assert "NODE_EXTRA_CA_CERTS" not in kwargs["environment"]
    assert "npm_config_cafile" not in kwargs["environment"]


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        pytest.param(
            SandboxSettings(ca_bundle=Path("/etc/ssl/certs/ca-certificates.crt")),
            {"NODE_EXTRA_CA_CERTS": CA_BUNDLE_PATH, "npm_config_cafile": CA_BUNDLE_PATH},
            id="ca-bundle",
        ),
        pytest.param(
            # The proxy's upstream is not the sandbox's registry: the proxy is.
            SandboxSettings(npm_registry="https://npm.internal/", sandbox_registry=PROXY),
            {"npm_config_registry": PROXY},
            id="registry",
        ),
        pytest.param(
            SandboxSettings(),
            {"npm_config_registry": DEFAULT_NPM_REGISTRY, "npm_config_userconfig": KILN_NPMRC},
            id="default-registry-and-kiln-userconfig",
        ),
    ],
)
def test_environment_tells_npm_its_cache_registry_and_config(
    settings: SandboxSettings, expected: dict[str, str]
) -> None:
    env = sandbox_environment(settings)
    assert env["npm_config_cache"] == NPM_CACHE_DIR
    assert expected.items() <= env.items()


def test_the_hosts_proxy_variables_stay_out_of_the_sandbox() -> None:
    secret = "http://user:secret@proxy:3128"
    settings = SandboxSettings(proxy_env={"HTTPS_PROXY": secret, "HTTP_PROXY": secret})
    env = sandbox_environment(settings)
    # Names in any case: HTTPS_PROXY and https_proxy both reach npm and node.
    assert not [name for name, value in env.items() if "secret" in value or "proxy" in name.lower()]


def test_with_a_disk_quota_the_root_is_read_only_and_home_and_tmp_are_the_sandboxs_own() -> None:
    disk = SandboxDisk(Path("/q"), "inst", 2**30)
    kwargs = _kwargs(SandboxSettings(disk_root=Path("/q"), instance="inst"), disk=disk)
    folder = "/q/inst/kiln-ws-abc123"
    assert kwargs["read_only"] is True
    assert kwargs["volumes"] == {
        "kiln-ws-abc123": {"bind": "/workspace", "mode": "rw"},
        f"{folder}/home": {"bind": "/home/node", "mode": "rw"},
        f"{folder}/tmp": {"bind": "/tmp", "mode": "rw"},
        f"{folder}/var-tmp": {"bind": "/var/tmp", "mode": "rw"},
    }
    assert kwargs["environment"]["npm_config_cache"].startswith("/home/node/")


def test_without_a_disk_quota_the_root_stays_writable() -> None:
    assert _kwargs(SandboxSettings())["read_only"] is False
    # A volume made before the instance had a quota disk: no quota folders bound either.
    legacy = _kwargs(SandboxSettings(disk_root=Path("/q"), instance="inst"))
    assert (legacy["read_only"], len(legacy["volumes"])) == (False, 1)
