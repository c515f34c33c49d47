"""The vite-react image's dev-server supervisor (images/vite-react/kiln-dev.mjs), on the real
engine: a dev server that dies comes back; an install that only adds a package (or npm's
same-content write of package.json) keeps the same process, which then serves the new package;
an install that changes an installed package's version starts it over as a new process; a stop
ends it cleanly. Packages are installed offline from tarballs packed in the container. The app's
environment written by kiln (sandbox.execution.app_env) starts it over with the new variables,
which the served modules and the resident builder's build then show.

The container is started with the template's own command, as kiln starts it, and labelled with
the session's instance so the session's sweep removes it whatever happens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import docker
import httpx
import pytest
from docker.models.containers import Container

from sandbox.containers.hardening import APP_ENV_TMPFS
from sandbox.execution.app_env import WRITE_SCRIPT, shell_file
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
# The PIDs of the node processes running Vite's binary (not this shell, which names it too).
VITE_PIDS = (
    'for p in /proc/[0-9]*; do case "$(tr "\\0" " " < $p/cmdline 2>/dev/null)" in '
    "node*bin/vite*) echo ${p#/proc/};; esac; done"
)
# A package `kiln-hello` of version $1 packed into /tmp and installed offline (npm rewrites
# package.json and node_modules/.package-lock.json, as any install does).
INSTALL_HELLO = (
    "set -e; d=/tmp/kiln-hello-$1; mkdir -p $d; cd $d; "
    """printf '{"name":"kiln-hello","version":"%s","type":"module","main":"index.js"}' $1 """
    "> package.json; printf 'export const hello = \"v%s\"\\n' $1 > index.js; "
    "npm pack --pack-destination /tmp >/dev/null; cd /workspace; "
    "npm install --offline --no-audit --no-fund /tmp/kiln-hello-$1.tgz"
)
ADDED = "added, none changed or removed: the dev server keeps running"


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
        tmpfs=APP_ENV_TMPFS,
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


def _vite_pids(container: Container) -> str:
    return str(container.exec_run(["sh", "-c", VITE_PIDS]).output.decode().split())


def _install_hello(container: Container, version: str) -> None:
    result = container.exec_run(["sh", "-c", INSTALL_HELLO, "sh", version], workdir="/workspace")
    assert result.exit_code == 0, result.output.decode(errors="replace")


def _serves_hello(container: Container, version: str) -> bool:
    """Whether a module importing ``kiln-hello`` is served with Vite's pre-bundled copy of it,
    and that copy is ``version``'s."""
    container.reload()
    address = next(iter(container.attrs["NetworkSettings"]["Networks"].values()))["IPAddress"]
    base = f"http://{address}:{TEMPLATE.dev_port}"
    try:
        module = httpx.get(f"{base}/src/hello.js", timeout=5.0)
        found = re.search(r"/node_modules/\.vite/deps/kiln-hello\.js[^\"']*", module.text)
        bundled = httpx.get(f"{base}{found[0]}", timeout=5.0) if found else None
    except httpx.TransportError:
        return False
    return bundled is not None and bundled.status_code == 200 and f"v{version}" in bundled.text


def test_a_same_content_write_of_package_json_keeps_the_dev_server(
    dev_container: Container,
) -> None:
    # npm rewrites package.json at every install's end, often with the very same content.
    before = _vite_pids(dev_container)
    dev_container.exec_run(["sh", "-c", "touch package.json"])
    _until(lambda: f"0 {ADDED}" in _log(dev_container), "the supervisor looked at the change")
    assert _log(dev_container).count("ready in") == 1
    assert _vite_pids(dev_container) == before
    assert _serves(dev_container)


def test_an_added_package_keeps_the_dev_server_and_is_served(dev_container: Container) -> None:
    before = _vite_pids(dev_container)
    write = "printf 'export { hello } from \"kiln-hello\"\\n' > src/hello.js"
    dev_container.exec_run(["sh", "-c", write], workdir="/workspace")
    _install_hello(dev_container, "1.0.0")
    _until(lambda: f"1 {ADDED}" in _log(dev_container), "the supervisor looked at the install")
    _until(lambda: _serves_hello(dev_container, "1.0.0"), "the new package is served")
    assert _log(dev_container).count("ready in") == 1
    assert _vite_pids(dev_container) == before


