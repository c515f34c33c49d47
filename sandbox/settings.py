"""Sandbox settings, read from ``KILN_*`` environment variables with safe defaults.

Values go through :class:`~sandbox.env_settings.EnvReader`: a malformed one raises
:class:`~sandbox.errors.SandboxConfigError` naming the variable and the value.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.disk_mounts import DEFAULT_DISK_ROOT, usable_root
from sandbox.env_settings import EnvReader, size_bytes
from sandbox.redis_url import redis_url_from_env

# KILN_SANDBOX_BACKEND's values -> the module that opens each (sandbox.backends.choice).
SANDBOX_BACKENDS: dict[str, str] = {
    "docker": "sandbox.backends.docker_engine",
    "swarm": "sandbox.backends.swarm",
}
DEFAULT_BACKEND = "docker"
LABEL = "kiln.sandbox"  # every container, network and volume kiln creates carries this label
DOCKER_MIN_MEMORY = "6m"  # Docker refuses to start a container with a smaller memory limit
# Where distributions keep the system's CA bundle (Debian/Ubuntu, Fedora/RHEL, openSUSE,
# Alpine/BSD). A machine behind a TLS-inspecting proxy has the proxy's CA in it, so sandboxes
# given this bundle reach the npm registry with no setting at all.
SYSTEM_CA_BUNDLES = (
    Path("/etc/ssl/certs/ca-certificates.crt"),
    Path("/etc/pki/tls/certs/ca-bundle.crt"),
    Path("/etc/ssl/ca-bundle.pem"),
    Path("/etc/ssl/cert.pem"),
)


# The default of KILN_MAX_SANDBOXES: this many sandboxes per memory limit's worth of host memory.
# An idle sandbox uses a small part of its limit (bench/capacity.py, 200 idle vanilla sandboxes:
# about 23 MiB each, its container and containerd-shim, against a 1g limit), so on a 24 GiB host
# the default 235 idle ones use about 5.5 GiB and leave the rest to the ones working (a build or
# a busy dev server uses a few hundred MiB); runs, not idle previews, are what use memory.
SANDBOXES_PER_LIMIT = 10
DEFAULT_MAX_SANDBOXES_RANGE = (2, 1000)
MAX_SANDBOXES_CEILING = 10_000  # an explicit KILN_MAX_SANDBOXES above this is a typo

# The warm pool grows with demand up to this many per template unless KILN_WARM_POOL_MAX says
# otherwise (an idle warm sandbox costs about 23 MiB, see above; three cover a small burst).
DEFAULT_WARM_POOL_MAX = 3

# A sandbox's disk quota covers the template's files (vite-react: about 100 MiB with its
# node_modules) and npm's cache; less than this cannot hold a project.
MIN_DISK_QUOTA = "256m"


# Where kiln keeps its data (``KILN_DATA_DIR``); the default instance name derives from it.
DEFAULT_DATA_DIR = Path("~/.local/share/kiln")


def data_dir_from_env(env: Mapping[str, str] | None = None) -> Path:
    """``KILN_DATA_DIR`` of ``env`` (``os.environ`` unless given), else the default; ``~``
    expanded, not resolved."""
    return EnvReader(env).path("KILN_DATA_DIR", DEFAULT_DATA_DIR.expanduser())


def instance_for(folder: Path) -> str:
    """The instance name of the deployment whose data lives in ``folder``: ``kiln-`` and 8 hex
    digits of its resolved path. Two servers on one Docker host with different data dirs then
    never share an instance (each reaps only its own), while ``kiln run``/``kiln sandbox`` on a
    server's data dir share that server's."""
    digest = hashlib.sha256(str(folder.expanduser().resolve()).encode()).hexdigest()
    return f"kiln-{digest[:8]}"


def instance_name(env: Mapping[str, str] | None = None) -> str:
    """``KILN_INSTANCE``, else :func:`instance_for` the data dir (the one rule for the name)."""
    read = EnvReader(env)
    return read.text("KILN_INSTANCE", "") or instance_for(data_dir_from_env(read.env))


def host_memory_bytes() -> int:
    """The host's physical memory (kiln and its Docker engine run on one host)."""
    return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))


