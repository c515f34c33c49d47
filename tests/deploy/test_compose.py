"""compose.yaml, brought up for real with pytest-docker and Debian's ``docker-compose`` (v1).

The images are built first, as ``kiln images build --service`` builds them (offline: local
stand-ins for the Python and Redis bases), and reused when their inputs did not change. The
stack runs as its own compose project with its own kiln instance, ports, network, npm proxy
and caches, so it never meets another test session's objects. One replay run (the todo demo)
goes through the HTTP API to ``run_finished``, and its preview is fetched through the API
container, which proves that container reaches the sandbox's internal network.

Afterwards ``docker-compose down -v`` removes the project; the sandboxes the worker made are
swept by their ``kiln.instance`` label, and the session fails if anything of either is left.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import docker
import httpx
import pytest
import yaml

from app.deploy.service_images import ServiceImageBuilder, ServiceImageSettings
from sandbox.containers.labels import INSTANCE_LABEL
from sandbox.docker_boundary import connect
from sandbox.images.builder import ImageBuilder
from sandbox.images.docker_build import BuildResult
from sandbox.images.settings import ImageBuildSettings
from sandbox.settings import LABEL
from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "compose.yaml"
# The checkout's sibling ``shared/`` folder (``/work/shared`` here, beside the clone in CI).
TIKTOKEN_CACHE = ROOT.parent / "shared" / "tiktoken-cache"
PROJECT_LABEL = "com.docker.compose.project"
DEMO = "todo-app"
STARTUP_TIMEOUT = 180.0  # guards against hanging, not speed requirements
RUN_READ_TIMEOUT = 120.0


@dataclass(frozen=True)
class Stack:
    """What this session's compose project is called and where its API listens."""

    project: str
    instance: str
    api_port: int
    redis_port: int
    env_file: Path

    @property
    def compose(self) -> list[str]:
        """The ``docker-compose`` argv prefix for this project."""
        return [
            "docker-compose",
            "--env-file",
            str(self.env_file),
            "-f",
            str(COMPOSE_FILE),
            "-p",
            self.project,
        ]

    @property
    def base_url(self) -> str:
        """The API, on the host's network."""
        return f"http://127.0.0.1:{self.api_port}"


# --- compose.yaml as written ----------------------------------------------------------------------


def _services() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    return services


def test_the_docker_socket_goes_to_the_kiln_services_only() -> None:
    mounts = {
        name: [v for v in service.get("volumes", []) if "docker.sock" in v]
        for name, service in _services().items()
    }
    socket = ["/var/run/docker.sock:/var/run/docker.sock"]
    assert mounts == {"redis": [], "postgres": [], "api": socket, "worker": socket}


def test_the_api_leaves_runs_warm_sandboxes_and_builds_to_others() -> None:
    api = _services()["api"]
    assert api["command"] == ["kiln", "serve", "--no-worker", "--no-build"]
    assert api["environment"]["KILN_WARM_POOL_SIZE"] == "0"


@pytest.mark.parametrize(
    ("service", "probe"),
    [pytest.param("redis", "redis-cli"), pytest.param("api", "/healthz")],
)
def test_the_servers_have_health_checks(service: str, probe: str) -> None:
    assert probe in " ".join(_services()[service]["healthcheck"]["test"])


def test_the_image_tags_are_the_builders() -> None:
    defaults = ServiceImageSettings()
    services = _services()
    assert services["api"]["image"] == f"${{KILN_SERVICE_IMAGE:-{defaults.kiln_image}}}"
    assert services["worker"]["image"] == services["api"]["image"]
    assert services["redis"]["image"] == f"${{KILN_REDIS_IMAGE:-{defaults.redis_image}}}"


HOSTS_FILE = ROOT / "compose.hosts.yaml"
SHARED = {
    "KILN_SECRET_KEY": "s" * 32,
    "KILN_DATABASE_URL": "postgresql://kiln:pw@10.0.0.1:5433/kiln",
    "KILN_PROJECTS_SHARE": "/mnt/kiln-projects",
    "KILN_REDIS_HOST": "10.0.0.1",
    "KILN_REDIS_PASSWORD_SECRET": "/etc/kiln/redis-password",
}


def _merged_config(env: dict[str, str], folder: Path) -> subprocess.CompletedProcess[str]:
    """``docker-compose config`` of compose.yaml with compose.hosts.yaml, given only ``env``
    (and an empty env file in ``folder``: no ``.env`` of the checkout)."""
    (folder / "empty.env").touch()
    files = ["-f", str(COMPOSE_FILE), "-f", str(HOSTS_FILE)]
    argv = ["docker-compose", "--env-file", str(folder / "empty.env"), *files, "config"]
    environment = {"PATH": os.environ["PATH"], **env}
    return subprocess.run(argv, capture_output=True, text=True, env=environment, check=False)


