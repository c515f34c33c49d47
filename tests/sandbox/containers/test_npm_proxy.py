"""kiln's npm registry proxy: its settings as pure functions, then on the real engine: installs
go through it, a sandbox reaches nothing else (during an install too), and what a sandbox writes
to any cache it can reach (its own npm cache, the proxy) changes nothing another one installs."""

from __future__ import annotations

import json
import socket
from dataclasses import replace
from pathlib import Path

import anyio
import anyio.abc
import docker
import pytest

from sandbox.containers.hardening import sandbox_environment
from sandbox.containers.labels import INSTANCE_LABEL, LABEL
from sandbox.containers.npm_proxy import (
    CONFIG_LABEL,
    PROXY_ROLE,
    PROXY_ROLE_LABEL,
    STORAGE_PATH,
    config_digest,
    ensure_proxy,
    gateways,
    listen_addresses,
    proxy_container_name,
    proxy_environment,
    proxy_run_kwargs,
    proxy_volume_name,
    registry_url,
)
from sandbox.docker_boundary import call
from sandbox.lifecycle.manager import Sandbox, SandboxManager
from sandbox.settings import SandboxSettings

pytestmark = pytest.mark.anyio
VERSION = "zustand@5.0.0"
CREDENTIALS = {"HTTPS_PROXY": "http://user:secret@proxy.corp:3128", "NO_PROXY": "localhost"}

# A TCP connection to argv 1 (host) and 2 (port): prints "connected" or "error <why>".
CONNECT_TO = (
    "const s = require('net').connect(+process.argv[2], process.argv[1]);"
    "s.setTimeout(1500, () => { console.log('error timeout'); process.exit(3) });"
    "s.on('connect', () => { console.log('connected'); process.exit(0) });"
    "s.on('error', e => { console.log('error', e.code); process.exit(3) })"
)
# sha256 of every file under argv 1, by relative path: what an install put there.
TREE_DIGEST = """
const fs = require('fs'), path = require('path'), crypto = require('crypto');
const root = process.argv[1], out = [];
(function walk(dir) {
  const entries = fs.readdirSync(dir, {withFileTypes: true});
  entries.sort((a, b) => (a.name < b.name ? -1 : 1));
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else out.push(path.relative(root, p) + ' ' +
      crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex'));
  }
})(root);
console.log(crypto.createHash('sha256').update(out.join('\\n')).digest('hex'), out.length);
"""
# Rewrite every file of the sandbox's own npm cache: the attack on a shared cache.
POISON_OWN_CACHE = """
const fs = require('fs'), path = require('path'); let n = 0;
(function walk(dir) {
  for (const e of fs.readdirSync(dir, {withFileTypes: true})) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p); else { fs.writeFileSync(p, 'poisoned'); n++; }
  }
})(process.env.npm_config_cache + '/_cacache');
console.log('rewrote', n);
"""
# Write to the proxy as npm would: publish a version with a postinstall, add a user, unpublish.
# Prints each request's HTTP status.
POISON_PROXY = """
const registry = process.argv[1];
const evil = {name: 'zustand', version: '5.0.0', scripts: {postinstall: 'touch /tmp/pwned'},
  dist: {tarball: registry + 'zustand/-/zustand-5.0.0.tgz', shasum: '0'.repeat(40)}};
const attempts = [
  ['PUT', 'zustand', {_id: 'zustand', name: 'zustand', 'dist-tags': {latest: '5.0.0'},
    versions: {'5.0.0': evil}, _attachments: {'zustand-5.0.0.tgz':
      {content_type: 'application/octet-stream', data: Buffer.from('evil').toString('base64'),
       length: 4}}}],
  ['PUT', '-/user/org.couchdb.user:mallory', {name: 'mallory', password: 'mallory-pw'}],
  ['DELETE', 'zustand/-rev/1', null],
];
(async () => {
  for (const [method, path, body] of attempts) {
    const r = await fetch(registry + path, {method, body: body && JSON.stringify(body),
      headers: {'content-type': 'application/json'}});
    console.log(method, path, r.status);
  }
})();
"""


