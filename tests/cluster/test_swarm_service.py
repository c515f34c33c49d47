"""``kiln serve`` itself on the session's real swarm (``KILN_SANDBOX_BACKEND=swarm``): the chat
API builds the demo app on a node (a real install through that node's npm proxy), the render
check runs in the sandbox's own namespace on that node (kiln copies the browser's image there
at its first check: no module loads it), the preview serves the app; then the node of the chat's
sandbox is killed while a run streams: the run ends in words (``sandbox_lost``, never a
traceback), and the chat's next message restores its project on another node, where the run
completes and the preview serves the restored and the new files. Last, the node the chat moved
to is drained: the chat's next message moves it again (restored on the node left).

The manager node is drained for the module (sandboxes then land on the two workers only): the
node killed is never the one keeping the swarm; it is made active again, and the killed engine
started again, before the module ends.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from sandbox.images.builder import RENDER_IMAGE
from sandbox.images.templates import get_template
from sandbox.lifecycle.instance_claim import claim_volume_name
from sandbox.lifecycle.manager import SandboxManager
from sandbox.preview.render_check import RENDER_ROLE, RENDER_ROLE_LABEL
from sandbox.settings import LABEL, SandboxSettings
from tests.app.kiln_process import LOGIN_LINK, KilnProcess, kiln_env
from tests.cluster import nodes
from tests.cluster.forward_proxy import ForwardProxy, forward_proxy
from tests.cluster.nodes import Cluster
from tests.cluster.test_swarm_end_to_end import swarm_env
from tests.redis_server import start_redis, stop_redis
from tests.servers import free_port
from tests.service.chat_api import Event, finished, follow, new_chat, post, preview_headers
from tests.waiting import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.npm, pytest.mark.slow]
CLUSTER_IMAGES = (get_template("vite-react").image, get_template("vanilla").image)
RECORDINGS = Path(__file__).resolve().parents[3] / "shared" / "recordings"
SUBNET = "10.217.0.0/24"  # clear of the other cluster modules' subnets
RUN_LIMIT_SECONDS = 400.0  # the first run also copies the render browser to its node
PREVIEW_LIMIT_SECONDS = 120.0
REAP_INTERVAL_SECONDS = 2.0  # the reaper sweeps the node that came back this often
SWEPT_LIMIT_SECONDS = 60.0
LONG_LINES = 120
# Paced at the replay's 100 tokens/s: the long file still streams when the node is killed.
SLOW = (
    "<Response>\nThree more files, slowly.\n"
    '<edward_sandbox project="todo" base="vite-react">\n'
    '<file path="src/first.js">\nexport const FIRST = 1;\n</file>\n'
    '<file path="src/long.js">\nexport const LINES = [\n'
    + "".join(f'  "line {n}: streamed while a node dies",\n' for n in range(LONG_LINES))
    + "];\n</file>\n"
    '<file path="src/last.js">\nexport const LAST = 3;\n</file>\n'
    "</edward_sandbox>\n</Response>\n<edward_done />\n"
)
AGAIN = (
    "<Response>\nA note, on another node.\n"
    '<edward_sandbox project="todo" base="vite-react">\n'
    '<file path="src/note.js">\nexport const NOTE = "written after the node was lost";\n</file>\n'
    "</edward_sandbox>\n</Response>\n<edward_done />\n"
)

THIRD = (
    "<Response>\nOne more file, on the node left.\n"
    '<edward_sandbox project="todo" base="vite-react">\n'
    '<file path="src/third.js">\nexport const THIRD = "after the drain";\n</file>\n'
    "</edward_sandbox>\n</Response>\n<edward_done />\n"
)


@dataclass
class Service:
    """The module's ``kiln serve`` on the swarm and a client signed in to it."""

    cluster: Cluster
    process: KilnProcess
    http: httpx.Client
    port: int
    upstream: ForwardProxy
    instance: str
    chat_id: str = ""
    sandbox_id: str = ""


def set_availability(cluster: Cluster, node: nodes.Node, availability: str) -> None:
    """Set ``node``'s swarm availability (``drain`` or ``active``) on the test swarm."""
    with closing(cluster.manager.client()) as manager:
        for swarm_node in manager.nodes.list():
            if swarm_node.attrs["Status"]["Addr"] == node.address:
                spec = dict(swarm_node.attrs["Spec"], Availability=availability)
                swarm_node.update(spec)


