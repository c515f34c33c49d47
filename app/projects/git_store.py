"""The local project store: one bare git repository per chat, driven through the ``git`` CLI.

Why the ``git`` CLI (in a thread, by the caller) rather than dulwich: git is already on every
host kiln runs on, a project is then a plain repository anyone can clone or inspect, and
``fast-import``, ``cat-file`` and ``diff`` give snapshots, contents and unified diffs without
kiln writing any of that itself; dulwich would be one more dependency doing the same more
slowly. (The zip is kiln's own: see "Exactness".)

Atomicity: there is no worktree. A version is written by one ``git fast-import`` run that takes
the whole project as a stream (``deleteall`` then every file) and ends with ``done``: a stream
cut short writes no ref, and the objects land in a pack before ``refs/heads/main`` moves, so a
crash mid-commit leaves the previous version intact. A repository is created under a temporary
name and renamed into place.

Writers (on one host or on many sharing the folder): a commit holds the chat's
:mod:`app.projects.commit_lock` lock, but the lock alone is not trusted (its holder may have been
paused past its time to live). fast-import writes the new commit under a staging ref of its own;
then one ``update-ref --stdin`` transaction moves the branch from the tip the commit was built
on to the new commit (a compare-and-swap: git refuses it if the branch moved meanwhile) and
drops the staging ref. A writer that loses builds its version again on the new tip, a few times
at most, then fails in words with nothing recorded (its files are still in the sandbox). So
history only grows, whatever the lock did. A writer killed between fast-import and the swap
leaves its staging ref (and the commit it holds, which no version refers to): the chat's next
commit deletes those older than :data:`STALE_STAGING_SECONDS` by their commit's own time (a
live writer's is seconds old), so they neither pile up nor keep dead objects from ``git gc``.
``safe.directory`` names each repository, so one made by another host's process is used even
when the shared volume shows another owner (an EFS access point, NFS ``all_squash``); the modes
stay private (every host runs kiln as one uid).

Exactness: a version gives back exactly the bytes it was given, whatever the project holds. Git
would change files on their way out of a repository as attributes say (``.gitattributes`` in
the project: ``text``/``eol`` convert line endings, ``ident`` expands ``$Id$``, ``filter``
runs a driver, ``export-subst`` writes the commit id into a file, ``export-ignore`` leaves it
out of ``git archive``). So files are read as raw blobs (``ls-tree`` + ``cat-file --batch``,
which never apply attributes) and the zip is written here from them, not by ``git archive``;
``diff`` is told to use no attributes (no textconv, no external diff, attributes read from the
empty tree), and no git setting or ``GIT_*`` variable of the host reaches these commands. A
file name may hold any character but NUL: paths are C-quoted in the fast-import stream and read
back NUL-separated (``-z``), never from git's quoted output.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import secrets
import shutil
import subprocess
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path

from app.data_dir import PRIVATE_UMASK, private_folder
from app.projects.commit_lock import CommitLock, FileCommitLock
from app.projects.errors import ProjectError, VersionNotFound
from app.projects.rules import safe_path, unkeepable_name
from app.projects.store import (
    LATEST,
    Change,
    FileDiff,
    Version,
    VersionInfo,
    VersionRef,
    parse_version_ref,
)

BRANCH = "refs/heads/main"
STAGING = "refs/kiln/staging/"  # a commit's own ref until the branch moves to it
NO_COMMIT = "0" * 40  # update-ref's "old value" for a branch that must not exist yet
STALE_STAGING_SECONDS = 3600.0  # far past a live writer's fast-import and swap (2 git commands)
CAS_ATTEMPTS = 8  # a writer whose base moved builds again on the new tip this many times
MOVED_ON = "chat %r: its project moved on mid-commit (try %d); recording again on the new tip"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
CHAT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
IDENTITY = "kiln <kiln@localhost>"
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
}
GIT_SETTINGS = (
    "core.quotePath=false",
    "core.attributesFile=" + os.devnull,
    # Before git 2.46 a bare repository reads no attributes from its trees (but for `git
    # archive`, which is not used); from 2.46 it reads HEAD's unless attr.tree names another.
    f"attr.tree={EMPTY_TREE}",
)
GIT_TIMEOUT_SECONDS = 120.0
ZIP_EPOCH = 315532800.0  # 1980-01-01: a zip cannot date a file earlier
ZIP_FILE_MODE = 0o100644  # a regular file, as versions record every file

log = logging.getLogger(__name__)


class GitProjectStore:
    """Projects under ``root`` (``KILN_PROJECTS_DIR``): ``root/<chat id>`` is a bare repo;
    ``lock`` lets one writer per chat work at a time (default: the local file lock)."""

    def __init__(self, root: Path, lock: CommitLock | None = None) -> None:
        self.root = root
        self.lock = lock or FileCommitLock()

    def repository(self, chat: str) -> Path:
        """Where the chat's repository is (it may not exist yet)."""
        if not CHAT_ID.fullmatch(chat):
            raise ProjectError(f"not a chat id: {chat!r}")
        return self.root / chat

    def commit(
        self, chat: str, files: Mapping[str, bytes], info: VersionInfo, *, always: bool = False
    ) -> Version | None:
        """Record ``files`` as the next version (see :class:`app.projects.store.ProjectStore`)."""
        _check_paths(files)
        repo = self._ensure(chat)
        with self.lock.held(chat, repo):
            sweep_staging_refs(repo, time.time())
            for attempt in range(1, CAS_ATTEMPTS + 1):
                recorded = _record(repo, files, info, always=always)
                if recorded != _MOVED:
                    break
                log.warning(MOVED_ON, chat, attempt, extra={"chat": chat})
            else:
                raise ProjectError(
                    f"the project of chat {chat!r} kept moving while a version was recorded "
                    f"({CAS_ATTEMPTS} tries); nothing was recorded"
                )
        return None if recorded is None else self.version(chat, recorded)

    def versions(self, chat: str) -> list[Version]:
        """Every version, oldest first."""
        repo = self.repository(chat)
        if not (repo / "HEAD").is_file() or _tip(repo) is None:
            return []
        out = _git(repo, "log", "-z", "--first-parent", "--reverse", "--no-renames",
                   "--name-status", "--format=%H%x1f%ct%x1f%B", BRANCH)  # fmt: skip
        return _parse_log(out.decode("utf-8", "surrogateescape").split("\0"))

    def version(self, chat: str, ref: VersionRef) -> Version:
        """One version by number, or the newest for ``latest``."""
        versions = self.versions(chat)
        if ref == LATEST and versions:
            return versions[-1]
        number = _number(ref)
        if number is None or not 1 <= number <= len(versions):
            raise VersionNotFound(f"the chat {chat!r} has no version {ref!r}")
        return versions[number - 1]

    def files(self, chat: str, ref: VersionRef) -> dict[str, bytes]:
        """Every file of a version, as the raw blobs the version holds."""
        version = self.version(chat, ref)
        repo = self.repository(chat)
        blobs = _blobs(repo, version.id)
        contents = blob_contents(repo, set(blobs.values()))
        return {path: contents[blob] for path, blob in blobs.items()}

    def diff(self, chat: str, ref: VersionRef) -> list[FileDiff]:
        """What a version changed, per file (in git's path order, as ``changes`` are)."""
        version = self.version(chat, ref)
        repo = self.repository(chat)
        parent = _git(repo, "rev-parse", f"{version.id}^").strip() if version.number > 1 else b""
        base = parent.decode() or EMPTY_TREE
        out = _git(repo, "diff", "--no-renames", "--no-color", "--no-textconv", "--no-ext-diff",
                   base, version.id)  # fmt: skip
        # A path with a newline is quoted in the header, and content lines are prefixed: only a
        # file's header starts a line with "diff --git ".
        chunks = re.split(r"^(?=diff --git )", out.decode("utf-8", "replace"), flags=re.M)[1:]
        pairs = zip(version.changes, chunks, strict=True)
        return [FileDiff(change.path, change.status, text) for change, text in pairs]

    def archive(self, chat: str, ref: VersionRef) -> bytes:
        """A zip of a version's files, dated when the version was made."""
        version = self.version(chat, ref)
        return zip_files(self.files(chat, version.number), version.created)

    def delete(self, chat: str) -> None:
        """Remove the chat's repository: renamed away first (one atomic step, so nobody reads
        half a repository), then removed."""
        repo = self.repository(chat)
        if not repo.exists():
            return
        doomed = self.root / f".deleted.{chat}.{os.getpid()}.{time.monotonic_ns()}"
        try:
            repo.rename(doomed)
        except FileNotFoundError:  # removed by another request meanwhile
            return
        except OSError as exc:
            raise ProjectError(f"cannot remove the project of chat {chat!r}: {exc}") from exc
        shutil.rmtree(doomed, ignore_errors=True)

    def _ensure(self, chat: str) -> Path:
        """The chat's repository, created (under a temporary name, then renamed) if absent."""
        repo = self.repository(chat)
        if (repo / "HEAD").is_file():
            return repo
        try:
            private_folder(self.root)
        except OSError as exc:  # not ours, or not a folder (a shared volume mounted wrong)
            raise ProjectError(f"cannot use the projects folder {str(self.root)!r}: {exc}") from exc
        staging = self.root / f".{chat}.{os.getpid()}.{time.monotonic_ns()}"
        _git(staging.parent, "init", "--quiet", "--bare", "--initial-branch=main", str(staging))
        try:
            staging.rename(repo)
        except OSError:  # another process created it first: theirs is as good
            shutil.rmtree(staging, ignore_errors=True)
        return repo