def test_the_default_keeps_projects_in_the_data_volume() -> None:
    for name in ("api", "worker"):
        assert "KILN_PROJECTS_DIR" not in _services()[name]["environment"]
        assert "KILN_PUBLISHED_DIR" not in _services()[name]["environment"]


def test_every_host_mounts_the_shared_projects_and_reaches_one_redis(tmp_path: Path) -> None:
    done = _merged_config(SHARED, tmp_path)
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    for name in ("api", "worker"):
        environment, volumes = services[name]["environment"], services[name]["volumes"]
        assert environment["KILN_PROJECTS_DIR"] == "/var/lib/kiln-projects"
        assert environment["KILN_PUBLISHED_DIR"] == "/var/lib/kiln-projects/published"
        assert environment["REDIS_URL"] == "redis://10.0.0.1:6380/0"
        assert environment["KILN_DATABASE_URL"] == SHARED["KILN_DATABASE_URL"]
        assert "/mnt/kiln-projects:/var/lib/kiln-projects:rw" in volumes
        assert environment["KILN_REDIS_PASSWORD_FILE"] == "/run/secrets/redis_password"
        assert services[name]["secrets"] == [{"source": "redis_password"}]
    assert services["redis"]["ports"][0].startswith("127.0.0.1:")  # unless KILN_REDIS_BIND


def test_redis_across_hosts_wants_the_secrets_password(tmp_path: Path) -> None:
    done = _merged_config(SHARED, tmp_path)
    assert done.returncode == 0, done.stderr
    merged = yaml.safe_load(done.stdout)
    assert merged["secrets"]["redis_password"]["file"] == SHARED["KILN_REDIS_PASSWORD_SECRET"]
    redis_service = merged["services"]["redis"]
    assert redis_service["secrets"] == [{"source": "redis_password"}]
    started = " ".join(redis_service["command"])
    assert "--include /tmp/requirepass.conf" in started  # the password never on a command line
    assert "redis_password" in " ".join(redis_service["healthcheck"]["test"])  # it signs in


@pytest.mark.parametrize(
    "missing",
    [
        pytest.param("KILN_SECRET_KEY", id="secret-key"),
        pytest.param("KILN_DATABASE_URL", id="database"),
        pytest.param("KILN_PROJECTS_SHARE", id="projects-share"),
        pytest.param("KILN_REDIS_PASSWORD_SECRET", id="redis-password"),
    ],
)
def test_a_host_without_a_shared_setting_does_not_start(missing: str, tmp_path: Path) -> None:
    done = _merged_config({k: v for k, v in SHARED.items() if k != missing}, tmp_path)
    assert done.returncode != 0
    assert f"set {missing}" in done.stderr


# --- the stack, for real --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[docker.DockerClient]:
    """A Docker client for setup and assertions; fails (never skips) without an engine."""
    client = connect()
    yield client
    client.close()


async def _build_images(client: docker.DockerClient) -> list[BuildResult]:
    images = ImageBuildSettings.from_env()
    service = ServiceImageSettings.from_env()
    if not service.tiktoken_cache_dir or not Path(service.tiktoken_cache_dir).is_dir():
        service = replace(service, tiktoken_cache_dir=str(TIKTOKEN_CACHE))
    results = await ImageBuilder(client, images, print).build()
    return results + await ServiceImageBuilder(client, images, service, print).build()


@pytest.fixture(scope="session")
def service_images(docker_engine: docker.DockerClient) -> list[BuildResult]:
    """The sandbox images and the service images, built unless they are current."""
    return anyio.run(_build_images, docker_engine)


@pytest.fixture(scope="session")
def stack(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: docker.DockerClient
) -> Iterator[Stack]:
    """This session's project settings; at the end, nothing of it may be left."""
    token = secrets.token_hex(4)
    instance = f"compose-{token}"
    env_file = tmp_path_factory.mktemp("compose") / "kiln.env"
    created = Stack(f"kilntest{token}", instance, free_port(), free_port(), env_file)
    settings = {
        "KILN_INSTANCE": instance,
        "KILN_PORT": created.api_port,
        "KILN_REDIS_PORT": created.redis_port,
        "KILN_HOST": "127.0.0.1",
        "KILN_WARM_POOL_SIZE": 0,
        "KILN_WORKER_CONCURRENCY": 1,
    }
    env_file.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    yield created
    # pytest-docker has run `down` already, unless `up` itself failed; this is a no-op then.
    _compose(created, "down", "-v", "--remove-orphans", "--timeout", "30")
    left = _project_leftovers(docker_engine, created.project)
    swept = _sweep_instance(docker_engine, instance)
    assert not left, f"the compose project left {left}"
    assert not _instance_leftovers(docker_engine, instance), "sandboxes survived the sweep"
    print(f"swept the worker's sandboxes: {swept}")


