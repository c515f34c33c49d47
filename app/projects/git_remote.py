"""A chat's project out to a git remote (push) and in from one (a shallow clone's files).

Everything here runs the ``git`` CLI (blocking: callers use a thread) under the same isolation
as the project store (:data:`app.projects.git_store.GIT_ENV`: no host or user config, no
``GIT_*`` variable of the host) and more, because the URL is a user's:

- the URL is a network URL (``https``, ``http``, ``ssh``, ``git``, or ``user@host:path``);
  ``file://``, ``ext::`` or a local path is refused before git runs, and git itself is told
  so (``GIT_ALLOW_PROTOCOL``), so no URL reads the host's files or runs a command, whatever a
  redirect or a submodule says; credentials written into the URL are refused (a token goes in
  its own field, never into a URL that is stored and shown);
- a token reaches git only through the environment of that one command, as an
  ``http.extraHeader`` (``Authorization: Basic``), never on a command line or in a URL, and
  every message git writes is stripped of it before anyone sees it; redirects are not followed
  (the header would go along);
- no prompt (``GIT_TERMINAL_PROMPT=0``, ssh in batch mode), a time limit per command, and a
  clone is stopped once what it downloaded passes the size limit.

A push never forces: ``refs/heads/main:refs/heads/<branch>`` without ``+``; a remote that moved
on is refused (``remote_not_fast_forward``) and left as it was. git's answers are mapped to
stable codes at one place, :data:`FAILURES`.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from app.errors import ConfigError
from app.projects.errors import (
    ImportRefused,
    RemoteAuthFailed,
    RemoteError,
    RemoteNotFastForward,
    RemoteNotFound,
    RemoteUnreachable,
    RemoteUrlRefused,
)
from app.projects.git_store import BRANCH, GIT_ENV, blob_contents, git_argv
from sandbox import EnvReader

ALLOWED_PROTOCOLS = "https:http:ssh:git"
SCHEMES = frozenset({"https", "http", "ssh", "git"})
SCP_LIKE = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:(?!//)[^\s]+")
BRANCH_NAME = re.compile(r"(?!.*\.\.)(?!.*//)(?!.*@\{)[A-Za-z0-9._/-]{1,100}")
MAX_URL_LENGTH = 2000
MAX_TITLE_LENGTH = 200  # as a chat's title
DEFAULT_BRANCH = "main"
TOKEN_USER = "x-access-token"  # GitHub's name for a token over basic auth; others ignore it
KEEPABLE_MODES = frozenset({"100644", "100755"})


@dataclass(frozen=True)
class RemoteLimits:
    """How long a git command may take and how much an import may bring."""

    timeout_seconds: float = 120.0
    max_files: int = 5000
    max_bytes: int = 50 * 2**20

    @classmethod
    def from_env(cls, max_bytes: int, env: Mapping[str, str] | None = None) -> RemoteLimits:
        """``KILN_GIT_TIMEOUT`` (seconds), ``KILN_IMPORT_MAX_FILES``; ``max_bytes`` is the
        project cap (``KILN_PROJECT_MAX_BYTES``)."""
        read = EnvReader(env, ConfigError)
        return cls(
            timeout_seconds=read.number("KILN_GIT_TIMEOUT", cls.timeout_seconds, high=3600.0),
            max_files=read.integer("KILN_IMPORT_MAX_FILES", cls.max_files, low=1, high=10**6),
            max_bytes=max_bytes,
        )


@dataclass(frozen=True, slots=True)
class Remote:
    """Where a project is pushed: a URL (never holding a credential), a branch, a token."""

    url: str
    branch: str = "main"
    token: str = field(default="", repr=False)  # never in a repr, a log line or an answer


def check_url(url: str) -> str:
    """``url`` if git may reach it (see the module docstring); :class:`RemoteError`
    ``remote_url_refused`` naming why otherwise."""
    url = url.strip()
    if not url or len(url) > MAX_URL_LENGTH or any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise RemoteUrlRefused(f"not a git URL: {url[:200]!r}")
    if url.startswith("-"):  # an option in disguise (``--upload-pack=...``)
        raise RemoteUrlRefused(f"not a git URL: {url[:200]!r}")
    if SCP_LIKE.fullmatch(url) and "::" not in url:
        return url
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES or not parts.hostname or parts.hostname[0] == "-":
        raise RemoteUrlRefused(
            f"{url[:200]!r} is not a network git URL: kiln reaches https://, http://, ssh://, "
            "git:// or user@host:path (no file://, ext:: or local paths)",
        )
    if parts.password is not None or (parts.username and parts.scheme.lower().startswith("http")):
        raise RemoteUrlRefused(
            "the URL holds a user name or password: give the URL without it and the token "
            "in its own field (it is stored encrypted, never in the URL)",
        )
    return url


def check_branch(branch: str) -> str:
    """``branch`` if it is a plain branch name; ``remote_url_refused`` otherwise."""
    if (
        not BRANCH_NAME.fullmatch(branch)
        or branch.startswith(("-", "/", "."))
        or branch.endswith(("/", ".lock", "."))
    ):
        raise RemoteUrlRefused(f"not a branch name: {branch[:100]!r}")
    return branch


@dataclass(frozen=True, slots=True)
class PushResult:
    """What a push did: ``pushed`` (the remote moved) or ``up_to_date``."""

    outcome: str
    commit: str
    at: float


def push(repo: Path, remote: Remote, limits: RemoteLimits) -> PushResult:
    """Push the project's history (``repo``'s main branch) to ``remote``'s branch as a
    fast-forward; :class:`RemoteError` with a stable code when the remote refuses."""
    url, branch = check_url(remote.url), check_branch(remote.branch)
    commit = _run(["rev-parse", "--verify", "--quiet", BRANCH], repo, Remote(url), limits)
    refspec = f"{BRANCH}:refs/heads/{branch}"  # no "+": never a forced update
    out = _run(["push", "--porcelain", "--no-verify", "--", url, refspec], repo, remote, limits)
    outcome = "up_to_date" if "[up to date]" in out else "pushed"
    return PushResult(outcome, commit.strip(), time.time())


def clone_files(remote: Remote, limits: RemoteLimits) -> tuple[dict[str, bytes], list[str]]:
    """The files of ``remote``'s branch tip (its default branch when ``branch`` is empty),
    from a shallow bare clone in a temporary folder: ``(path -> bytes, paths left out)`` (a
    symlink or a submodule is no file a version can hold). Over ``limits`` (download size,
    file count, file bytes, time) is refused in words."""
    url = check_url(remote.url)
    branch = ["--branch", check_branch(remote.branch)] if remote.branch else []
    with tempfile.TemporaryDirectory(prefix="kiln-import-") as scratch:
        target = Path(scratch) / "repo.git"
        argv = ["clone", "--bare", "--depth", "1", "--single-branch", "--no-tags", *branch]
        _run([*argv, "--", url, str(target)], Path(scratch), remote, limits, watch=target)
        listing = _run(["ls-tree", "-r", "-z", "-l", "--full-tree", "HEAD"], target, remote, limits)
        wanted, skipped = _tree_entries(listing, limits)
        contents = blob_contents(target, set(wanted.values()))
    return {path: contents[blob] for path, blob in wanted.items()}, skipped


def _tree_entries(listing: str, limits: RemoteLimits) -> tuple[dict[str, str], list[str]]:
    """``ls-tree -l -z`` output as ``(path -> blob of every regular file, other paths)``,
    refused when over the file count or the byte cap."""
    wanted: dict[str, str] = {}
    sizes: dict[str, int] = {}
    skipped: list[str] = []
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        mode, _kind, blob, size = meta.split()
        if mode not in KEEPABLE_MODES:
            skipped.append(path)
            continue
        wanted[path], sizes[path] = blob, int(size)
    if len(wanted) > limits.max_files:
        raise ImportRefused(
            f"the repository holds {len(wanted)} files, over the import limit of "
            f"{limits.max_files} (KILN_IMPORT_MAX_FILES)",
        )
    if sum(sizes.values()) > limits.max_bytes:
        largest = sorted(sizes, key=sizes.__getitem__, reverse=True)[:3]
        named = ", ".join(f"{path!r} ({sizes[path]} bytes)" for path in largest)
        raise ImportRefused(
            f"the repository's files add up to {sum(sizes.values())} bytes, over the project "
            f"cap of {limits.max_bytes} (KILN_PROJECT_MAX_BYTES); largest: {named}",
        )
    return wanted, skipped


def _environment(token: str) -> dict[str, str]:
    """The environment of one remote git command: the store's isolation, the protocol
    allow-list, no prompts, and the token (if any) as a header only this command sees."""
    inherited = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    env = {**inherited, **GIT_ENV, "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS}
    env["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new"
    env["GIT_ASKPASS"] = env["SSH_ASKPASS"] = "/bin/false"
    settings = [("http.followRedirects", "false"), ("credential.helper", "")]
    if token:
        basic = base64.b64encode(f"{TOKEN_USER}:{token}".encode()).decode()
        settings.append(("http.extraHeader", f"Authorization: Basic {basic}"))
    env["GIT_CONFIG_COUNT"] = str(len(settings))
    for index, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{index}"], env[f"GIT_CONFIG_VALUE_{index}"] = key, value
    return env


def _run(
    args: list[str], cwd: Path, remote: Remote, limits: RemoteLimits, watch: Path | None = None
) -> str:
    """Run one git command for ``remote``; its stdout, or :class:`RemoteError` (the token
    scrubbed from every word). With ``watch``, the command is stopped once that folder holds
    more than the import's download allowance (twice the project cap: packs are compressed,
    but a history may hold more than the tip)."""
    argv = git_argv(cwd, *args)
    env = _environment(remote.token)
    try:
        with subprocess.Popen(
            argv,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its helpers (git-remote-https, ssh) are stopped with it
        ) as process:
            out, err = _communicate(process, limits, watch)
    except OSError as exc:
        raise RemoteError(f"git could not run: {exc}") from exc
    if process.returncode != 0:
        said = (err + b"\n" + out).decode("utf-8", "replace")  # --porcelain: refs on stdout
        raise failure(_scrub(said, remote.token), remote.url)
    return out.decode("utf-8", "surrogateescape")


def _communicate(
    process: subprocess.Popen[bytes], limits: RemoteLimits, watch: Path | None
) -> tuple[bytes, bytes]:
    """``process``'s output, killing it past the time limit or the download allowance."""
    deadline = time.monotonic() + limits.timeout_seconds
    while True:
        step = 0.5 if watch is not None else max(0.0, deadline - time.monotonic())
        try:
            return process.communicate(timeout=min(step, max(0.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() >= deadline:
            _stop(process)
            raise RemoteUnreachable(
                f"git did not finish within {limits.timeout_seconds:g} s (KILN_GIT_TIMEOUT)",
            )
        if watch is not None and _folder_bytes(watch) > 2 * limits.max_bytes:
            _stop(process)
            raise ImportRefused(
                f"the repository's download passed {2 * limits.max_bytes} bytes (twice the "
                "project cap, KILN_PROJECT_MAX_BYTES): import a smaller repository",
            )


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Kill git and every helper it started (they hold its pipes open), then reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


def _folder_bytes(folder: Path) -> int:
    """What the files under ``folder`` hold (0 while it does not exist yet)."""
    total = 0
    for root, _dirs, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue  # git renames its temporary packs as it goes
    return total


def _scrub(text: str, token: str) -> str:
    """``text`` with the token (and its basic-auth form) replaced by ``***``."""
    if not token:
        return text
    basic = base64.b64encode(f"{TOKEN_USER}:{token}".encode()).decode()
    return text.replace(basic, "***").replace(token, "***")


# git's words -> (the error, what the user is told); the first that matches wins.
FAILURES: tuple[tuple[re.Pattern[str], type[RemoteError], str], ...] = (
    (re.compile(r"transport '[^']*' not allowed|unsupported protocol", re.I),
     RemoteUrlRefused, "kiln does not reach that kind of URL"),
    (re.compile(r"\[rejected\]|updates were rejected|non-fast-forward|fetch first"
                r"|\(stale info\)", re.I),
     RemoteNotFastForward,
     "the remote branch has commits this project does not have; kiln never force-pushes: "
     "push to a new branch, or bring the remote's changes into it first"),
    (re.compile(r"\b40[13]\b|authentication failed|could not read (username|password)"
                r"|permission denied|access denied|invalid credentials", re.I),
     RemoteAuthFailed, "the remote refused the credentials (check the token and its rights)"),
    (re.compile(r"\b404\b|not found|does not appear to be a git repository"
                r"|remote branch \S+ not found|couldn't find remote ref", re.I),
     RemoteNotFound, "the remote has no such repository or branch"),
    (re.compile(r"could not resolve|connection refused|failed to connect|timed out"
                r"|network is unreachable|no route to host|ssl|certificate|\b30[1278]\b", re.I),
     RemoteUnreachable, "the remote could not be reached"),
)  # fmt: skip


def failure(stderr: str, url: str) -> RemoteError:
    """The :class:`RemoteError` for git's ``stderr`` (already scrubbed) on ``url``."""
    detail = " ".join(stderr.split())[:600]
    for pattern, error, words in FAILURES:
        if pattern.search(stderr):
            return error(f"{words}: {url!r} ({detail})")
    return RemoteError(f"git failed on {url!r}: {detail}")


def repository_title(url: str) -> str:
    """A chat's title from a repository URL: its last path part without ``.git``."""
    path = urlsplit(url).path if "://" in url else url.rpartition(":")[2]
    name = path.rstrip("/").rpartition("/")[2].removesuffix(".git")
    return (name or "Imported app")[:MAX_TITLE_LENGTH]