def test_the_proxy_listens_on_every_ipv4_gateway_of_the_network() -> None:
    attrs = {"IPAM": {"Config": [{"Gateway": "172.30.0.1"}, {"Gateway": "fd00::1"}, {}]}}
    assert gateways(attrs) == ["172.30.0.1"]
    assert listen_addresses(["172.30.0.1", "10.9.0.1"], 4873) == "172.30.0.1:4873 10.9.0.1:4873"
    assert registry_url("172.30.0.1", 4873) == "http://172.30.0.1:4873/"


def test_upstream_and_host_proxies_go_to_the_proxy_and_never_into_sandboxes() -> None:
    settings = SandboxSettings(
        instance="i",
        npm_registry="https://npm.corp/",
        proxy_env=CREDENTIALS,
        ca_bundle=Path("/etc/ca.pem"),
        sandbox_registry="http://172.30.0.1:4873/",
    )
    env = proxy_environment(settings, "172.30.0.1:4873")
    assert env["KILN_PROXY_UPSTREAM"] == "https://npm.corp/"
    assert env["HTTPS_PROXY"] == CREDENTIALS["HTTPS_PROXY"]
    assert env["NODE_EXTRA_CA_CERTS"] == "/etc/kiln/ca-bundle.pem"
    sandbox = sandbox_environment(settings)
    assert sandbox["npm_config_registry"] == "http://172.30.0.1:4873/"
    assert not any("secret" in value or "npm.corp" in value for value in sandbox.values())


def test_the_default_upstream_is_npmjs() -> None:
    env = proxy_environment(SandboxSettings(), "172.30.0.1:4873")
    assert env["KILN_PROXY_UPSTREAM"] == "https://registry.npmjs.org/"


def test_the_proxy_runs_on_the_host_network_hardened_labelled_with_its_own_volume() -> None:
    kwargs = proxy_run_kwargs(SandboxSettings(instance="i"), "172.30.0.1:4873")
    assert kwargs["network_mode"] == "host"
    assert (kwargs["user"], kwargs["cap_drop"]) == ("1000:1000", ["ALL"])
    assert kwargs["name"] == proxy_container_name("i")
    assert kwargs["labels"] == {
        LABEL: "shared",
        INSTANCE_LABEL: "i",
        PROXY_ROLE_LABEL: PROXY_ROLE,
        CONFIG_LABEL: config_digest(kwargs["environment"]),
    }
    assert kwargs["volumes"] == {proxy_volume_name("i"): {"bind": STORAGE_PATH, "mode": "rw"}}


# -- on the real engine ------------------------------------------------------------------------


async def _exec(
    client: docker.DockerClient, container_id: str, argv: list[str], workdir: str = "/workspace"
) -> tuple[int, str]:
    """Run ``argv`` as the sandbox user: the test's own tool (generated code could do as much)."""
    container = await call(client.containers.get, container_id)
    result = await call(container.exec_run, argv, user="1000:1000", workdir=workdir)
    return int(result.exit_code), str(result.output.decode(errors="replace").strip())


async def _node(client: docker.DockerClient, container_id: str, script: str, *args: str) -> str:
    return (await _exec(client, container_id, ["node", "-e", script, *args]))[1]


async def _digest(client: docker.DockerClient, sandbox: Sandbox) -> str:
    """The digest of the sandbox's installed zustand (every file and its content)."""
    return await _node(client, sandbox.container_id, TREE_DIGEST, "/workspace/node_modules/zustand")


async def _sandbox(manager: SandboxManager, made: list[Sandbox]) -> Sandbox:
    sandbox = await manager.provision("vanilla", owner=f"owner-{len(made)}", state="in_use")
    made.append(sandbox)
    return sandbox


async def _install(manager: SandboxManager, sandbox: Sandbox) -> None:
    installed = await manager.install(sandbox.id, [VERSION])
    assert installed.ok, installed.result.output
    assert f"--registry={manager.settings.sandbox_registry}" in installed.result.argv