def _compose(stack: Stack, *arguments: str) -> subprocess.CompletedProcess[str]:
    argv = [*stack.compose, *arguments]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)


def _project_leftovers(client: docker.DockerClient, project: str) -> list[str]:
    filters = {"label": f"{PROJECT_LABEL}={project}"}
    return (
        [
            f"container {c.name}"
            for c in client.containers.list(all=True, filters=filters, ignore_removed=True)
        ]
        + [f"network {n.name}" for n in client.networks.list(filters=filters)]
        + [f"volume {v.name}" for v in client.volumes.list(filters=filters)]
    )


def _instance_leftovers(client: docker.DockerClient, instance: str) -> list[Any]:
    filters = {"label": [LABEL, f"{INSTANCE_LABEL}={instance}"]}
    return [
        *client.containers.list(all=True, filters=filters, ignore_removed=True),
        *client.networks.list(filters=filters),
        *client.volumes.list(filters=filters),
    ]


def _sweep_instance(client: docker.DockerClient, instance: str) -> list[str]:
    """Remove the worker's sandboxes (containers first, then their networks and volumes)."""
    removed = []
    for item in _instance_leftovers(client, instance):
        if hasattr(item, "status"):
            item.remove(force=True, v=True)
        else:
            item.remove()
        removed.append(str(item.name))
    return removed


@pytest.fixture(scope="session")
def docker_compose_command(stack: Stack, service_images: list[BuildResult]) -> str:
    """pytest-docker's command: Compose v1 with this session's settings (images built)."""
    return f"docker-compose --env-file {shlex.quote(str(stack.env_file))}"


@pytest.fixture(scope="session")
def docker_compose_file() -> str:
    """The repository's compose.yaml."""
    return str(COMPOSE_FILE)


@pytest.fixture(scope="session")
def docker_compose_project_name(stack: Stack) -> str:
    """A project name of this session only."""
    return stack.project


@pytest.fixture(scope="session")
def docker_setup() -> list[str]:
    """Start from the images built above, never from a plain ``docker build``."""
    return ["up -d --no-build"]


@pytest.fixture(scope="session")
def docker_cleanup() -> list[str]:
    """Containers, the project's network and its named volumes."""
    return ["down -v --remove-orphans --timeout 30"]


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="session")
def api(stack: Stack, docker_services: Any) -> Iterator[httpx.Client]:
    """An API client with a fresh user's token, once ``/healthz`` says all is well."""
    try:
        docker_services.wait_until_responsive(
            check=lambda: _healthy(stack.base_url), timeout=STARTUP_TIMEOUT, pause=1.0
        )
    except Exception:
        print(_logs(stack))
        raise
    token = _create_user(stack, "test")
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=stack.base_url, headers=headers, timeout=30) as client:
        yield client


def _create_user(stack: Stack, name: str) -> str:
    done = _compose(stack, "exec", "-T", "api", "kiln", "user", "create", name, "--json")
    assert done.returncode == 0, done.stderr
    token: str = json.loads(done.stdout)["token"]
    return token


def _logs(stack: Stack) -> str:
    return _compose(stack, "logs", "--no-color", "--tail", "80").stdout


def _follow_run(api: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    """Every event of the run, read from its SSE stream until ``run_finished``."""
    events: list[dict[str, Any]] = []
    timeout = httpx.Timeout(30.0, read=RUN_READ_TIMEOUT)
    with api.stream("GET", f"/api/runs/{run_id}/events", timeout=timeout) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line.removeprefix("data:").strip()))
                if events[-1].get("type") == "run_finished":
                    break
    return events


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1500)  # a cold machine builds every image first
def test_a_replay_run_completes_through_compose_and_its_preview_is_served(
    api: httpx.Client, stack: Stack
) -> None:
    health = api.get("/healthz").json()
    assert health["ok"] is True, health
    chat = api.post("/api/chats", json={"title": "compose"}).json()["chat"]
    posted = api.post(
        f"/api/chats/{chat['id']}/messages",
        json={"content": "a todo app", "provider": "replay", "model": DEMO},
    )
    assert posted.status_code == 202, posted.text
    run_id = posted.json()["run_id"]
    events = _follow_run(api, run_id)
    finished = events[-1]
    if finished.get("status") != "completed":
        print(_logs(stack))
    assert finished["type"] == "run_finished"
    assert finished["status"] == "completed", finished
    run = api.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "completed"
    preview_host = f"{run['sandbox_id']}.preview.kiln.localhost:{stack.api_port}"
    page = api.get("/src/App.jsx", headers={"Host": preview_host})
    assert page.status_code == 200, page.text[:500]
    assert "Clear done" in page.text  # the generated app, served by its Vite dev server
