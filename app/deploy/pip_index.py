"""How pip reaches its package index on this host, forwarded into the kiln image's build.

pip inside ``docker build`` runs in a container: it sees neither the host's pip configuration
nor the host's files. What it needs from there is the index URL, extra index URLs, trusted hosts
and the CA bundle that makes the index's TLS verifiable (there may be a TLS-inspecting proxy).
``KILN_PIP_INDEX_URL``, ``KILN_PIP_EXTRA_INDEX_URL`` and ``KILN_PIP_TRUSTED_HOST`` set them;
by default they come from the host's own configuration, as ``pip config list`` shows it (pip
configuration files and ``PIP_*`` variables). Local indexes (``file:`` URLs, paths) are left out:
a build container cannot read them. An index or proxy on the host's loopback is not reachable
from a build container either.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from app.errors import ConfigError
from sandbox import EnvReader

OPTIONS = ("index-url", "extra-index-url", "trusted-host", "cert")
# pip's precedence for `pip install`: environment, then the command's section, then global.
SECTIONS = (":env:", "install", "global")
REMOTE_SCHEMES = ("http://", "https://")


@dataclass(frozen=True)
class PipIndex:
    """Where pip installs from; ``build_args()`` is what ``docker build`` gets."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    trusted_hosts: tuple[str, ...] = ()
    # The CA bundle pip is configured with on the host (pip's ``cert``), if any.
    cert: Path | None = None

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, host: Mapping[str, str] | None = None
    ) -> PipIndex:
        """``KILN_PIP_*`` variables, else the host's pip options (``host_pip_options()``)."""
        read = EnvReader(environ, ConfigError)
        options = host_pip_options() if host is None else host
        index = read.raw("KILN_PIP_INDEX_URL") or options.get("index-url", "")
        extra = read.raw("KILN_PIP_EXTRA_INDEX_URL") or options.get("extra-index-url", "")
        trusted = read.raw("KILN_PIP_TRUSTED_HOST") or options.get("trusted-host", "")
        cert = options.get("cert")
        remote_index = remote_urls(index)
        return cls(
            index_url=remote_index[0] if remote_index else None,
            extra_index_urls=remote_urls(extra),
            trusted_hosts=tuple(trusted.split()),
            cert=Path(cert) if cert and Path(cert).is_file() else None,
        )

    def build_args(self) -> dict[str, str]:
        """pip's own environment variables, only those that are set (pip reads them)."""
        args = {
            "PIP_INDEX_URL": self.index_url or "",
            "PIP_EXTRA_INDEX_URL": " ".join(self.extra_index_urls),
            "PIP_TRUSTED_HOST": " ".join(self.trusted_hosts),
        }
        return {name: value for name, value in args.items() if value}


def remote_urls(value: str) -> tuple[str, ...]:
    """The ``http(s)`` URLs of a whitespace-separated list; local indexes are dropped."""
    return tuple(url for url in value.split() if url.startswith(REMOTE_SCHEMES))


def host_pip_options() -> dict[str, str]:
    """The index options pip on this host uses for ``pip install`` (nothing if pip fails)."""
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    return effective_options(parse_config_list(result.stdout))


def parse_config_list(output: str) -> dict[str, str]:
    """``pip config list`` lines (``section.option='value'``) as ``{"section.option": value}``."""
    entries: dict[str, str] = {}
    for line in output.splitlines():
        key, sep, raw = line.partition("=")
        if not sep:
            continue
        try:
            value = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            value = raw.strip()
        entries[key.strip()] = str(value)
    return entries


def effective_options(entries: Mapping[str, str]) -> dict[str, str]:
    """Each of :data:`OPTIONS` from the section pip gives precedence (:data:`SECTIONS`)."""
    found: dict[str, str] = {}
    for option in OPTIONS:
        for section in SECTIONS:
            value = entries.get(f"{section}.{option}")
            if value is not None:
                found[option] = value
                break
    return found