@pytest.mark.docker
@pytest.mark.npm
async def test_an_install_of_zustand_goes_through_the_proxy_which_keeps_the_cache(
    manager: SandboxManager, sandboxes: list[Sandbox], docker_client: docker.DockerClient
) -> None:
    sandbox = await _sandbox(manager, sandboxes)
    await _install(manager, sandbox)
    digest = await _digest(docker_client, sandbox)
    assert int(digest.split()[1]) > 3  # files were installed
    proxy = await call(
        docker_client.containers.get, proxy_container_name(manager.settings.instance)
    )
    cached = await call(proxy.exec_run, ["ls", f"{STORAGE_PATH}/zustand"])
    assert "zustand-5.0.0.tgz" in cached.output.decode()
    container = await call(docker_client.containers.get, sandbox.container_id)
    assert set(container.attrs["NetworkSettings"]["Networks"]) == {manager.settings.network}


def _registry_address() -> str:
    """An address of the npm registry that the host itself can connect to."""
    return str(socket.getaddrinfo("registry.npmjs.org", 443, socket.AF_INET)[0][4][0])


async def _npm_running(client: docker.DockerClient, container_id: str) -> bool:
    listing = "for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr '\\0' ' '; echo; done"
    return "npm install" in (await _exec(client, container_id, ["sh", "-c", listing]))[1]


@pytest.mark.docker
@pytest.mark.npm
async def test_during_an_install_a_sandbox_reaches_the_proxy_and_nothing_else(
    manager: SandboxManager, sandboxes: list[Sandbox], docker_client: docker.DockerClient
) -> None:
    sandbox = await _sandbox(manager, sandboxes)
    gateway = str(manager.settings.sandbox_registry).split("//")[1].split(":")[0]
    port = str(manager.settings.npm_proxy_port)
    seen: dict[str, str] = {}
    # Listening is enough: the kernel completes a handshake the service never accepts.
    async with await anyio.create_tcp_listener(local_host="0.0.0.0") as listener:
        host_port = str(listener.extra(anyio.abc.SocketAttribute.local_port))
        targets = {
            "internet": ("1.1.1.1", "443"),
            "registry": (_registry_address(), "443"),
            "metadata": ("169.254.169.254", "80"),
            "host service": (gateway, host_port),
            "proxy": (gateway, port),
        }
        async with anyio.create_task_group() as group:
            group.start_soon(_install, manager, sandbox)
            with anyio.fail_after(120):
                while not await _npm_running(docker_client, sandbox.container_id):
                    await anyio.sleep(0.05)
            for name, (host, target_port) in targets.items():
                seen[name] = await _node(
                    docker_client, sandbox.container_id, CONNECT_TO, host, target_port
                )
    assert seen.pop("proxy") == "connected"
    assert all(answer.startswith("error") for answer in seen.values()), seen


@pytest.mark.docker
@pytest.mark.npm
async def test_poisoning_every_cache_a_sandbox_reaches_changes_nothing_another_installs(
    manager: SandboxManager, sandboxes: list[Sandbox], docker_client: docker.DockerClient
) -> None:
    clean = await _sandbox(manager, sandboxes)
    await _install(manager, clean)
    attacker = await _sandbox(manager, sandboxes)
    await _install(manager, attacker)  # its own cache now holds zustand
    rewrote = await _node(docker_client, attacker.container_id, POISON_OWN_CACHE)
    assert rewrote.startswith("rewrote"), rewrote
    assert int(rewrote.split()[1]) > 0
    registry = str(manager.settings.sandbox_registry)
    statuses = await _node(docker_client, attacker.container_id, POISON_PROXY, registry)
    print(statuses)  # the proxy's answers, for the record
    codes = [int(line.split()[-1]) for line in statuses.splitlines()]
    assert len(codes) == 3, statuses
    assert all(code >= 400 for code in codes), statuses
    victim = await _sandbox(manager, sandboxes)
    await _install(manager, victim)
    assert await _digest(docker_client, victim) == await _digest(docker_client, clean)
    # The proxy still serves upstream's packument: no postinstall crept into 5.0.0.
    view = ["npm", "view", VERSION, "scripts", "--json"]
    code, output = await _exec(docker_client, victim.container_id, view)
    assert code == 0, output
    assert "postinstall" not in (json.loads(output) if output else {}), output


