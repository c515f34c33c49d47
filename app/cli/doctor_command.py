"""``kiln doctor``: check what ``kiln serve`` needs, one line per check, with a hint on failure.

Checks: the data directory is writable; the store's database answers, with its version, its
migrations and its pool (:mod:`app.cli.doctor_database`); Docker answers; Redis answers
(``REDIS_URL``) or, with none set, the ``redis-server`` binary the embedded default starts is
installed; on a shared database, this host's settings agree with the deployment's
(:mod:`app.cli.doctor_deployment`); every sandbox image is present and up to date; the host's
sandbox capacity, memory, pids and networks and what is in use (:mod:`app.cli.doctor_capacity`);
on a swarm, each node with its engine, capacity and hardening (:mod:`app.cli.doctor_swarm`);
the warm pool's bounds and each template's current target and why (:mod:`app.cli.doctor_pool`);
the host firewall rules for kiln bridges (:mod:`app.cli.doctor_firewall`); the CA bundle
sandboxes get and whether a sandbox gets packages through kiln's npm proxy
(:mod:`app.cli.doctor_npm`); tiktoken's encoding files are cached; which parser runs (compiled
or pure Python, :mod:`app.parser_choice`). Exit code 0 when all pass, 1 when any fails (2 for
bad usage). ``--json`` prints ``{ok, checks: [{name, ok, detail, hint}]}`` instead.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

import anyio
import docker
import redis

from app.cli.commands import COMMANDS
from app.cli.doctor_capacity import check_capacity
from app.cli.doctor_database import check_database
from app.cli.doctor_deployment import check_deployment_settings
from app.cli.doctor_firewall import check_firewall
from app.cli.doctor_npm import check_npm
from app.cli.doctor_pool import check_pool
from app.cli.doctor_render import check_render
from app.cli.doctor_result import CheckResult
from app.cli.doctor_swarm import check_swarm, image_source
from app.errors import ConfigError
from app.parser_choice import BUILD_COMMAND, ParserChoice, activate
from app.tokens import check_tokenizer
from sandbox import (
    EnvReader,
    ImageBuilder,
    ImageBuildSettings,
    RedisAuthFailed,
    RedisUnavailable,
    SandboxError,
    call,
    connect,
    data_dir_from_env,
    redacted_url,
    redis_url_from_env,
    wrap_redis_errors,
)

EXIT_OK, EXIT_FAILED, EXIT_BAD_USAGE = 0, 1, 2
GOOD_IMAGE_STATES = ("up to date", "present")
NAME_WIDTH = 16  # "image vite-react"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``doctor`` subcommand."""
    command = subparsers.add_parser("doctor", help=COMMANDS["doctor"].help, description=__doc__)
    command.add_argument("--data-dir", type=Path, help="the data directory to check")
    command.add_argument("--json", action="store_true", help="print the results as JSON")
    command.set_defaults(handler=handle_doctor)


def handle_doctor(args: argparse.Namespace) -> int:
    """Run every check and print them; exit 1 if any failed."""
    env = dict(os.environ)
    if args.data_dir is not None:
        env["KILN_DATA_DIR"] = str(args.data_dir)
    data_dir = data_dir_from_env(env)
    try:
        redis_url = redis_url_from_env(EnvReader(env, ConfigError))
    except ConfigError as exc:
        print(f"kiln doctor: {exc}", file=sys.stderr)
        return EXIT_BAD_USAGE
    results = anyio.run(run_checks, data_dir, redis_url, env)
    if args.json:
        print(
            json.dumps({"ok": all(r.ok for r in results), "checks": [asdict(r) for r in results]})
        )
    else:
        for result in results:
            print(format_result(result))
    return EXIT_OK if all(result.ok for result in results) else EXIT_FAILED


def format_result(result: CheckResult) -> str:
    """``ok    name  detail`` or ``FAIL  name  detail`` plus an indented hint line."""
    line = f"{'ok' if result.ok else 'FAIL':<5} {result.name:<{NAME_WIDTH}} {result.detail}"
    indent = " " * (NAME_WIDTH + 7)
    return line if result.ok or not result.hint else f"{line}\n{indent}hint: {result.hint}"


async def run_checks(
    data_dir: Path, redis_url: str | None, env: Mapping[str, str]
) -> list[CheckResult]:
    """Every check, in a fixed order; sandbox settings from ``env`` (``--data-dir`` applied)."""
    results = [await anyio.to_thread.run_sync(check_data_dir, data_dir)]
    results.append(await anyio.to_thread.run_sync(check_database, env, data_dir))
    results.append(await anyio.to_thread.run_sync(check_redis, redis_url, data_dir))
    results.append(await anyio.to_thread.run_sync(check_deployment_settings, env, data_dir))
    client, docker_result = await check_docker()
    results.append(docker_result)
    source = image_source(env)
    if source is None:
        results.extend(await check_images(client))
    else:  # on a swarm, the engine the images are built on and copied to the nodes from
        results.extend(await check_images_on(source, env))
    results.extend(await check_capacity(client, env))
    nodes = await check_swarm(env)
    results.extend(nodes)
    results.append(await anyio.to_thread.run_sync(check_pool, redis_url, data_dir, env))
    results.append(await anyio.to_thread.run_sync(check_firewall, env))
    if not nodes:  # on a swarm these would probe the manager's engine, not a sandbox's node
        results.extend(await check_npm(client, env))
        if source is None:  # on a swarm, checked on the image source above
            results.append(await check_render(client, env))
    results.append(await anyio.to_thread.run_sync(check_tokenizer_files))
    results.append(check_parser(activate()))  # the choice app.cli.main made
    if client is not None:
        await call(client.close)
    return results