def default_max_sandboxes(mem_limit: str, host_memory: int | None = None) -> int:
    """How many sandboxes a host of ``host_memory`` bytes holds by default (see above)."""
    memory = host_memory_bytes() if host_memory is None else host_memory
    derived = memory * SANDBOXES_PER_LIMIT // max(size_bytes(mem_limit), 1)
    low, high = DEFAULT_MAX_SANDBOXES_RANGE
    return max(low, min(high, derived))


def system_ca_bundle() -> Path | None:
    """The host's system CA bundle, if it has one of the usual ones."""
    return next((path for path in SYSTEM_CA_BUNDLES if path.is_file()), None)


def ca_bundle(env: Mapping[str, str] | None = None) -> Path | None:
    """``KILN_SANDBOX_CA_BUNDLE`` (a file; empty for none), else the system bundle."""
    return EnvReader(env).optional_file("KILN_SANDBOX_CA_BUNDLE", system_ca_bundle())


@dataclass(frozen=True)
class SandboxSettings:
    """Everything the sandbox layer can be tuned with. ``from_env()`` reads the environment."""

    redis_url: str = field(default="redis://127.0.0.1:6379/0", repr=False)  # may hold a password
    # CA bundle (PEM) mounted read-only into sandboxes for TLS-inspecting proxies; from_env()
    # takes the host's system bundle unless KILN_SANDBOX_CA_BUNDLE says otherwise.
    ca_bundle: Path | None = None
    mem_limit: str = "1g"
    nano_cpus: int = 1_000_000_000
    pids_limit: int = 512
    idle_ttl_seconds: float = 1800.0
    flush_debounce_seconds: float = 0.05
    flush_max_wait_seconds: float = 0.25
    # The warm pool's bounds per template (KILN_WARM_POOL_MIN, formerly KILN_WARM_POOL_SIZE, and
    # KILN_WARM_POOL_MAX; None: see warm_pool_bounds), the window of demand that sizes it
    # between them, and how many warm sandboxes may be starting at once (all templates).
    warm_pool_size: int = 1
    warm_pool_max: int | None = None
    warm_pool_window_seconds: float = 600.0
    warm_pool_refills: int = 1
    command_timeout_seconds: float = 300.0
    install_timeout_seconds: float = 600.0
    # Deadlines of single Docker calls by kind (sandbox.docker_boundary): a look-up
    # (get, list, inspect) and a change (create, start, remove). A wedged engine is then told
    # within seconds; builds, commands and installs keep the limits above.
    docker_quick_timeout_seconds: float = 10.0
    docker_change_timeout_seconds: float = 60.0
    output_cap_bytes: int = 256 * 1024
    # Distinguishes sandboxes of one kiln deployment (or one test session) from another's;
    # from_env() derives it from the data dir unless KILN_INSTANCE is set (see instance_name()).
    instance: str = "default"
    extra_labels: dict[str, str] = field(default_factory=dict)
    # Templates that keep a warm pool of started sandboxes each (``warm_pool_bounds``).
    warm_pool_templates: tuple[str, ...] = ("vite-react", "vanilla", "nextjs")
    dev_ready_timeout_seconds: float = 120.0
    # Hard upper bound on a sandbox's life, written as the ``kiln.expiry`` label.
    max_lifetime_seconds: float = 86400.0
    reap_interval_seconds: float = 60.0
    log_max_size: str = "10m"
    log_max_files: int = 3
    # The registry kiln's npm proxy fetches from, and the host's proxy variables it uses to get
    # there (sandboxes never see either: they reach only the proxy, sandbox.containers.npm_proxy).
    npm_registry: str | None = None
    proxy_env: dict[str, str] = field(default_factory=dict)
    # The host port the proxy listens on, on the sandbox bridge's gateway (KILN_NPM_PROXY_PORT;
    # scripts/setup.sh opens it, and only it, to sandboxes).
    npm_proxy_port: int = 4873
    # The bound of the proxy's package cache (KILN_NPM_PROXY_CACHE; the proxy evicts the least
    # recently used packages past it). Each instance has its own proxy: `kiln doctor` adds them up.
    npm_proxy_cache: str = "2g"
    # The proxy's URL as sandboxes reach it, set by the manager once the proxy runs.
    sandbox_registry: str | None = None
    # The internal network all sandboxes of the instance share ("": kiln-sandboxes-<instance>).
    sandbox_network: str = ""
    # How many sandboxes (warm ones included) the host holds; None: derived from host memory.
    max_sandboxes: int | None = None
    # The btrfs mount holding each sandbox's quota-limited writable space (None: no quota) and
    # the limit (sandbox.containers.disk_quota).
    disk_root: Path | None = None
    disk_quota: str = "2g"
    # Admission by memory (sandbox.backends.host_memory): a new chat is admitted only while the
    # host's MemAvailable stays above this share of its memory once the new sandbox is busy.
    memory_reserve_percent: float = 10.0
    # The most sandboxes one user holds (their idle ones are given up first for a new chat).
    max_sandboxes_per_user: int = 4
    # On a full host, an idle sandbox unused this long is given up for another chat's new one
    # (else idle sandboxes live KILN_SANDBOX_IDLE_TTL).
    idle_ttl_full_seconds: float = 300.0
    # Where sandboxes live (sandbox.backends.choice): the one Docker engine by default.
    backend: str = DEFAULT_BACKEND

    @property
    def network(self) -> str:
        """The name of the instance's shared sandbox network."""
        return self.sandbox_network or f"kiln-sandboxes-{self.instance}"

    @property
    def warm_pool_bounds(self) -> tuple[int, int]:
        """``(minimum, maximum)`` warm sandboxes per template. Without ``warm_pool_max`` a
        minimum of 0 keeps the pool off (as ``KILN_WARM_POOL_SIZE=0`` always did), any other
        minimum may grow to :data:`DEFAULT_WARM_POOL_MAX`."""
        low = self.warm_pool_size
        if self.warm_pool_max is not None:
            return low, max(low, self.warm_pool_max)
        return low, (max(low, DEFAULT_WARM_POOL_MAX) if low else 0)

    @property
    def sandbox_limit(self) -> int:
        """The most sandboxes this host holds at once (:func:`default_max_sandboxes` unless set)."""
        if self.max_sandboxes is not None:
            return self.max_sandboxes
        return default_max_sandboxes(self.mem_limit)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SandboxSettings:
        """Settings from ``KILN_*`` variables (``REDIS_URL`` for Redis) of ``env``
        (``os.environ`` unless given)."""
        read, d = EnvReader(env), cls()
        return cls(
            redis_url=redis_url_from_env(read) or d.redis_url,
            ca_bundle=ca_bundle(read.env),
            mem_limit=read.size("KILN_SANDBOX_MEMORY", d.mem_limit, low=DOCKER_MIN_MEMORY),
            nano_cpus=round(_cpus(read) * 1_000_000_000),
            pids_limit=read.integer("KILN_SANDBOX_PIDS", d.pids_limit, low=1),
            idle_ttl_seconds=read.number("KILN_SANDBOX_IDLE_TTL", d.idle_ttl_seconds),
            flush_debounce_seconds=read.number(
                "KILN_FLUSH_DEBOUNCE", d.flush_debounce_seconds, low_open=False
            ),
            flush_max_wait_seconds=read.number("KILN_FLUSH_MAX_WAIT", d.flush_max_wait_seconds),
            warm_pool_size=_warm_pool_min(read, d.warm_pool_size),
            warm_pool_max=_warm_pool_max(read),
            warm_pool_window_seconds=read.number(
                "KILN_WARM_POOL_WINDOW", d.warm_pool_window_seconds
            ),
            warm_pool_refills=read.integer("KILN_WARM_POOL_REFILLS", d.warm_pool_refills, low=1),
            command_timeout_seconds=read.number("KILN_COMMAND_TIMEOUT", d.command_timeout_seconds),
            install_timeout_seconds=read.number("KILN_INSTALL_TIMEOUT", d.install_timeout_seconds),
            docker_quick_timeout_seconds=read.number(
                "KILN_DOCKER_QUICK_TIMEOUT",
                d.docker_quick_timeout_seconds,
                low=1,
                high=120,
                low_open=False,
            ),
            docker_change_timeout_seconds=read.number(
                "KILN_DOCKER_CHANGE_TIMEOUT",
                d.docker_change_timeout_seconds,
                low=5,
                high=600,
                low_open=False,
            ),
            instance=instance_name(read.env),
            warm_pool_templates=read.names("KILN_WARM_POOL_TEMPLATES", d.warm_pool_templates),
            max_lifetime_seconds=read.number("KILN_SANDBOX_MAX_LIFETIME", d.max_lifetime_seconds),
            reap_interval_seconds=read.number("KILN_REAP_INTERVAL", d.reap_interval_seconds),
            # npm itself spells the second one so.
            npm_registry=read.raw("KILN_NPM_REGISTRY") or read.raw("npm_config_registry"),
            proxy_env=_proxy_env(read.env),
            npm_proxy_port=read.integer("KILN_NPM_PROXY_PORT", d.npm_proxy_port, low=1, high=65535),
            npm_proxy_cache=read.size("KILN_NPM_PROXY_CACHE", d.npm_proxy_cache, low="64m"),
            sandbox_network=read.text("KILN_SANDBOX_NETWORK", d.sandbox_network),
            max_sandboxes=_max_sandboxes(read),
            disk_root=_disk_root(read),
            disk_quota=read.size("KILN_SANDBOX_DISK_QUOTA", d.disk_quota, low=MIN_DISK_QUOTA),
            memory_reserve_percent=read.number(
                "KILN_HOST_MEMORY_RESERVE", d.memory_reserve_percent, low=1, high=90, low_open=False
            ),
            max_sandboxes_per_user=read.integer(
                "KILN_MAX_SANDBOXES_PER_USER", d.max_sandboxes_per_user, low=1
            ),
            idle_ttl_full_seconds=read.number(
                "KILN_SANDBOX_IDLE_TTL_FULL", d.idle_ttl_full_seconds
            ),
            backend=read.choice("KILN_SANDBOX_BACKEND", d.backend, tuple(SANDBOX_BACKENDS)),
        )


