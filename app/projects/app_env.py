"""The app's environment: per-chat variables and secrets, their rules, and what each reader sees.

A chat's app may need configuration (an API base URL, a public key) and secrets (a private API
key). kiln keeps them per chat (encrypted in the store, :mod:`app.store.app_env`), gives them to
the sandbox as environment (never as a file of the project: :mod:`sandbox.execution.app_env`),
and tells the model only their names (:func:`env_names`).

Rules, as data (:data:`RESERVED_NAMES`, :data:`RESERVED_PREFIXES`):

- a name is a POSIX environment name (``[A-Za-z_][A-Za-z0-9_]*``), at most
  :data:`MAX_NAME_LENGTH` characters; names that kiln or the sandbox's tools depend on are
  refused (``PATH``, ``HOME``, ``NODE_OPTIONS``, ``npm_config_*``, ``KILN_*``...);
- a value is text without NUL, at most :data:`MAX_VALUE_BYTES` bytes; a chat holds at most
  :data:`MAX_VARIABLES` of them and :data:`MAX_TOTAL_BYTES` in all;
- a name with one of the :data:`PUBLIC_PREFIXES` (Vite's ``VITE_``, Next.js's ``NEXT_PUBLIC_``)
  is *public*: the bundler inlines it into the built JavaScript that any visitor downloads, so
  it can never be a secret (refused in words). Both prefixes count in every template.

A secret is write-only: :class:`AppVariable` hides it from ``repr`` and :meth:`AppVariable.listing`
never carries it; only the sandbox and the redaction of command output see its value.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol

import anyio.to_thread

from app.projects.errors import AppEnvRefused
from app.store.app_env import PUBLIC_PREFIXES, AppVariable
from prompts.compose import EnvName
from sandbox import AppEnvironment

NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_NAME_LENGTH = 128
MAX_VALUE_BYTES = 8 * 1024
MAX_VARIABLES = 100
MAX_TOTAL_BYTES = 64 * 1024
# Names the sandbox's programs or kiln itself rely on: set by a chat, they would break the dev
# server, npm's pinning to kiln's proxy, or kiln's own probes.
RESERVED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "SHELL",
        "PWD",
        "HOSTNAME",
        "TMPDIR",
        "PORT",
        "NODE_OPTIONS",
        "NODE_PATH",
        "NODE_ENV",
        "NODE_EXTRA_CA_CERTS",
        "CHOKIDAR_USEPOLLING",
        "WATCHPACK_POLLING",
        # The shell that loads the environment before each command reads these itself.
        "IFS",
        "ENV",
        "BASH_ENV",
        "CDPATH",
        "PS4",
        "SHELLOPTS",
    }
)
RESERVED_PREFIXES = ("npm_", "NPM_", "KILN_", "LD_", "DOCKER_")


class AppEnvSource(Protocol):
    """The store's part that holds a chat's variables (:class:`app.store.Store`)."""

    def app_variables(self, chat_id: str) -> list[AppVariable]:
        """The chat's variables, values decrypted, sorted by name."""
        ...


class AppEnvStore(AppEnvSource, Protocol):
    """The store's part that changes them."""

    def set_app_variable(self, chat_id: str, variable: AppVariable) -> AppVariable:
        """Store (or replace) the variable; as stored."""
        ...


def is_public(name: str) -> bool:
    """Whether a variable called ``name`` is inlined into the built app."""
    return AppVariable(name, "").public


def check_name(name: str) -> str:
    """``name`` if kiln keeps a variable of that name; :class:`AppEnvRefused` saying why not."""
    if not NAME_PATTERN.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
        raise AppEnvRefused(
            "name",
            f"{name[:MAX_NAME_LENGTH]!r} is not an environment variable name: letters, digits "
            f"and '_', not starting with a digit, at most {MAX_NAME_LENGTH} characters",
        )
    if name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES):
        raise AppEnvRefused(
            "name",
            f"{name!r} is reserved: the sandbox's tools or kiln itself set it "
            f"(reserved: {', '.join(sorted(RESERVED_NAMES))} and names starting "
            f"{', '.join(RESERVED_PREFIXES)})",
        )
    return name


