"""kiln's images onto every swarm node before placement, from kiln's own engine.

Nodes never pull sandbox images (``docs/cluster.md``): before kiln places sandboxes of a
template it calls :func:`ensure_images_on_nodes` (through :class:`NodeImages`, which also puts a
helper's image on one node when a helper first runs there), which copies each image from kiln's
own engine (where ``kiln images build`` made it) to every node that lacks it or holds another
build of it (:mod:`sandbox.cluster.node_images` says which), and to no other node: a second call
is a few inspects. The copy is ``docker save`` streamed into ``docker load``: one save per image,
its chunks fanned out to every lacking node's load at once (:class:`_Fanout`), with a few chunks
buffered per node and no tar file of the whole image anywhere. After the load, each node's image
ID must equal the source's (the image ID is the digest of its config, so equal IDs are the same
build); a node that ends with another ID is an error in words naming the node and both IDs.

A node without the ``kiln.engine`` label is skipped: kiln cannot reach its engine, and placement
there fails anyway, naming the node (:mod:`sandbox.cluster.placement`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass

import anyio
import docker

from sandbox.cluster.node_images import image_ids
from sandbox.cluster.service_spec import ENGINE_LABEL
from sandbox.docker_boundary import CLIENT_TIMEOUT_SECONDS, call
from sandbox.errors import ImageMissing, SandboxNotFound, SandboxUnavailable

CHUNK_BYTES = 1 << 20
# Chunks buffered per node: the slowest node's load paces the save, and memory stays ~8 MiB each.
BUFFERED_CHUNKS = 8
PUT_POLL_SECONDS = 0.5
_END = b""  # the save's end: every chunk of a save has at least one byte


class _SaveFailed:
    """Put into every node's queue when the save broke off: that node's load must fail."""


@dataclass(frozen=True)
class NodeEngine:
    """A swarm node and the address of its own engine (its ``kiln.engine`` label)."""

    node_id: str
    engine: str


class _Fanout:
    """One stream of chunks (a ``docker save``) read by several consumers (each node's load)
    at the pace of the slowest; a consumer that fails is dropped, and stops pacing the rest."""

    def __init__(self, count: int) -> None:
        self.queues: list[queue.Queue[bytes | _SaveFailed]] = [
            queue.Queue(maxsize=BUFFERED_CHUNKS) for _ in range(count)
        ]
        self.dropped = [threading.Event() for _ in range(count)]

    def feed(self, chunks: Iterator[bytes]) -> None:
        """Hand every chunk to every consumer, then the end (or the failure, if reading
        ``chunks`` raised: re-raised here after the consumers have been told)."""
        last: bytes | _SaveFailed = _SaveFailed()
        try:
            for chunk in chunks:
                if chunk:
                    self._put_all(chunk)
            last = _END
        finally:
            self._put_all(last)

    def _put_all(self, item: bytes | _SaveFailed) -> None:
        for chunks, dropped in zip(self.queues, self.dropped, strict=True):
            while not dropped.is_set():
                try:
                    chunks.put(item, timeout=PUT_POLL_SECONDS)
                    break
                except queue.Full:
                    continue

    def reader(self, index: int) -> Iterator[bytes]:
        """Consumer ``index``'s chunks until the end (raises if the save failed)."""
        chunks = self.queues[index]
        while (chunk := chunks.get()) != _END:
            if isinstance(chunk, _SaveFailed):
                raise SandboxUnavailable("the image's save from kiln's engine broke off")
            yield chunk

    def drop(self, index: int) -> None:
        """Consumer ``index`` reads no more."""
        self.dropped[index].set()


async def swarm_node_engines(manager: docker.DockerClient) -> list[NodeEngine]:
    """Every swarm node with a ``kiln.engine`` label, in the manager's order."""
    engines = []
    for node in await call(manager.nodes.list):
        engine = (node.attrs["Spec"].get("Labels") or {}).get(ENGINE_LABEL)
        if engine:
            engines.append(NodeEngine(str(node.id), str(engine)))
    return engines


async def source_image_ids(source: docker.DockerClient, images: Sequence[str]) -> dict[str, str]:
    """``image -> ID`` on kiln's own engine; :class:`ImageMissing` names one it lacks."""
    found: dict[str, str] = {}
    for image in images:
        try:
            found[image] = str((await call(source.images.get, image)).id)
        except SandboxNotFound as exc:
            raise ImageMissing(
                f"kiln's engine has no image {image!r} to copy to the swarm nodes: "
                "run `kiln images build`"
            ) from exc
    return found


def _load_from(engine: str, fanout: _Fanout, index: int) -> None:
    """``docker load`` on ``engine`` from the fan-out's ``index``-th stream (blocking)."""
    try:
        with closing(docker.DockerClient(base_url=engine, timeout=CLIENT_TIMEOUT_SECONDS)) as node:
            for line in node.api.load_image(fanout.reader(index)):
                if "error" in line:
                    raise SandboxUnavailable(f"node engine {engine!r}: {line['error']!r}")
    finally:
        fanout.drop(index)


def _save_from(source: docker.DockerClient, image: str, fanout: _Fanout) -> None:
    """``docker save`` of ``image`` on kiln's engine into the fan-out (blocking)."""
    fanout.feed(iter(source.api.get_image(image, chunk_size=CHUNK_BYTES)))


async def copy_image(
    source: docker.DockerClient, image: str, expected_id: str, targets: Sequence[NodeEngine]
) -> None:
    """Stream ``image`` from ``source`` into every node of ``targets`` at once, then check each
    node's image ID is ``expected_id``."""
    fanout = _Fanout(len(targets))
    async with anyio.create_task_group() as group:
        group.start_soon(call, _save_from, source, image, fanout)
        for index, target in enumerate(targets):
            group.start_soon(call, _load_from, target.engine, fanout, index)
    for target in targets:
        loaded = (await call(image_ids, target.engine, [image]))[image]
        if loaded != expected_id:
            raise SandboxUnavailable(
                f"image {image!r} on swarm node {target.node_id!r} is {loaded!r} after loading, "
                f"not kiln's build {expected_id!r}"
            )


async def ensure_images_on_nodes(
    source: docker.DockerClient,
    manager: docker.DockerClient,
    images: Sequence[str],
    *,
    only: Collection[str] | None = None,
) -> dict[str, list[str]]:
    """Every image of ``images`` on every labelled swarm node (those of the node IDs ``only``,
    when given), the same build as on ``source`` (kiln's engine), copied only where missing or
    another build (module docstring). Returns ``image -> the node IDs it was copied to`` (empty
    when every node had them all)."""
    expected = await source_image_ids(source, images)
    engines = [
        engine
        for engine in await swarm_node_engines(manager)
        if only is None or engine.node_id in only
    ]
    on_nodes: dict[str, Mapping[str, str | None]] = {}
    async with anyio.create_task_group() as group:
        for engine in engines:
            group.start_soon(_ids_into, on_nodes, engine, list(images))
    copied: dict[str, list[str]] = {}
    for image, image_id in expected.items():
        targets = [e for e in engines if on_nodes[e.node_id][image] != image_id]
        if targets:
            await copy_image(source, image, image_id, targets)
            copied[image] = [target.node_id for target in targets]
    return copied


async def _ids_into(
    found: dict[str, Mapping[str, str | None]], engine: NodeEngine, images: list[str]
) -> None:
    found[engine.node_id] = await call(image_ids, engine.engine, images)


class NodeImages:
    """What one backend has made sure of (once per process): images on every node, before a
    sandbox of them is placed, and helper images (the render browser) on one node, when a
    helper first runs there. A node restarted keeps its images (its data root)."""

    def __init__(self, source: docker.DockerClient, manager: docker.DockerClient) -> None:
        """Copy from ``source`` (kiln's engine) to the nodes of ``manager``'s swarm."""
        self._source, self._manager = source, manager
        self._everywhere: set[str] = set()
        self._on_node: set[tuple[str, str]] = set()  # (node ID, image)
        self._lock = anyio.Lock()  # one copy at a time: two would save the same image twice

    async def everywhere(self, images: Sequence[str]) -> None:
        """``images`` on every labelled node."""
        wanted = [image for image in images if image not in self._everywhere]
        if wanted:
            async with self._lock:
                await ensure_images_on_nodes(self._source, self._manager, wanted)
                self._everywhere.update(wanted)

    async def on_node(self, node_id: str, image: str) -> None:
        """``image`` on the node ``node_id``."""
        if image in self._everywhere or (node_id, image) in self._on_node:
            return
        async with self._lock:
            await ensure_images_on_nodes(self._source, self._manager, [image], only={node_id})
            self._on_node.add((node_id, image))