def check_data_dir(data_dir: Path) -> CheckResult:
    """The data directory exists (or can be made) and takes a file."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=data_dir, prefix=".doctor-"):
            pass
    except OSError as exc:
        hint = "set KILN_DATA_DIR (or --data-dir) to a folder this user can write"
        return CheckResult("data dir", False, f"{str(data_dir)!r}: {exc}", hint)
    return CheckResult("data dir", True, f"{data_dir} is writable")


def check_redis(redis_url: str | None, data_dir: Path) -> CheckResult:
    """REDIS_URL answers PING, or the embedded default's binary is installed."""
    if redis_url is None:
        binary = shutil.which("redis-server")
        if binary is None:
            hint = "install redis-server (apt-get install redis-server) or set REDIS_URL"
            return CheckResult(
                "redis", False, "REDIS_URL is unset and redis-server is missing", hint
            )
        return CheckResult("redis", True, f"embedded: kiln serve starts {binary}")
    shown = redacted_url(redis_url)  # the password never printed
    try:
        client = redis.Redis.from_url(redis_url, socket_connect_timeout=3, socket_timeout=3)
    except ValueError as exc:
        return CheckResult("redis", False, f"REDIS_URL={shown!r} is not a Redis URL: {exc}")
    try:
        with wrap_redis_errors("answering kiln doctor"):
            client.ping()
    except RedisAuthFailed as exc:
        hint = "give the password Redis expects: in REDIS_URL or KILN_REDIS_PASSWORD_FILE"
        return CheckResult("redis", False, f"{shown}: {exc}", hint)
    except RedisUnavailable as exc:
        hint = "start Redis, fix REDIS_URL, or unset it to use the embedded one"
        return CheckResult("redis", False, f"{shown} does not answer: {exc}", hint)
    finally:
        client.close()
    return CheckResult("redis", True, f"{shown} answers")


async def check_docker() -> tuple[docker.DockerClient | None, CheckResult]:
    """A Docker client (if the engine answers) and the check's result."""
    try:
        client: docker.DockerClient = await anyio.to_thread.run_sync(connect)
        version = await call(client.version)
    except SandboxError as exc:
        hint = "start the Docker engine and let this user reach its socket (DOCKER_HOST)"
        return None, CheckResult("docker", False, str(exc), hint)
    return client, CheckResult("docker", True, f"engine {version.get('Version', '?')}")


async def check_images_on(url: str, env: Mapping[str, str]) -> list[CheckResult]:
    """:func:`check_images` and :func:`check_render` on the engine at ``url`` (a swarm's image
    source: a node gets the render browser from there at its first check)."""
    try:
        client: docker.DockerClient = await anyio.to_thread.run_sync(connect, url)
    except SandboxError as exc:
        hint = "start it, or point KILN_SWARM_IMAGE_SOURCE at the engine kiln builds images on"
        return [CheckResult("images", False, f"image source {url!r}: {exc}", hint)]
    try:
        images = await check_images(client, f"DOCKER_HOST={url} kiln images build")
        return [*images, await check_render(client, env)]
    finally:
        await call(client.close)


async def check_images(
    client: docker.DockerClient | None, build: str = "kiln images build"
) -> list[CheckResult]:
    """One result per sandbox image (base and templates); ``build``: the command that builds
    them."""
    if client is None:
        return [CheckResult("images", False, "not checked: Docker is unavailable", "fix Docker")]
    try:
        settings = await anyio.to_thread.run_sync(ImageBuildSettings.from_env)
        rows = await ImageBuilder(client, settings, _quiet).statuses()
    except (SandboxError, ValueError, OSError) as exc:
        return [CheckResult("images", False, str(exc), "run `kiln images ls` for details")]
    return [
        CheckResult(
            f"image {row.name}",
            row.status in GOOD_IMAGE_STATES,
            f"{row.image}: {row.status}",
            f"run `{build}`",
        )
        for row in rows
    ]


def _quiet(line: str) -> None:
    """Image progress lines are not wanted here."""


def check_parser(choice: ParserChoice) -> CheckResult:
    """Which parser runs; pure Python passes too (the compiled one is optional, only faster)."""
    if choice.implementation == "compiled":
        return CheckResult("parser", True, f"compiled (mypyc), {choice.build_dir}")
    forced = choice.reason.startswith("KILN_PARSER")
    build = "" if forced else f"; `{BUILD_COMMAND}` compiles it"
    return CheckResult("parser", True, f"pure Python: {choice.reason}{build}")


def check_tokenizer_files() -> CheckResult:
    """tiktoken's encodings load from the local cache (they cannot be downloaded here)."""
    try:
        found = check_tokenizer()
    except ConfigError as exc:
        hint = "point TIKTOKEN_CACHE_DIR at a folder holding the cl100k_base and o200k_base files"
        return CheckResult("tokenizer", False, str(exc), hint)
    return CheckResult("tokenizer", True, ", ".join(sorted(found)))