@pytest.fixture(scope="module")
def service(swarm_nodes: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """``kiln serve`` on the swarm with the manager node drained, signed in; stopped, its
    sandboxes removed and the manager made active again at the end."""
    root = tmp_path_factory.mktemp("swarm-service")
    recordings = root / "recordings"
    recordings.mkdir()
    (recordings / "todo.txt").write_text((RECORDINGS / "todo-vite-react.txt").read_text())
    (recordings / "slow.txt").write_text(SLOW)
    (recordings / "again.txt").write_text(AGAIN)
    (recordings / "third.txt").write_text(THIRD)
    redis, redis_url = start_redis(tmp_path_factory.mktemp("redis"))
    instance = f"test-swarmsrv-{secrets.token_hex(3)}"
    set_availability(swarm_nodes, swarm_nodes.manager, "drain")
    try:
        with forward_proxy(f"{swarm_nodes.subnet}.1") as upstream:
            env = kiln_env(
                instance,
                recordings,
                **swarm_env(swarm_nodes, instance, SUBNET, upstream.url),
                REDIS_URL=redis_url,
                KILN_REAP_INTERVAL=str(REAP_INTERVAL_SECONDS),
            )
            port = free_port()
            argv = ["serve", "--port", str(port), "--data-dir", str(root / "data"), "--no-build"]
            try:
                with KilnProcess(argv, env, root / "serve.log") as process:
                    link = process.wait_for(LOGIN_LINK)
                    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
                        assert http.get("/login" + link.split("/login", 1)[1]).status_code == 303
                        yield Service(swarm_nodes, process, http, port, upstream, instance)
            finally:
                anyio.run(remove_everything, env)
                # The instance's claim, kept on purpose by a stopped server, is on the engine
                # kiln serve was given (the manager's).
                with closing(swarm_nodes.manager.client()) as manager:
                    manager.volumes.get(claim_volume_name(instance)).remove()
    finally:
        set_availability(swarm_nodes, swarm_nodes.manager, "active")
        stop_redis(redis)


async def remove_everything(env: dict[str, str]) -> None:
    """What the stopped kiln parked on the nodes (sandboxes, proxies with their caches, relays,
    disk keepers, the network), removed through a manager opened on the same settings."""
    with pytest.MonkeyPatch.context() as patched:
        for name, value in env.items():
            patched.setenv(name, value)
        manager = await SandboxManager.open(SandboxSettings.from_env(env))
        try:
            for record in await manager.list():
                await manager.destroy(record.id)
            await manager.backend.release_shared()
        finally:
            await manager.aclose()


def node_of_sandbox(cluster: Cluster, sandbox_id: str) -> nodes.Node:
    """The node whose engine runs the sandbox's container (of those whose engine answers)."""
    for node in filter(nodes.engine_answers, cluster.nodes):
        with closing(node.client(timeout=10)) as client:
            if client.containers.list(filters={"label": f"{LABEL}={sandbox_id}"}):
                return node
    raise AssertionError(f"no node runs sandbox {sandbox_id!r}")


def preview(service: Service, path: str, expected: str) -> httpx.Response:
    """``path`` of the chat's preview, signed in, once it holds ``expected`` (the dev server
    may still be starting, or hear of a file a moment after it was written)."""
    headers = preview_headers(service.http, service.http, service.sandbox_id, service.port)
    deadline = time.monotonic() + PREVIEW_LIMIT_SECONDS
    while True:
        page = service.http.get(path, headers=headers)
        if expected in page.text or time.monotonic() > deadline:
            return page
        time.sleep(0.5)  # polling under the deadline above


def of_type(events: list[Event], kind: str) -> list[dict[str, Any]]:
    """The events of one type."""
    return [event for _seq, event in events if event["type"] == kind]


def test_serve_builds_the_demo_app_on_a_node_and_checks_its_render_there(
    service: Service,
) -> None:
    chat_id, run_id = new_chat(service.http, "todo")
    events = follow(service.http, run_id, limit=RUN_LIMIT_SECONDS)
    assert finished(events)["status"] == "completed", events[-3:]
    service.chat_id = chat_id
    service.sandbox_id = service.http.get(f"/api/runs/{run_id}").json()["sandbox_id"]
    [postgen] = of_type(events, "postgen")
    render = postgen["render"]
    assert (render["ok"], render["skipped"], render["errors"]) == (True, None, []), render
    node = node_of_sandbox(service.cluster, service.sandbox_id)
    assert node is not service.cluster.manager  # drained
    assert nodes.node_image_id(node, RENDER_IMAGE) is not None  # copied there for its check
    assert "registry.npmjs.org:443" in service.upstream.tunnels  # the install, from the node
    page = preview(service, "/src/App.jsx", "Todos")
    assert page.status_code == 200, page.text
    assert "Todos" in page.text


# docker-py leaks the socket of a refused unix-socket connection (the killed node's engine): see
# test_swarm_end_to_end.py.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_node_lost_mid_run_ends_the_run_in_words_and_the_next_message_moves_the_chat(
    service: Service,
) -> None:
    assert service.chat_id, "the first test made the chat"
    lost_sandbox = service.sandbox_id
    lost = node_of_sandbox(service.cluster, lost_sandbox)
    run_id = post(service.http, service.chat_id, "slow")
    before = follow(
        service.http,
        run_id,
        stop=lambda e: e["type"] == "file_written" and "first" in e["path"],
        limit=RUN_LIMIT_SECONDS,
    )
    nodes.kill_engine(lost)
    try:
        after = follow(service.http, run_id, after=before[-1][0], limit=RUN_LIMIT_SECONDS)
        ending = finished(after)
        assert ending["status"] == "failed", ending
        errors = of_type(after, "error")
        assert [error["code"] for error in errors][-1:] == ["sandbox_lost"], errors
        for error in errors:
            assert "Traceback" not in error["message"]
            assert "TaskGroup" not in error["message"]
        elsewhere = message_moves_the_chat(service, "again")
        assert elsewhere not in (lost, service.cluster.manager)
        assert "Todos" in preview(service, "/src/App.jsx", "Todos").text  # restored
        note = preview(service, "/src/note.js", "after the node was lost")
        assert "written after the node was lost" in note.text
    finally:
        nodes.restart_engine(service.cluster, lost)
    # Back, the node holds the moved sandbox's workspace and the render browser kiln could not
    # remove while it was away: kiln's reaper sweeps them (KILN_REAP_INTERVAL).
    left = wait_swept(lost, service.instance, lost_sandbox)
    assert not left, f"kiln left on the node that came back: {left}"