def git_argv(folder: Path, *args: str) -> list[str]:
    """A git command line run in ``folder`` with kiln's settings (:data:`GIT_SETTINGS`), and
    ``folder`` (resolved, as git compares it) as a ``safe.directory``: a repository another
    host's process made may show another owner on this host (an EFS access point, NFS
    ``all_squash``), which git would refuse as "dubious ownership"."""
    trusted = f"safe.directory={os.path.realpath(folder)}"
    settings = [part for setting in (*GIT_SETTINGS, trusted) for part in ("-c", setting)]
    return ["git", *settings, "-C", str(folder), *args]


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """Run one git command in ``repo``; its stdout, or :class:`ProjectError` with its stderr."""
    argv = git_argv(repo, *args)
    # The host's GIT_* variables (GIT_DIR, GIT_EXTERNAL_DIFF, GIT_CONFIG_PARAMETERS, ...) would
    # point these commands elsewhere or change what they give back.
    inherited = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    env = {**inherited, **GIT_ENV}
    try:
        done = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            env=env,
            timeout=GIT_TIMEOUT_SECONDS,
            umask=PRIVATE_UMASK,  # a project is its owner's: folders 0700, files 0600 or 0400
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProjectError(f"git {args[0]!r} failed in {str(repo)!r}: {exc}") from exc
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()
        raise ProjectError(f"git {args[0]!r} failed in {str(repo)!r}: {detail}")
    return done.stdout


