"""Sandbox settings from the environment: the warm pool, the npm proxy's upstream and port, limits
that refuse nonsense, and the CA bundle (the system's unless told otherwise)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sandbox.errors import SandboxConfigError
from sandbox.settings import (
    SYSTEM_CA_BUNDLES,
    SandboxSettings,
    default_max_sandboxes,
    instance_for,
    system_ca_bundle,
)


def test_defaults_pool_every_template_and_forward_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KILN_WARM_POOL_TEMPLATES", "KILN_NPM_REGISTRY", "npm_config_registry"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    settings = SandboxSettings.from_env()
    assert settings.warm_pool_templates == ("vite-react", "vanilla", "nextjs")
    assert (settings.npm_registry, settings.proxy_env) == (None, {})


def test_the_environment_sets_pool_networks_cache_registry_and_proxies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KILN_WARM_POOL_TEMPLATES", " vanilla, ,vite-react ")
    monkeypatch.setenv("KILN_WARM_POOL_SIZE", "3")
    monkeypatch.setenv("KILN_SANDBOX_MAX_LIFETIME", "7200")
    monkeypatch.setenv("KILN_REAP_INTERVAL", "15")
    monkeypatch.setenv("KILN_NPM_PROXY_PORT", "4999")
    monkeypatch.setenv("npm_config_registry", "https://npm.internal/")
    monkeypatch.setenv("https_proxy", "http://proxy:3128")
    monkeypatch.setenv("NO_PROXY", "localhost")
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("KILN_NPM_REGISTRY", raising=False)
    settings = SandboxSettings.from_env()
    assert settings.warm_pool_templates == ("vanilla", "vite-react")
    assert settings.warm_pool_size == 3
    assert (settings.max_lifetime_seconds, settings.reap_interval_seconds) == (7200.0, 15.0)
    assert settings.npm_proxy_port == 4999
    assert settings.npm_registry == "https://npm.internal/"
    assert settings.proxy_env["HTTPS_PROXY"] == "http://proxy:3128"
    assert settings.proxy_env["NO_PROXY"] == "localhost"


def test_kiln_npm_registry_wins_over_npm_config_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("npm_config_registry", "https://a/")
    monkeypatch.setenv("KILN_NPM_REGISTRY", "https://b/")
    assert SandboxSettings.from_env().npm_registry == "https://b/"


def test_a_ca_bundle_that_is_not_a_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILN_SANDBOX_CA_BUNDLE", "/no/such/bundle.pem")
    with pytest.raises(SandboxConfigError, match=r"'/no/such/bundle\.pem'"):
        SandboxSettings.from_env()


def test_the_ca_bundle_defaults_to_the_system_bundle() -> None:
    # This machine has one of them (CI installs ca-certificates); which one is the system's.
    assert system_ca_bundle() in SYSTEM_CA_BUNDLES
    assert SandboxSettings.from_env({}).ca_bundle == system_ca_bundle()


def test_the_ca_bundle_variable_overrides_and_empty_disables(tmp_path: Path) -> None:
    bundle = tmp_path / "proxy-ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    assert SandboxSettings.from_env({"KILN_SANDBOX_CA_BUNDLE": str(bundle)}).ca_bundle == bundle
    assert SandboxSettings.from_env({"KILN_SANDBOX_CA_BUNDLE": ""}).ca_bundle is None


def test_limits_and_durations_are_read_with_their_types() -> None:
    env = {
        "KILN_SANDBOX_MEMORY": "512M",
        "KILN_SANDBOX_CPUS": "1.5",
        "KILN_SANDBOX_PIDS": "64",
        "KILN_FLUSH_DEBOUNCE": "0",
        "KILN_WARM_POOL_SIZE": "0",
        "KILN_COMMAND_TIMEOUT": "12.5",
    }
    settings = SandboxSettings.from_env(env)
    assert (settings.mem_limit, settings.nano_cpus, settings.pids_limit) == (
        "512m",
        1_500_000_000,
        64,
    )
    assert (settings.flush_debounce_seconds, settings.warm_pool_size) == (0.0, 0)
    assert settings.command_timeout_seconds == 12.5


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        pytest.param(
            "KILN_SANDBOX_PIDS", "-5", "KILN_SANDBOX_PIDS='-5' must be an integer >= 1", id="pids"
        ),
        pytest.param(
            "KILN_SANDBOX_PIDS", "inf", "KILN_SANDBOX_PIDS='inf' must be an integer >= 1", id="inf"
        ),
        pytest.param(
            "KILN_SANDBOX_CPUS",
            "inf",
            "KILN_SANDBOX_CPUS='inf' must be a finite number between 0.01 and 1024",
            id="cpus-inf",
        ),
        pytest.param(
            "KILN_SANDBOX_CPUS",
            "0.001",
            "KILN_SANDBOX_CPUS='0.001' must be a finite number between 0.01 and 1024",
            id="cpus-zero",
        ),
        pytest.param(
            "KILN_SANDBOX_IDLE_TTL",
            "nan",
            "KILN_SANDBOX_IDLE_TTL='nan' must be a finite number > 0",
            id="nan",
        ),
        pytest.param(
            "KILN_COMMAND_TIMEOUT",
            "-1",
            "KILN_COMMAND_TIMEOUT='-1' must be a finite number > 0",
            id="timeout",
        ),
        pytest.param(
            "KILN_WARM_POOL_SIZE",
            "-1",
            "KILN_WARM_POOL_SIZE='-1' must be an integer >= 0",
            id="pool",
        ),
        pytest.param(
            "KILN_SANDBOX_MEMORY", "lots", "KILN_SANDBOX_MEMORY='lots' must be a size", id="memory"
        ),
        pytest.param(
            "KILN_SANDBOX_MEMORY", "1k", "KILN_SANDBOX_MEMORY='1k' must be a size", id="tiny"
        ),
        pytest.param(
            "KILN_SANDBOX_DISK_QUOTA",
            "100m",
            "KILN_SANDBOX_DISK_QUOTA='100m' must be a size",
            id="disk-quota-too-small",
        ),
        pytest.param(
            "KILN_HOST_MEMORY_RESERVE",
            "95",
            "KILN_HOST_MEMORY_RESERVE='95' must be",
            id="memory-reserve-above-90",
        ),
        pytest.param(
            "KILN_MAX_SANDBOXES_PER_USER",
            "0",
            "KILN_MAX_SANDBOXES_PER_USER='0' must be an integer >= 1",
            id="no-sandbox-per-user",
        ),
        pytest.param(
            "KILN_SANDBOX_IDLE_TTL_FULL",
            "0",
            "KILN_SANDBOX_IDLE_TTL_FULL='0' must be a finite number > 0",
            id="idle-ttl-full",
        ),
        pytest.param(
            "KILN_SANDBOX_BACKEND",
            "kubernetes",
            "KILN_SANDBOX_BACKEND='kubernetes' must be one of docker, swarm",
            id="unknown-backend",
        ),
    ],
)
def test_nonsense_is_refused_naming_the_variable_and_the_value(
    name: str, value: str, message: str
) -> None:
    with pytest.raises(SandboxConfigError, match=f"^{re.escape(message)}"):
        SandboxSettings.from_env({name: value})


@pytest.mark.parametrize(
    ("env", "backend"),
    [
        pytest.param({}, "docker", id="default"),
        pytest.param({"KILN_SANDBOX_BACKEND": " Swarm "}, "swarm", id="any-case"),
    ],
)
def test_the_sandbox_backend_is_docker_unless_named(env: dict[str, str], backend: str) -> None:
    assert SandboxSettings.from_env(env).backend == backend


def test_sandboxes_share_one_network_per_instance_unless_named() -> None:
    assert SandboxSettings.from_env({"KILN_INSTANCE": "blue"}).network == "kiln-sandboxes-blue"
    named = SandboxSettings.from_env({"KILN_SANDBOX_NETWORK": "kiln-pool"})
    assert named.network == "kiln-pool"


@pytest.mark.parametrize(
    ("memory", "limit", "expected"),
    [
        pytest.param(24 * 2**30, "1g", 240, id="24g-host"),
        pytest.param(24 * 2**30, "512m", 480, id="smaller-limit-more-sandboxes"),
        pytest.param(2**30, "4g", 2, id="floor"),
        pytest.param(2**40, "64m", 1000, id="ceiling"),
    ],
)
def test_the_default_capacity_follows_host_memory_and_the_memory_limit(
    memory: int, limit: str, expected: int
) -> None:
    assert default_max_sandboxes(limit, memory) == expected


def test_kiln_max_sandboxes_overrides_the_derived_capacity() -> None:
    derived = SandboxSettings.from_env({"KILN_SANDBOX_MEMORY": "1g"})
    assert derived.max_sandboxes is None
    assert derived.sandbox_limit == default_max_sandboxes("1g")
    assert SandboxSettings.from_env({"KILN_MAX_SANDBOXES": "7"}).sandbox_limit == 7


@pytest.mark.parametrize("value", ["0", "-1", "2.5", "lots", "20000"])
def test_a_nonsense_max_sandboxes_is_refused(value: str) -> None:
    with pytest.raises(SandboxConfigError, match=f"^KILN_MAX_SANDBOXES={value!r} must be"):
        SandboxSettings.from_env({"KILN_MAX_SANDBOXES": value})


def test_the_instance_is_named_after_the_resolved_data_dir_unless_set(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    first = SandboxSettings.from_env({"KILN_DATA_DIR": str(tmp_path / "a")}).instance
    same = SandboxSettings.from_env({"KILN_DATA_DIR": str(tmp_path / "link")}).instance
    other = SandboxSettings.from_env({"KILN_DATA_DIR": str(tmp_path / "b")}).instance
    assert re.fullmatch(r"kiln-[0-9a-f]{8}", first)
    assert first == same == instance_for(tmp_path / "a") != other
    named = {"KILN_DATA_DIR": str(tmp_path / "a"), "KILN_INSTANCE": "kiln-own-x"}
    assert SandboxSettings.from_env(named).instance == "kiln-own-x"


def test_the_default_data_dir_gives_the_default_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/nonexistent-home")
    assert SandboxSettings.from_env({}).instance == instance_for(
        Path("/nonexistent-home/.local/share/kiln")
    )


@pytest.mark.parametrize(
    ("env", "bounds"),
    [
        pytest.param({}, (1, 3), id="default: one warm, up to three on demand"),
        pytest.param({"KILN_WARM_POOL_SIZE": "2"}, (2, 3), id="the old name is the minimum"),
        pytest.param({"KILN_WARM_POOL_SIZE": "5"}, (5, 5), id="a minimum above the default max"),
        pytest.param({"KILN_WARM_POOL_SIZE": "0"}, (0, 0), id="size 0 still means no pool"),
        pytest.param({"KILN_WARM_POOL_MIN": "0", "KILN_WARM_POOL_MAX": "2"}, (0, 2), id="0..2"),
        pytest.param(
            {"KILN_WARM_POOL_MIN": "2", "KILN_WARM_POOL_SIZE": "4"}, (2, 3), id="new wins"
        ),
    ],
)
def test_the_warm_pool_bounds(env: dict[str, str], bounds: tuple[int, int]) -> None:
    assert SandboxSettings.from_env(env).warm_pool_bounds == bounds


def test_the_warm_pool_window_and_refills_are_read() -> None:
    settings = SandboxSettings.from_env(
        {"KILN_WARM_POOL_WINDOW": "120", "KILN_WARM_POOL_REFILLS": "2"}
    )
    assert (settings.warm_pool_window_seconds, settings.warm_pool_refills) == (120.0, 2)
    assert SandboxSettings.from_env({}).warm_pool_refills == 1


def test_a_warm_pool_maximum_below_its_minimum_is_refused_in_words() -> None:
    env = {"KILN_WARM_POOL_MIN": "2", "KILN_WARM_POOL_MAX": "1"}
    with pytest.raises(SandboxConfigError, match=r"KILN_WARM_POOL_MAX='1' must be an integer >= 2"):
        SandboxSettings.from_env(env)


def test_docker_call_deadlines_are_read_within_their_ranges() -> None:
    settings = SandboxSettings.from_env(
        {"KILN_DOCKER_QUICK_TIMEOUT": "1", "KILN_DOCKER_CHANGE_TIMEOUT": "600"}
    )
    assert (settings.docker_quick_timeout_seconds, settings.docker_change_timeout_seconds) == (
        1.0,
        600.0,
    )
    defaults = SandboxSettings.from_env({})
    assert (defaults.docker_quick_timeout_seconds, defaults.docker_change_timeout_seconds) == (
        10.0,
        60.0,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("KILN_DOCKER_QUICK_TIMEOUT", "0.5"),
        ("KILN_DOCKER_QUICK_TIMEOUT", "121"),
        ("KILN_DOCKER_CHANGE_TIMEOUT", "4"),
        ("KILN_DOCKER_CHANGE_TIMEOUT", "inf"),
    ],
)
def test_a_docker_call_deadline_out_of_range_is_refused(name: str, value: str) -> None:
    with pytest.raises(SandboxConfigError, match=f"^{name}={value!r} must be a finite number"):
        SandboxSettings.from_env({name: value})


def test_the_disk_root_is_setups_when_there_else_none_and_empty_turns_it_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("sandbox.settings.usable_root", lambda path: True)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert SandboxSettings.from_env({}).disk_root == Path("/var/lib/kiln/sandbox-disk")
    monkeypatch.setattr("os.geteuid", lambda: 1000)  # setting quotas needs root
    assert SandboxSettings.from_env({}).disk_root is None
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert SandboxSettings.from_env({"KILN_SANDBOX_DISK_ROOT": ""}).disk_root is None
    named = {"KILN_SANDBOX_DISK_ROOT": str(tmp_path)}
    assert SandboxSettings.from_env(named).disk_root == tmp_path
    monkeypatch.setattr("sandbox.settings.usable_root", lambda path: False)
    assert SandboxSettings.from_env({}).disk_root is None


def test_the_disk_quota_is_2g_unless_set() -> None:
    assert SandboxSettings.from_env({}).disk_quota == "2g"
    assert SandboxSettings.from_env({"KILN_SANDBOX_DISK_QUOTA": "512M"}).disk_quota == "512m"
