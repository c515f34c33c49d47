"""Sandbox settings, read from ``KILN_*`` environment variables with safe defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

LABEL = "kiln.sandbox"  # every container, network and volume kiln creates carries this label


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {raw!r}") from None


def _env_int(name: str, default: int) -> int:
    return int(_env_float(name, default))


@dataclass(frozen=True)
class SandboxSettings:
    """Everything the sandbox layer can be tuned with. ``from_env()`` reads the environment."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    # Extra CA bundle (PEM) mounted read-only into sandboxes for TLS-inspecting proxies.
    ca_bundle: Path | None = None
    mem_limit: str = "1g"
    nano_cpus: int = 1_000_000_000
    pids_limit: int = 512
    idle_ttl_seconds: float = 1800.0
    flush_debounce_seconds: float = 0.05
    flush_max_wait_seconds: float = 0.25
    warm_pool_size: int = 1
    command_timeout_seconds: float = 300.0
    install_timeout_seconds: float = 600.0
    output_cap_bytes: int = 256 * 1024
    egress_network: str = "kiln-egress"
    npm_cache_volume: str = "kiln-npm-cache"
    # Distinguishes sandboxes of one kiln deployment (or one test session) from another's.
    instance: str = "default"
    extra_labels: dict[str, str] = field(default_factory=dict)
    # Templates that keep a warm pool of ``warm_pool_size`` started sandboxes each.
    warm_pool_templates: tuple[str, ...] = ("vite-react", "vanilla", "nextjs")
    dev_ready_timeout_seconds: float = 120.0
    # Hard upper bound on a sandbox's life, written as the ``kiln.expiry`` label.
    max_lifetime_seconds: float = 86400.0
    reap_interval_seconds: float = 60.0
    log_max_size: str = "10m"
    log_max_files: int = 3
    # How the sandbox reaches the npm registry during installs (forwarded as environment).
    npm_registry: str | None = None
    proxy_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> SandboxSettings:
        """Settings from ``KILN_*`` variables (``REDIS_URL`` for Redis)."""
        ca = os.environ.get("KILN_SANDBOX_CA_BUNDLE") or None
        if ca is not None and not Path(ca).is_file():
            raise ValueError(f"KILN_SANDBOX_CA_BUNDLE names no readable file: {ca!r}")
        defaults = cls()
        return cls(
            redis_url=os.environ.get("REDIS_URL", defaults.redis_url),
            ca_bundle=Path(ca) if ca else None,
            mem_limit=os.environ.get("KILN_SANDBOX_MEMORY", defaults.mem_limit),
            nano_cpus=int(_env_float("KILN_SANDBOX_CPUS", 1.0) * 1_000_000_000),
            pids_limit=_env_int("KILN_SANDBOX_PIDS", defaults.pids_limit),
            idle_ttl_seconds=_env_float("KILN_SANDBOX_IDLE_TTL", defaults.idle_ttl_seconds),
            flush_debounce_seconds=_env_float(
                "KILN_FLUSH_DEBOUNCE", defaults.flush_debounce_seconds
            ),
            flush_max_wait_seconds=_env_float(
                "KILN_FLUSH_MAX_WAIT", defaults.flush_max_wait_seconds
            ),
            warm_pool_size=_env_int("KILN_WARM_POOL_SIZE", defaults.warm_pool_size),
            command_timeout_seconds=_env_float(
                "KILN_COMMAND_TIMEOUT", defaults.command_timeout_seconds
            ),
            install_timeout_seconds=_env_float(
                "KILN_INSTALL_TIMEOUT", defaults.install_timeout_seconds
            ),
            instance=os.environ.get("KILN_INSTANCE", defaults.instance),
            warm_pool_templates=_env_names(
                "KILN_WARM_POOL_TEMPLATES", defaults.warm_pool_templates
            ),
            max_lifetime_seconds=_env_float(
                "KILN_SANDBOX_MAX_LIFETIME", defaults.max_lifetime_seconds
            ),
            reap_interval_seconds=_env_float("KILN_REAP_INTERVAL", defaults.reap_interval_seconds),
            egress_network=os.environ.get("KILN_EGRESS_NETWORK", defaults.egress_network),
            npm_cache_volume=os.environ.get("KILN_NPM_CACHE_VOLUME", defaults.npm_cache_volume),
            npm_registry=os.environ.get("KILN_NPM_REGISTRY")
            or os.environ.get("npm_config_registry")  # noqa: SIM112 -- npm spells it so
            or None,
            proxy_env=_proxy_env(),
        )


_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")


def _env_names(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _proxy_env() -> dict[str, str]:
    """The host's proxy variables (either case), to forward into sandboxes for installs."""
    found: dict[str, str] = {}
    for upper in _PROXY_VARIABLES:
        value = os.environ.get(upper) or os.environ.get(upper.lower())
        if value:
            found[upper] = value
    return found
