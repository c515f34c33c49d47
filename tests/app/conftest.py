"""Fixtures of the CLI tests that drive real sandboxes: a Docker client and a kiln instance."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from tests.sandbox.docker_support import CA_BUNDLE, leftovers, sweep

TIKTOKEN_CACHE = Path(__file__).resolve().parents[3] / "shared" / "tiktoken-cache"
PUBLIC_PORT = "8123"


@pytest.fixture(scope="module")
def docker_client() -> Iterator[docker.DockerClient]:
    """A Docker client for assertions; fails (never skips) without an engine."""
    client = docker.from_env()
    client.ping()
    yield client
    client.close()


@pytest.fixture(scope="module")
def instance(
    request: pytest.FixtureRequest, redis_url: str, docker_client: docker.DockerClient
) -> Iterator[str]:
    """The environment of a kiln instance of this module's own, swept at the end.

    A module that sets ``EXPECT_CLEAN = True`` also fails if kiln itself left objects behind.
    """
    name = f"test-{secrets.token_hex(4)}"
    with pytest.MonkeyPatch.context() as patch:
        for key, value in {
            "KILN_INSTANCE": name,
            "REDIS_URL": redis_url,
            "KILN_SANDBOX_CA_BUNDLE": str(CA_BUNDLE),
            "KILN_PUBLIC_PORT": PUBLIC_PORT,
            "KILN_WARM_POOL_SIZE": "0",
            "TIKTOKEN_CACHE_DIR": str(TIKTOKEN_CACHE),
        }.items():
            patch.setenv(key, value)
        for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "TAVILY_API_KEY"):
            patch.delenv(key, raising=False)
        yield name
    left = leftovers(docker_client, name)
    sweep(docker_client, name, redis_url)
    if getattr(request.module, "EXPECT_CLEAN", False):
        assert left == [], f"kiln left Docker objects behind: {left}"