@pytest.mark.docker
@pytest.mark.npm
async def test_npm_publish_to_the_proxy_is_refused_with_or_without_a_token(
    manager: SandboxManager, sandboxes: list[Sandbox], docker_client: docker.DockerClient
) -> None:
    sandbox = await _sandbox(manager, sandboxes)
    registry = str(manager.settings.sandbox_registry)
    package = json.dumps({"name": "kiln-evil-package-3f9a1c", "version": "1.0.0"})
    token = "//" + registry.split("//")[1] + ":_authToken=stolen-or-made-up"
    script = f"mkdir -p /tmp/pkg && cd /tmp/pkg && echo '{package}' > package.json"
    assert (await _exec(docker_client, sandbox.container_id, ["sh", "-c", script]))[0] == 0
    publish = ["npm", "publish", f"--registry={registry}"]
    code, anonymous = await _exec(docker_client, sandbox.container_id, publish, "/tmp/pkg")
    assert code != 0
    assert "ENEEDAUTH" in anonymous, anonymous
    with_token = [*publish, f"--{token}"]
    code, output = await _exec(docker_client, sandbox.container_id, with_token, "/tmp/pkg")
    assert code != 0
    assert "E401" in output or "E403" in output, output
    view = ["npm", "view", "kiln-evil-package-3f9a1c", f"--registry={registry}"]
    code, output = await _exec(docker_client, sandbox.container_id, view, "/tmp/pkg")
    assert code != 0
    assert "E404" in output, output


async def _marker(client: docker.DockerClient, instance: str) -> tuple[str, int]:
    """The proxy's container id, and whether the marker is in its cache (0: it is)."""
    proxy = await call(client.containers.get, proxy_container_name(instance))
    result = await call(proxy.exec_run, ["test", "-e", f"{STORAGE_PATH}/kiln-marker"])
    return proxy.id, int(result.exit_code)


@pytest.mark.docker
async def test_a_running_proxy_is_adopted_and_another_upstream_gets_a_fresh_cache(
    own_instance: SandboxSettings, docker_client: docker.DockerClient
) -> None:
    url = await ensure_proxy(docker_client, own_instance)
    proxy = await call(docker_client.containers.get, proxy_container_name(own_instance.instance))
    await call(proxy.exec_run, ["touch", f"{STORAGE_PATH}/kiln-marker"])
    assert await ensure_proxy(docker_client, own_instance) == url
    assert await _marker(docker_client, own_instance.instance) == (proxy.id, 0)  # adopted
    proxied = replace(own_instance, proxy_env={"HTTPS_PROXY": "http://proxy.invalid:3128"})
    await ensure_proxy(docker_client, proxied)
    replaced, marker = await _marker(docker_client, own_instance.instance)
    assert (replaced != proxy.id, marker) == (True, 0)  # same upstream: the cache stays
    other = replace(proxied, npm_registry="http://127.0.0.1:9/")
    await ensure_proxy(docker_client, other)
    assert (await _marker(docker_client, own_instance.instance))[1] != 0  # a fresh cache


REPIN = (
    "const fs = require('fs'); const p = JSON.parse(fs.readFileSync('package.json'));"
    " p.dependencies.zustand = '4.5.0'; fs.writeFileSync('package.json', JSON.stringify(p));"
)


@pytest.mark.docker
@pytest.mark.npm
async def test_an_install_of_what_is_installed_is_skipped_unless_package_json_differs(
    manager: SandboxManager, sandboxes: list[Sandbox], docker_client: docker.DockerClient
) -> None:
    """Again: skipped in words; after an answer pins another version in package.json: runs."""
    sandbox = await _sandbox(manager, sandboxes)
    await _install(manager, sandbox)
    again = await manager.install(sandbox.id, [VERSION])
    assert again.already_installed, again.result.output
    assert again.result.output == "already installed: zustand@5.0.0 (npm install skipped)"
    await _node(docker_client, sandbox.container_id, REPIN)  # node_modules no longer matches
    repinned = await manager.install(sandbox.id, [VERSION])
    assert repinned.ok, repinned.result.output
    assert not repinned.already_installed