def test_a_changed_package_version_starts_the_dev_server_over(dev_container: Container) -> None:
    write = "printf 'export { hello } from \"kiln-hello\"\\n' > src/hello.js"
    dev_container.exec_run(["sh", "-c", write], workdir="/workspace")
    _install_hello(dev_container, "1.0.0")
    _until(lambda: _serves_hello(dev_container, "1.0.0"), "the first version is served")
    _install_hello(dev_container, "2.0.0")
    _until(lambda: "packages changed: restarting" in _log(dev_container), "it started over")
    _until(lambda: _log(dev_container).count("ready in") == 2, "a second Vite started")
    _until(lambda: _serves_hello(dev_container, "2.0.0"), "the new version is served")


def test_a_stop_ends_the_supervisor_and_its_dev_server(dev_container: Container) -> None:
    dev_container.stop(timeout=10)
    dev_container.reload()
    assert dev_container.attrs["State"]["ExitCode"] == 0


# A module that shows the app's environment as Vite serves it, and a page that renders it into
# the build's output.
ENV_MODULE = "export const shown = [import.meta.env.VITE_GREETING, import.meta.env.VITE_GONE]\n"


def _write_app_env(container: Container, values: dict[str, str]) -> None:
    """What kiln's write_app_env does, with the SDK's blocking calls."""
    environment = {
        "KILN_APP_ENV_SHELL": shell_file(values),
        "KILN_APP_ENV_JSON": json.dumps(values, sort_keys=True),
    }
    result = container.exec_run(["sh", "-c", WRITE_SCRIPT], user="0:0", environment=environment)
    assert result.exit_code == 0, result.output.decode(errors="replace")


def _served_env_module(container: Container) -> str:
    container.reload()
    address = next(iter(container.attrs["NetworkSettings"]["Networks"].values()))["IPAddress"]
    try:
        module = httpx.get(f"http://{address}:{TEMPLATE.dev_port}/src/env.js", timeout=5.0)
    except httpx.TransportError:
        return ""
    return module.text if module.status_code == 200 else ""


def test_a_changed_app_environment_starts_the_dev_server_over_with_it(
    dev_container: Container,
) -> None:
    write = f"printf '{ENV_MODULE}' > src/env.js"
    dev_container.exec_run(["sh", "-c", write], workdir="/workspace")
    _write_app_env(dev_container, {"VITE_GREETING": "hello from kiln", "VITE_GONE": "soon gone"})
    _until(lambda: "environment changed: restarting" in _log(dev_container), "it started over")
    _until(lambda: "hello from kiln" in _served_env_module(dev_container), "the value is served")
    _write_app_env(dev_container, {"VITE_GREETING": "greeting-v2-kiln"})
    _until(
        lambda: "greeting-v2-kiln" in _served_env_module(dev_container), "the new value is served"
    )
    assert "soon gone" not in _served_env_module(dev_container)
    build = dev_container.exec_run(list(TEMPLATE.builder), workdir="/workspace")
    assert build.exit_code == 0, build.output.decode(errors="replace")
    assert "greeting-v2-kiln" not in _built_javascript(dev_container)  # nothing imports env.js yet
    page = 'import { shown } from "./env.js"\ndocument.title = shown.join()\n'
    dev_container.exec_run(["sh", "-c", f"printf '{page}' >> src/main.jsx"], workdir="/workspace")
    build = dev_container.exec_run(list(TEMPLATE.builder), workdir="/workspace")
    assert build.exit_code == 0, build.output.decode(errors="replace")
    assert "greeting-v2-kiln" in _built_javascript(dev_container)


def _built_javascript(container: Container) -> str:
    result = container.exec_run(["sh", "-c", "cat dist/assets/*.js"], workdir="/workspace")
    return str(result.output.decode(errors="replace"))