def test_a_drained_nodes_sandbox_moves_when_its_chat_is_next_used(service: Service) -> None:
    assert service.chat_id, "the first test made the chat"
    drained = node_of_sandbox(service.cluster, service.sandbox_id)
    set_availability(service.cluster, drained, "drain")
    try:
        # The swarm stops the drained node's tasks (pinned there, they are not moved).
        old = service.sandbox_id
        stopped = "the drain to stop the chat's sandbox"
        wait_until(lambda: not runs_sandbox(drained, old), stopped, SWEPT_LIMIT_SECONDS, 0.5)
        assert not runs_sandbox(drained, service.sandbox_id), "the drain left the sandbox"
        moved_to = message_moves_the_chat(service, "third")
        assert moved_to not in (drained, service.cluster.manager)
        note = preview(service, "/src/note.js", "after the node was lost")  # restored
        assert "written after the node was lost" in note.text
        third = preview(service, "/src/third.js", "after the drain")
        assert "after the drain" in third.text
    finally:
        set_availability(service.cluster, drained, "active")


def message_moves_the_chat(service: Service, model: str) -> nodes.Node:
    """Send the chat ``model``'s message; once its run completed in a new sandbox (the chat's
    becomes that one), the node it runs on."""
    run_id = post(service.http, service.chat_id, model)
    events = follow(service.http, run_id, limit=RUN_LIMIT_SECONDS)
    assert finished(events)["status"] == "completed", events[-3:]
    moved = service.http.get(f"/api/runs/{run_id}").json()["sandbox_id"]
    assert moved != service.sandbox_id
    service.sandbox_id = moved
    return node_of_sandbox(service.cluster, moved)


def runs_sandbox(node: nodes.Node, sandbox_id: str) -> bool:
    """Whether ``node`` runs a container of the sandbox."""
    with closing(node.client(timeout=10)) as client:
        return bool(client.containers.list(filters={"label": f"{LABEL}={sandbox_id}"}))


def kept_of(node: nodes.Node, instance: str, sandbox_id: str) -> list[str]:
    """What ``node`` holds of the lost sandbox and of the instance's render browsers."""
    with closing(node.client(timeout=10)) as client:
        volumes = [f"volume {v.name}" for v in client.volumes.list() if sandbox_id in v.name]
        browsers = client.containers.list(
            all=True, filters={"label": f"{RENDER_ROLE_LABEL}={RENDER_ROLE}"}
        )
    return volumes + [f"container {c.name}" for c in browsers]


def wait_swept(node: nodes.Node, instance: str, sandbox_id: str) -> list[str]:
    """:func:`kept_of` once it is empty, or when the deadline passed."""
    deadline = time.monotonic() + SWEPT_LIMIT_SECONDS
    while (left := kept_of(node, instance, sandbox_id)) and time.monotonic() < deadline:
        time.sleep(0.5)  # polling under the deadline above
    return left
