"""The settings of publishing, read from the environment (README's settings table):

- ``KILN_PUBLISH_MAX_BYTES`` (52428800 bytes, 50 MiB): the cap on one published build's files;
- ``KILN_PUBLISH_BUILD_SECONDS`` (300 s): how long one publish build may take, install included;
- ``KILN_PUBLISH_GC_GRACE`` (3600 s): stored builds younger than this are never collected (a
  publish stores its build before it moves the link);
- ``KILN_PUBLISH_GC_INTERVAL`` (600 s): how often a serving process collects the stored builds
  no link serves (in the background: never on a publish's path);
- ``KILN_PUBLISH_PER_HOUR`` (20): how many publishes one user may start in an hour (failed ones
  count: they built); one more is a 429 with ``Retry-After``;
- ``KILN_APPS_DOMAIN`` (``apps.<KILN_PUBLIC_HOST>``): published apps are at
  ``<slug>.<this domain>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.errors import ConfigError
from sandbox import EnvReader


@dataclass(frozen=True)
class PublishSettings:
    """How large and how long a publish build may be, and where published apps are."""

    max_bytes: int = 50 * 2**20
    build_seconds: float = 300.0
    gc_grace_seconds: float = 3600.0
    gc_interval_seconds: float = 600.0
    per_hour: int = 20
    apps_domain: str = ""  # empty: ``apps.<public host>``

    def domain(self, public_host: str) -> str:
        """The domain published apps live under."""
        return (self.apps_domain or f"apps.{public_host}").lower().strip(".")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PublishSettings:
        """The settings of ``env`` (``os.environ`` unless given); ConfigError for a bad one."""
        read = EnvReader(env, ConfigError)
        return cls(
            max_bytes=read.integer("KILN_PUBLISH_MAX_BYTES", cls.max_bytes, low=1024, high=2**40),
            build_seconds=read.number(
                "KILN_PUBLISH_BUILD_SECONDS", cls.build_seconds, low=1.0, high=86400.0
            ),
            gc_grace_seconds=read.number(
                "KILN_PUBLISH_GC_GRACE", cls.gc_grace_seconds, low=0.0, high=10**7, low_open=False
            ),
            gc_interval_seconds=read.number(
                "KILN_PUBLISH_GC_INTERVAL", cls.gc_interval_seconds, low=1.0, high=86400.0
            ),
            per_hour=read.integer("KILN_PUBLISH_PER_HOUR", cls.per_hour, low=1, high=100000),
            apps_domain=read.text("KILN_APPS_DOMAIN", cls.apps_domain),
        )
