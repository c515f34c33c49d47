"""The vite-react image's dev-server supervisor (images/vite-react/kiln-dev.mjs), on the real
engine: a dev server that dies comes back, an install (a write of package.json) starts it over
as a new process, and a stop ends it cleanly.

The container is started with the template's own command, as kiln starts it, and labelled with
the session's instance so the session's sweep removes it whatever happens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import docker
import httpx
import pytest
from docker.models.containers import Container

from sandbox.images.templates import get_template
from sandbox.settings import LABEL
from tests.sandbox.docker_support import TestInstances
from tests.waiting import wait_until

TEMPLATE = get_template("vite-react")
LIMIT_SECONDS = 60.0
# Every process whose command line names Vite's binary gets SIGKILL (the image has no pkill).
KILL_VITE = (
    'for p in /proc/[0-9]*; do case "$(tr "\\0" " " < $p/cmdline 2>/dev/null)" in '
    "*bin/vite*) kill -9 ${p#/proc/};; esac; done"
)


def _until(check: Callable[[], bool], what: str) -> None:
    wait_until(check, what, limit=LIMIT_SECONDS, interval=0.2)


def _serves(container: Container) -> bool:
    container.reload()
    address = next(iter(container.attrs["NetworkSettings"]["Networks"].values()))["IPAddress"]
    try:
        response = httpx.get(f"http://{address}:{TEMPLATE.dev_port}/", timeout=2.0)
    except httpx.TransportError:
        return False
    return response.status_code == 200


def _log(container: Container) -> str:
    logs: bytes = container.logs()
    return logs.decode(errors="replace")


@pytest.fixture
def dev_container(
    docker_client: docker.DockerClient, instances: TestInstances
) -> Iterator[Container]:
    container = docker_client.containers.run(
        f"kiln/sandbox-{TEMPLATE.name}:latest",
        list(TEMPLATE.dev_command),
        detach=True,
        init=True,
        labels={LABEL: "dev-supervisor", "kiln.instance": instances.main},
    )
    try:
        _until(lambda: _serves(container), "the dev server serves its first page")
        yield container
    finally:
        container.remove(force=True)


def test_a_dev_server_that_dies_is_started_again(dev_container: Container) -> None:
    dev_container.exec_run(["sh", "-c", KILL_VITE])
    _until(lambda: "the dev server exited" in _log(dev_container), "the supervisor saw it")
    _until(lambda: _serves(dev_container), "the dev server serves again")


def test_an_install_starts_the_dev_server_over(dev_container: Container) -> None:
    # npm rewrites package.json at an install's end, often with the very same content.
    dev_container.exec_run(["sh", "-c", "touch package.json"])
    _until(lambda: "packages changed" in _log(dev_container), "the supervisor restarted it")
    _until(lambda: _log(dev_container).count("ready in") == 2, "a second Vite started")
    _until(lambda: _serves(dev_container), "the dev server serves again")


def test_a_stop_ends_the_supervisor_and_its_dev_server(dev_container: Container) -> None:
    dev_container.stop(timeout=10)
    dev_container.reload()
    assert dev_container.attrs["State"]["ExitCode"] == 0