_MOVED = -1  # _record's answer when the branch moved while the version was built


def _record(
    repo: Path, files: Mapping[str, bytes], info: VersionInfo, *, always: bool
) -> int | None:
    """Build ``files`` as a commit on the branch's tip and swap the branch to it: the new
    version's number, ``None`` if nothing changed, or :data:`_MOVED` if the branch moved on
    (nothing recorded; build again)."""
    parent = _tip(repo)
    before = _blobs(repo, parent) if parent else {}
    changes = _changes(before, files)
    if not changes and not always:
        return None
    number = 1 + (_count(repo) if parent else 0)
    staging = STAGING + secrets.token_hex(8)  # unique on every host
    stream = _stream(staging, _message(number, info, changes), parent, files)
    commit = _git(repo, "fast-import", "--quiet", "--done", stdin=stream).decode().strip()
    swap = f"update {BRANCH} {commit} {parent or NO_COMMIT}\ndelete {staging} {commit}\n"
    try:
        _git(repo, "update-ref", "--stdin", stdin=swap.encode())
    except ProjectError:
        _git(repo, "update-ref", "-d", staging)  # refused whole: the staging ref is still there
        if _tip(repo) == parent and not _cleared_stale_ref_locks(repo):
            raise  # neither a lost race nor a dead writer's lock: git's own words say what
        return _MOVED
    return number