_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")


def _cpus(read: EnvReader) -> float:
    """``KILN_SANDBOX_CPUS``: Docker reads a limit that rounds to 0 nano-CPUs as "no limit"."""
    return read.number("KILN_SANDBOX_CPUS", 1.0, low=0.01, high=1024, low_open=False)


def _max_sandboxes(read: EnvReader) -> int | None:
    """``KILN_MAX_SANDBOXES``: unset means derived from host memory (``sandbox_limit``)."""
    if read.raw("KILN_MAX_SANDBOXES") is None:
        return None
    return read.integer("KILN_MAX_SANDBOXES", 0, low=1, high=MAX_SANDBOXES_CEILING)


def _disk_root(read: EnvReader) -> Path | None:
    """``KILN_SANDBOX_DISK_ROOT``: unset means the one setup.sh makes when it is there (a
    btrfs mount point) and kiln runs as root (setting quotas needs it); empty means none
    (sandboxes without a disk quota); a path is checked when the manager opens
    (``enable_quotas``)."""
    if "KILN_SANDBOX_DISK_ROOT" not in read.env:
        usable = usable_root(DEFAULT_DISK_ROOT) and os.geteuid() == 0
        return DEFAULT_DISK_ROOT if usable else None
    raw = read.raw("KILN_SANDBOX_DISK_ROOT")
    return None if raw is None else read.path("KILN_SANDBOX_DISK_ROOT", DEFAULT_DISK_ROOT)


def _warm_pool_min(read: EnvReader, default: int) -> int:
    """``KILN_WARM_POOL_MIN``, else ``KILN_WARM_POOL_SIZE`` (its name before the pool followed
    demand: a deployment that set it keeps that many warm sandboxes at least)."""
    set_min = read.raw("KILN_WARM_POOL_MIN") is not None
    return read.integer("KILN_WARM_POOL_MIN" if set_min else "KILN_WARM_POOL_SIZE", default, low=0)


def _warm_pool_max(read: EnvReader) -> int | None:
    """``KILN_WARM_POOL_MAX``: unset means derived from the minimum (``warm_pool_bounds``); one
    below the minimum is refused (the message says the least it may be)."""
    if read.raw("KILN_WARM_POOL_MAX") is None:
        return None
    low = _warm_pool_min(read, SandboxSettings.warm_pool_size)
    return read.integer("KILN_WARM_POOL_MAX", 0, low=low)


def _proxy_env(env: Mapping[str, str]) -> dict[str, str]:
    """The host's proxy variables (either case), to forward into sandboxes for installs."""
    found: dict[str, str] = {}
    for upper in _PROXY_VARIABLES:
        value = env.get(upper) or env.get(upper.lower())
        if value:
            found[upper] = value
    return found
