"""An explicit KILN_INSTANCE belongs to one data directory (kiln issue 29): two real ``kiln
serve`` processes with the same instance and different data directories; the second refuses
to start, in words and with its code, and leaves the first one's sandbox network alone. The
same data directory starts again; after the claim is released the other one starts. Hosts of
one deployment (a shared database, issue 28) share the claim: it is keyed by the deployment."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from sandbox.errors import InstanceClaimed
from sandbox.lifecycle.instance_claim import (
    DATA_DIR_LABEL,
    DEPLOYMENT_LABEL,
    claim_instance,
    claim_volume_name,
)
from tests.app.kiln_process import LOGIN_LINK, KilnProcess, hello_recordings, kiln_env
from tests.sandbox.docker_support import swept_instance
from tests.servers import free_port

pytestmark = [pytest.mark.docker, pytest.mark.redis]
START_LIMIT_SECONDS = 120.0


@pytest.fixture
def instance(redis_url: str) -> Iterator[str]:
    """An explicit instance of the test's own; everything of it is swept afterwards."""
    with swept_instance("test-claim", redis_url) as name:
        yield name


def serve_args(data: Path) -> list[str]:
    return ["serve", "--port", str(free_port()), "--data-dir", str(data), "--no-build"]


def serve_to_the_end(data: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A ``kiln serve`` expected to refuse at start: run until it exits."""
    argv = [sys.executable, "-m", "app", *serve_args(data)]
    return subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=START_LIMIT_SECONDS
    )


def test_a_second_data_dir_on_a_claimed_instance_refuses_to_start(
    tmp_path: Path, instance: str
) -> None:
    env = kiln_env(instance, hello_recordings(tmp_path / "rec"))
    first, second = tmp_path / "first", tmp_path / "second"
    client = docker.from_env()
    try:
        with KilnProcess(serve_args(first), env, tmp_path / "first.log") as served:
            served.wait_for(LOGIN_LINK)
            claim = client.volumes.get(claim_volume_name(instance))
            assert claim.attrs["Labels"][DATA_DIR_LABEL] == str(first.resolve())
            network = f"kiln-sandboxes-{instance}"
            assert client.networks.list(names=[network])  # the first server's, made at start
            refused = serve_to_the_end(second, env)
            assert refused.returncode == 1, refused.stderr
            words = refused.stderr.strip().splitlines()[-1]
            assert words.startswith(f"kiln serve: KILN_INSTANCE {instance!r} belongs to"), words
            assert str(first.resolve()) in words
            assert words.endswith("[instance_claimed]")
            assert "Traceback" not in refused.stderr
            assert client.networks.list(names=[network])  # untouched by the refused one
        with KilnProcess(serve_args(first), env, tmp_path / "again.log") as again:
            again.wait_for(LOGIN_LINK)  # its own claim: no refusal
        client.volumes.get(claim_volume_name(instance)).remove()  # released, as the words say
        with KilnProcess(serve_args(second), env, tmp_path / "second.log") as moved:
            moved.wait_for(LOGIN_LINK)
        claim = client.volumes.get(claim_volume_name(instance))
        assert claim.attrs["Labels"][DATA_DIR_LABEL] == str(second.resolve())
    finally:
        client.close()


@pytest.mark.anyio
async def test_hosts_of_one_deployment_share_the_claim_and_others_are_refused(
    tmp_path: Path, instance: str
) -> None:
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    await claim_instance(instance, host_a, "deployment-1")
    await claim_instance(instance, host_b, "deployment-1")  # another data dir, one database
    with pytest.raises(InstanceClaimed, match="belongs to the deployment 'deployment-1'"):
        await claim_instance(instance, host_b, "deployment-2")
    with pytest.raises(InstanceClaimed, match="not to the data directory"):
        await claim_instance(instance, host_a)  # a single-host kiln, even in a host's data dir
    client = docker.from_env()
    try:
        labels = client.volumes.get(claim_volume_name(instance)).attrs["Labels"]
    finally:
        client.close()
    assert labels[DEPLOYMENT_LABEL] == "deployment-1"


@pytest.mark.anyio
async def test_a_data_dir_claim_refuses_a_deployment(tmp_path: Path, instance: str) -> None:
    await claim_instance(instance, tmp_path)
    with pytest.raises(InstanceClaimed, match=f"belongs to the data directory '{tmp_path}'"):
        await claim_instance(instance, tmp_path, "deployment-1")
