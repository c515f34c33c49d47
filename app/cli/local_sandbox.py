"""The sandbox settings of ``kiln run`` and ``kiln sandbox``: those of the server on the data dir.

A ``kiln serve`` keeps its sandboxes' registry in its embedded Redis and names its instance
after its data dir (``sandbox.settings.instance_name``). A CLI making sandboxes of that
instance in another Redis would have them reaped by the server as orphans (and would reap the
server's own with ``kiln sandbox reap``). So, unless ``REDIS_URL`` is set, the CLIs use the
Redis the server on the data dir (``--data-dir`` or ``KILN_DATA_DIR``) recorded, as long as its
socket is there (a stopped server's is removed); else the default Redis.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from app.service.embedded_redis import recorded_url
from sandbox import EnvReader, SandboxSettings, data_dir_from_env

DATA_DIR_HELP = "use the Redis and instance of the kiln serve on this data dir (KILN_DATA_DIR)"


def cli_sandbox_settings(
    data_dir: Path | None, env: Mapping[str, str] | None = None
) -> SandboxSettings:
    """Sandbox settings of ``env`` (``os.environ`` unless given) for the data dir ``data_dir``
    (``KILN_DATA_DIR`` when ``None``), with the Redis of the server running on it."""
    environment = dict(os.environ if env is None else env)
    if data_dir is not None:
        environment["KILN_DATA_DIR"] = str(data_dir)
    settings = SandboxSettings.from_env(environment)
    if EnvReader(environment).raw("REDIS_URL") is not None:
        return settings
    url = recorded_url(data_dir_from_env(environment))
    if url is None or not _answers(url):
        return settings
    return dataclasses.replace(settings, redis_url=url)


def _answers(url: str) -> bool:
    """Whether a recorded URL may still be served: a unix socket must exist (TCP: assumed)."""
    parts = urlsplit(url)
    return parts.scheme != "unix" or Path(parts.path).exists()