def check_variable(name: str, value: str, *, secret: bool) -> AppVariable:
    """A variable from what a person typed; :class:`AppEnvRefused` (never quoting a secret's
    value) when kiln will not keep it."""
    check_name(name)
    if secret and is_public(name):
        raise AppEnvRefused(
            "secret",
            f"{name!r} cannot be a secret: the build inlines every variable named "
            f"{' or '.join(f'{prefix}...' for prefix in PUBLIC_PREFIXES)} into the JavaScript "
            f"any visitor of the app downloads. Keep the secret under a name without "
            f"{' or '.join(PUBLIC_PREFIXES)} and use it only in server code or commands, or "
            f"store it as a (public) variable if it is meant to be seen",
        )
    if "\x00" in value:
        raise AppEnvRefused("value", f"the value of {name!r} holds a NUL character")
    size = len(value.encode())
    if size > MAX_VALUE_BYTES:
        raise AppEnvRefused(
            "value", f"the value of {name!r} is {size} bytes, over the {MAX_VALUE_BYTES} allowed"
        )
    return AppVariable(name, value, secret)


def check_totals(variables: Sequence[AppVariable]) -> None:
    """:class:`AppEnvRefused` when a chat's variables together are over the limits."""
    if len(variables) > MAX_VARIABLES:
        raise AppEnvRefused("name", f"a chat holds at most {MAX_VARIABLES} variables")
    total = sum(len(item.name) + len(item.value.encode()) for item in variables)
    if total > MAX_TOTAL_BYTES:
        raise AppEnvRefused(
            "value", f"the chat's variables would be {total} bytes, over the {MAX_TOTAL_BYTES}"
        )


def sandbox_values(variables: Iterable[AppVariable]) -> dict[str, str]:
    """Every variable, secrets included: the dev server's, commands' and builds' environment."""
    return {item.name: item.value for item in variables}


def build_environment(source: AppEnvSource, chat_id: str) -> dict[str, str]:
    """The environment of a chat's production build (publishing): its public variables only.

    A secret or a non-public variable stays out: a static build's output is served to anyone,
    and what it needs at build time it reads from public (``VITE_``, ``NEXT_PUBLIC_``) variables."""
    return {item.name: item.value for item in source.app_variables(chat_id) if item.public}


def app_environment(source: AppEnvSource, chat_id: str) -> AppEnvironment:
    """What the chat's sandbox gets: every value, and which are secrets (to redact)."""
    variables = source.app_variables(chat_id)
    return AppEnvironment(
        values=sandbox_values(variables),
        secrets=tuple(item.value for item in variables if item.secret),
    )


def put_variable(store: AppEnvStore, chat_id: str, variable: AppVariable) -> AppVariable:
    """Store ``variable`` (checked by :func:`check_variable`) if the chat's variables with it
    stay within the limits; as stored (blocking: call it in a thread)."""
    others = [item for item in store.app_variables(chat_id) if item.name != variable.name]
    check_totals([*others, variable])
    return store.set_app_variable(chat_id, variable)


def app_env_lookup(source: AppEnvSource) -> Callable[[str], Awaitable[AppEnvironment]]:
    """The sandbox manager's ``app_env``: a chat's environment read from ``source`` in a
    thread (the store's calls block)."""

    async def lookup(chat_id: str) -> AppEnvironment:
        return await anyio.to_thread.run_sync(app_environment, source, chat_id)

    return lookup


def env_names(variables: Iterable[AppVariable]) -> tuple[EnvName, ...]:
    """What the model is told (the system prompt's section): names and kinds, never a value."""
    return tuple(EnvName(item.name, item.public, item.secret) for item in variables)
