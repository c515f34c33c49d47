"""Lock files without kiln's addresses: ``resolved`` URLs on a private host become public ones.

kiln's npm proxy (``sandbox.containers.npm_proxy``) announces the upstream's tarball URLs, so
installs write ``"resolved": "https://registry.npmjs.org/..."``. Versions recorded before it
(or by a proxy image from before it) hold the proxy's address instead, ``http://<gateway of the
sandbox network>:4873/zustand/-/zustand-5.1.0.tgz``: an address nobody answers on once the
network is made again with another subnet, and nothing outside kiln can reach (a zip's ``npm
install`` got E404). :func:`public_locks` rewrites such a URL to :data:`PUBLIC_REGISTRY` with
the same path (the proxy serves the registry's paths), leaving every other byte as it was;
recording, restoring and exporting a version go through it. npm checks the ``integrity`` beside
each URL, so the rewrite cannot change what is installed.

A host is private when it is an IP literal in a private, loopback or link-local range, or
``localhost``: a public registry is never reached by such an address.
"""

from __future__ import annotations

import io
import ipaddress
import re
import zipfile
from collections.abc import Mapping
from urllib.parse import urlsplit

PUBLIC_REGISTRY = "https://registry.npmjs.org"
LOCK_NAMES = frozenset({"package-lock.json", "npm-shrinkwrap.json"})
_RESOLVED = re.compile(rb'("resolved"\s*:\s*")(https?://[^/"\s]+)(/[^"]*")')


def is_lock(path: str) -> bool:
    """Whether ``path`` (in any folder) is an npm lock file."""
    return path.rsplit("/", 1)[-1] in LOCK_NAMES


def is_private_origin(origin: str) -> bool:
    """Whether ``origin`` (``scheme://host[:port]``) names a host only a local network knows."""
    host = urlsplit(origin).hostname or ""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_private or address.is_loopback or address.is_link_local


def public_lock(text: bytes) -> bytes:
    """``text`` with every ``resolved`` URL on a private host moved to the public registry."""

    def public(match: re.Match[bytes]) -> bytes:
        if not is_private_origin(match[2].decode("ascii", "replace")):
            return match[0]
        return match[1] + PUBLIC_REGISTRY.encode() + match[3]

    return _RESOLVED.sub(public, text)


def public_locks(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """``files`` with their lock files' private ``resolved`` URLs made public."""
    return {path: public_lock(data) if is_lock(path) else data for path, data in files.items()}


def public_archive(archive: bytes) -> bytes:
    """A zip with its lock files' private ``resolved`` URLs made public (the same bytes when
    there is nothing to change); every other entry is copied with its metadata."""
    with zipfile.ZipFile(io.BytesIO(archive)) as source:
        entries = [(info, source.read(info)) for info in source.infolist()]
    changed = [
        (info, public_lock(data) if is_lock(info.filename) else data) for info, data in entries
    ]
    if changed == entries:
        return archive
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for info, data in changed:
            target.writestr(info, data, compress_type=info.compress_type)
    return out.getvalue()
