"""The app's environment inside a sandbox: a file on a tmpfs, read by everything that runs there.

A chat's variables and secrets (kept by the app, encrypted) must reach the dev server, the
commands and the builds as environment, and never the project's files: ``/workspace`` is what
versions, zips and pushes are made of. So kiln writes them outside it, on a small tmpfs of the
container (:data:`APP_ENV_DIR`, memory only, gone with the container, owned by root and
read-only to the sandbox user, so the app's code can read but not rewrite it):

- ``app-env.sh``: ``NAME='value'`` lines, which every command, install and build sources
  before it runs (:func:`with_app_env`, one ``sh`` that ``exec``\\ s the argv: no extra process);
- ``app-env.json``: the same as one JSON object, which the image's dev-server supervisor reads
  when it starts the dev server and watches: a change starts the dev server over with the new
  environment (``images/vite-react/kiln-app-env.mjs``), and its resident builder reads it
  before each build.

The files are written by one ``docker exec`` as root (:func:`write_app_env`), the content
handed over in that exec's own environment (not on its argv, which ``ps`` shows), the shell
file first and the JSON last, each renamed into place, so a reader sees either the old or the
new set. A container made again (revived, parked and started) starts with none: the manager
writes them again (:meth:`sandbox.lifecycle.manager.SandboxManager.container_for`).

Output that echoes a secret's value is redacted where kiln receives it, line by line, before
the output cap counts it (:class:`Redaction`, applied by
:func:`sandbox.execution.exec_stream.exec_streaming`): what a run's events, the session log
and the chat keep never holds it. A secret that spans lines is redacted line by line only when
each line is itself long enough to be searched for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import docker

from sandbox.docker_boundary import call
from sandbox.errors import SandboxError
from sandbox.images.templates import APP_ENV_DIR, WORKSPACE

APP_ENV_SHELL = f"{APP_ENV_DIR}/app-env.sh"
APP_ENV_JSON = f"{APP_ENV_DIR}/app-env.json"
# Sourced with every variable exported; a missing file (a sandbox no chat's environment was
# written to yet) is no environment. ``exec`` keeps the command the exec's own process.
LOAD_SCRIPT = f'if [ -r {APP_ENV_SHELL} ]; then set -a; . {APP_ENV_SHELL}; set +a; fi; exec "$@"'
WRITE_SCRIPT = (
    f"cd {APP_ENV_DIR} && umask 022"
    ' && printf %s "$KILN_APP_ENV_SHELL" > .app-env.sh.new && mv -f .app-env.sh.new app-env.sh'
    ' && printf %s "$KILN_APP_ENV_JSON" > .app-env.json.new'
    " && mv -f .app-env.json.new app-env.json"
)
QUOTE, ESCAPED_QUOTE = "'", "'\\''"
REDACTED = "[secret]"
# A secret shorter than this is not searched for in output: replacing "1" or "on" would garble
# every line and hide nothing worth hiding.
MIN_REDACTED_LENGTH = 4


@dataclass(frozen=True, slots=True)
class AppEnvironment:
    """A chat's app environment as the sandbox gets it: every value (secrets included), and
    which values are secrets (to redact). Neither shows in ``repr``."""

    values: Mapping[str, str] = field(default_factory=dict, repr=False)
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def redaction(self) -> Redaction:
        """The redaction of this environment's secrets."""
        return Redaction(self.secrets)


def with_app_env(argv: Sequence[str]) -> list[str]:
    """``argv`` run with the sandbox's app environment (see the module docstring)."""
    return ["sh", "-c", LOAD_SCRIPT, "sh", *argv]


def shell_file(values: Mapping[str, str]) -> str:
    """``NAME='value'`` lines for ``sh``'s ``.`` (names are checked by the app: POSIX names;
    a quote inside a value ends the quoted part, adds an escaped quote and starts it again)."""
    return "".join(
        f"{name}='{value.replace(QUOTE, ESCAPED_QUOTE)}'\n" for name, value in values.items()
    )


async def write_app_env(
    client: docker.DockerClient, container_id: str, env: AppEnvironment
) -> None:
    """Write ``env`` into the container's app environment files (replacing what was there);
    :class:`SandboxError` when the container refuses."""
    response = await call(
        client.api.exec_create,
        container_id,
        ["sh", "-c", WRITE_SCRIPT],
        stdout=True,
        stderr=True,
        user="0:0",
        workdir=WORKSPACE,
        environment={
            "KILN_APP_ENV_SHELL": shell_file(env.values),
            "KILN_APP_ENV_JSON": json.dumps(dict(env.values), sort_keys=True),
        },
    )
    exec_id = str(response["Id"])
    output = await call(client.api.exec_start, exec_id)
    info = await call(client.api.exec_inspect, exec_id)
    if info.get("ExitCode") != 0:
        text = output.decode(errors="replace") if isinstance(output, bytes) else str(output)
        raise SandboxError(
            f"could not write the app's environment into container {container_id[:12]!r}: "
            f"{text.strip()[:300]!r}"
        )


@dataclass(frozen=True, slots=True)
class Redaction:
    """Replaces secrets' values with :data:`REDACTED` in the output kiln keeps and shows."""

    secrets: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        # Longest first: a secret inside another one must not leave the rest of the longer.
        kept = {value for value in self.secrets if len(value) >= MIN_REDACTED_LENGTH}
        object.__setattr__(self, "secrets", tuple(sorted(kept, key=len, reverse=True)))

    def text(self, text: str) -> str:
        """``text`` with every secret replaced."""
        for value in self.secrets:
            if value in text:
                text = text.replace(value, REDACTED)
        return text