def sweep_staging_refs(repo: Path, now: float) -> list[str]:
    """Delete the staging refs of ``repo`` whose commit is older than
    :data:`STALE_STAGING_SECONDS` at ``now`` (writers killed between fast-import and the swap
    left them); the refs deleted. Never fails a commit: a sweep git refuses is logged."""
    try:
        with os.scandir(repo / STAGING) as entries:
            if next(entries, None) is None:
                return []  # the usual case, without a git process: no writer died here
    except FileNotFoundError:
        return []
    fields = "--format=%(refname) %(objectname) %(committerdate:unix)"
    listing = _git(repo, "for-each-ref", fields, STAGING).decode()
    stale = [
        (ref, commit)
        for ref, commit, created in (line.split() for line in listing.splitlines())
        if now - int(created) > STALE_STAGING_SECONDS
    ]
    if not stale:
        return []
    # Each delete names the commit it saw: a ref that changed meanwhile is left alone.
    drop = "".join(f"delete {ref} {commit}\n" for ref, commit in stale)
    try:
        _git(repo, "update-ref", "--stdin", stdin=drop.encode())
    except ProjectError as exc:
        log.warning("left the stale staging refs of %r: %s", str(repo), exc)
        return []
    log.info("removed %d stale staging refs of %r", len(stale), str(repo))
    return [ref for ref, _commit in stale]


def _cleared_stale_ref_locks(repo: Path) -> bool:
    """Remove the ref lock files a writer killed mid-update left (git holds one for
    milliseconds; one older than a git command may live is a dead writer's, and would refuse
    every later commit of the chat); whether there was one."""
    cleared = False
    for lock in (repo / f"{BRANCH}.lock", repo / "packed-refs.lock"):
        try:
            if time.time() - lock.stat().st_mtime > GIT_TIMEOUT_SECONDS:
                lock.unlink()
                log.warning("removed the stale ref lock %r", str(lock))
                cleared = True
        except FileNotFoundError:  # none, or another writer removed it first
            continue
    return cleared


def _tip(repo: Path) -> str | None:
    """The newest commit, or ``None`` for a repository without versions."""
    try:
        return (
            _git(repo, "rev-parse", "--verify", "--quiet", f"{BRANCH}^{{commit}}").decode().strip()
        )
    except ProjectError:
        return None


def _count(repo: Path) -> int:
    return int(_git(repo, "rev-list", "--count", "--first-parent", BRANCH))


def _blobs(repo: Path, commit: str) -> dict[str, str]:
    """``path -> blob id`` of every file of ``commit``."""
    out = _git(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
    blobs: dict[str, str] = {}
    for entry in out.decode("utf-8", "surrogateescape").split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            blobs[path] = meta.split()[2]
    return blobs


def blob_contents(repo: Path, blobs: set[str]) -> dict[str, bytes]:
    """``blob id -> content``, read raw in one ``cat-file --batch`` (no attribute applies)."""
    wanted = sorted(blobs)
    out = _git(repo, "cat-file", "--batch", stdin="".join(f"{blob}\n" for blob in wanted).encode())
    contents: dict[str, bytes] = {}
    offset = 0
    for blob in wanted:  # "<id> blob <size>\n<content>\n", in the order asked
        end = out.index(b"\n", offset)
        header = out[offset:end].split()
        if len(header) != 3 or header[1] != b"blob":
            raise ProjectError(f"git has no blob {blob!r} in {str(repo)!r}: {out[offset:end]!r}")
        size = int(header[2])
        contents[blob] = out[end + 1 : end + 1 + size]
        offset = end + 1 + size + 1
    return contents


def zip_files(files: Mapping[str, bytes], created: float) -> bytes:
    """A zip of ``files`` (names as they are, contents as they are), dated ``created``."""
    when = time.gmtime(max(created, ZIP_EPOCH))[:6]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(files):
            entry = zipfile.ZipInfo(path, date_time=when)
            entry.external_attr = ZIP_FILE_MODE << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, files[path])
    return out.getvalue()


