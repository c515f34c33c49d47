"""The settings every host of a deployment must agree on, checked at start against a real
Postgres, a real Redis and a project folder (:mod:`app.service.deployment`); ``kiln doctor``
shows the same check."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio

from app.cli.doctor_deployment import check_deployment_settings
from app.errors import DeploymentMismatch
from app.service.deployment import (
    PROJECTS_MARKER,
    REDIS_MARKER,
    HostSettings,
    check_deployment,
    secret_fingerprint,
)
from app.store import Store
from tests.postgres_server import PostgresServer

pytestmark = [pytest.mark.anyio, pytest.mark.redis]
SECRET = "the deployment's secret key"
REDIS_DB = 1  # this module's database on the session's redis-server


@pytest.fixture
def database_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty database (schema) for the test."""
    with postgres_server.fresh_url() as url:
        yield url


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    """The deployment's store."""
    opened = Store(database_url, SECRET)
    yield opened
    opened.close()


@pytest.fixture
def deployment_redis(redis_url: str) -> str:
    """The module's Redis database, emptied."""
    return redis_url.rsplit("/", 1)[0] + f"/{REDIS_DB}"


@pytest.fixture
async def client(deployment_redis: str) -> AsyncIterator[redis.asyncio.Redis]:
    """A client on that database, flushed before the test."""
    opened = redis.asyncio.Redis.from_url(deployment_redis)
    await opened.flushdb()
    yield opened
    await opened.aclose()


def host_in(folder: Path, redis_url: str, **changes: str) -> HostSettings:
    """A host whose project store is ``folder / "projects"``."""
    values = {"secret_key": SECRET, "instance": "kiln-deploy", **changes}
    return HostSettings(
        values["secret_key"], values["instance"], folder / "projects", "postgresql://db", redis_url
    )


async def test_the_first_host_writes_the_record_and_the_next_agrees(
    store: Store, client: redis.asyncio.Redis, deployment_redis: str, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    first = await check_deployment(store, client, host_in(shared, deployment_redis))
    second = await check_deployment(store, client, host_in(shared, deployment_redis))
    record = store.recorded_deployment()
    assert first == second == record["id"]
    assert record["secret_key"] == secret_fingerprint(SECRET)
    assert SECRET not in str(record)
    assert await client.get(REDIS_MARKER) == first.encode()
    assert (shared / "projects" / PROJECTS_MARKER).read_text().strip() == first


@pytest.mark.parametrize(
    ("changes", "setting", "shown"),
    [
        pytest.param(
            {"secret_key": "another secret key, 16+"}, "KILN_SECRET_KEY", None, id="secret"
        ),
        pytest.param({"instance": "kiln-other"}, "KILN_INSTANCE", "'kiln-other'", id="instance"),
    ],
)
async def test_a_host_whose_recorded_setting_differs_refuses_in_words(
    store: Store,
    client: redis.asyncio.Redis,
    deployment_redis: str,
    tmp_path: Path,
    changes: dict[str, str],
    setting: str,
    shown: str | None,
) -> None:
    await check_deployment(store, client, host_in(tmp_path, deployment_redis))
    with pytest.raises(DeploymentMismatch) as refused:
        await check_deployment(store, client, host_in(tmp_path, deployment_redis, **changes))
    words = str(refused.value)
    assert words.startswith(f"{setting} differs from the one the deployment's first host")
    assert refused.value.code == "deployment_mismatch"
    assert "another secret key" not in words
    assert SECRET not in words
    if shown is not None:
        assert shown in words
        assert "'kiln-deploy'" in words


async def test_redis_of_another_deployment_is_refused(
    store: Store, client: redis.asyncio.Redis, deployment_redis: str, tmp_path: Path
) -> None:
    await client.set(REDIS_MARKER, "someone-else")
    with pytest.raises(DeploymentMismatch, match=r"^REDIS_URL .* another deployment"):
        await check_deployment(store, client, host_in(tmp_path, deployment_redis))


async def test_a_project_store_of_another_deployment_is_refused(
    store: Store, client: redis.asyncio.Redis, deployment_redis: str, tmp_path: Path
) -> None:
    (tmp_path / "projects").mkdir()
    (tmp_path / "projects" / PROJECTS_MARKER).write_text("someone-else\n")
    with pytest.raises(DeploymentMismatch, match=r"^the project store .* another deployment"):
        await check_deployment(store, client, host_in(tmp_path, deployment_redis))


async def test_doctor_shows_the_check(
    store: Store,
    client: redis.asyncio.Redis,
    database_url: str,
    deployment_redis: str,
    tmp_path: Path,
) -> None:
    env = {"KILN_DATABASE_URL": database_url, "REDIS_URL": deployment_redis}
    env |= {"KILN_SECRET_KEY": SECRET, "KILN_INSTANCE": "kiln-deploy"}
    assert check_deployment_settings(env, tmp_path).detail.startswith("no host started")
    deployment = await check_deployment(store, client, host_in(tmp_path, deployment_redis))
    agreed = check_deployment_settings(env, tmp_path)
    assert agreed.ok
    assert agreed.detail.startswith(f"{deployment!r}: secret key, instance")
    differing = check_deployment_settings(env | {"KILN_SECRET_KEY": "x" * 20}, tmp_path)
    assert not differing.ok
    assert differing.detail.startswith("KILN_SECRET_KEY differs")
    assert differing.detail.endswith("[deployment_mismatch]")
    single = check_deployment_settings({}, tmp_path)
    assert single.ok
    assert single.detail.startswith("one host")