def blob_id(content: bytes) -> str:
    """The id git gives a blob of ``content`` (so unchanged files need no git call)."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def _changes(before: Mapping[str, str], files: Mapping[str, bytes]) -> tuple[Change, ...]:
    """What turns ``before`` (path -> blob id) into ``files``, in path order."""
    changes = [Change(path, "D") for path in before if path not in files]
    for path, content in files.items():
        if path not in before:
            changes.append(Change(path, "A"))
        elif before[path] != blob_id(content):
            changes.append(Change(path, "M"))
    return tuple(sorted(changes, key=lambda change: change.path.encode()))


def summary(changes: tuple[Change, ...]) -> str:
    """``"2 added, 1 changed, 0 removed"``."""
    count = {status: sum(c.status == status for c in changes) for status in "AMD"}
    return f"{count['A']} added, {count['M']} changed, {count['D']} removed"


def _message(number: int, info: VersionInfo, changes: tuple[Change, ...]) -> bytes:
    what = info.note or (f"turn {info.turn}" if info.turn else "snapshot")
    run = f" of run {info.run}" if info.run else ""
    lines = [f"Version {number}: {what}{run} ({summary(changes)})", ""]
    for trailer, value in (
        ("Kiln-Run", info.run),
        ("Kiln-Turn", info.turn),
        ("Kiln-Note", info.note),
    ):
        if value:
            lines.append(f"{trailer}: {value}")
    return "\n".join(lines).encode() + b"\n"


def _stream(ref: str, message: bytes, parent: str | None, files: Mapping[str, bytes]) -> bytes:
    """A ``git fast-import`` stream that records ``files`` as a commit on ``ref`` and prints
    the commit's id (``get-mark``)."""
    now = int(time.time())
    out = [b"commit %s\nmark :1\n" % ref.encode()]
    out.append(b"committer %s %d +0000\n" % (IDENTITY.encode(), now))
    out += [b"data %d\n" % len(message), message]
    if parent:
        out.append(b"from %s\n" % parent.encode())
    out.append(b"deleteall\n")
    for path in sorted(files):
        content = files[path]
        out += [b"M 100644 inline %s\n" % _quoted(path), b"data %d\n" % len(content), content]
        out.append(b"\n")
    out.append(b"\nget-mark :1\ndone\n")
    return b"".join(out)


def _check_paths(files: Mapping[str, bytes]) -> None:
    """Refuse a path that could leave the workspace, or whose name is not UTF-8 (the workspace
    reader names those to the user and leaves them out)."""
    for path in files:
        if safe_path(path) != path:
            raise ProjectError(f"refusing to record a path outside the workspace: {path!r}")
        if unkeepable_name(path):
            raise ProjectError(f"cannot record a file whose name is not UTF-8: {path!r}")


def _quoted(path: str) -> bytes:
    """``path`` C-quoted, as fast-import reads any path: a quote, a backslash and every control
    character escaped, everything else (UTF-8 included) as it is."""
    return b'"%s"' % b"".join(_C_ESCAPES.get(byte, bytes((byte,))) for byte in path.encode())


_C_ESCAPES = {
    **{byte: b"\\%03o" % byte for byte in (*range(0x20), 0x7F)},
    ord('"'): b'\\"',
    ord("\\"): b"\\\\",
}


def _number(ref: VersionRef) -> int | None:
    if isinstance(ref, int):
        return ref
    parsed = parse_version_ref(ref)
    return parsed if isinstance(parsed, int) else None


STATUS = re.compile(r"\n?([AMD])")  # a status field; the first of a commit follows a newline


def _parse_log(fields: list[str]) -> list[Version]:
    """:meth:`GitProjectStore.versions`' ``log -z`` output, split at its NULs: per commit, its
    header (``id\x1fstamp\x1fmessage``), then a status and a path field per changed file. A
    path is only ever read where a path stands, so it may hold anything; a status never looks
    like a header."""
    versions: list[Version] = []
    at = 0
    while at < len(fields) and fields[at]:
        header = fields[at]
        changes: list[Change] = []
        at += 1
        while at + 1 < len(fields) and (status := STATUS.fullmatch(fields[at])):
            changes.append(Change(fields[at + 1], status.group(1)))
            at += 2
        versions.append(_parse_version(len(versions) + 1, header, tuple(changes)))
    return versions


def _parse_version(number: int, header: str, changes: tuple[Change, ...]) -> Version:
    """One version from its log header and changes."""
    commit, stamp, body = header.split("\x1f", 2)
    values = dict(line.split(": ", 1) for line in body.splitlines() if ": " in line)
    info = VersionInfo(
        run=values.get("Kiln-Run", ""),
        turn=int(values.get("Kiln-Turn", "0") or 0),
        note=values.get("Kiln-Note", ""),
    )
    return Version(number, commit, float(stamp), info, summary(changes), changes)
