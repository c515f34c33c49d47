"""Which parser kiln runs: the mypyc-compiled build of ``parser/`` when a fresh one exists.

``scripts/build_parser.py`` (``make parser-compiled``; ``scripts/setup.sh`` runs it when a C
compiler is present) compiles ``parser/*.py`` into ``.parser-compiled/<key>/`` beside the
package, where ``<key>`` is :func:`build_key`: a digest of the parser's sources and of the
interpreter's ABI. The checkout's ``parser/`` stays pure Python, importable and clean in git.

:func:`activate` runs first in kiln's entry points (``app.cli.main``, ``tests/conftest.py``,
``bench/parser.py``), before anything imports ``parser``: it installs an import finder
(:class:`CompiledParserFinder`) that serves the name ``parser`` from the build's folder, so ``from
parser import ...`` stays the one import path everywhere and loads the compiled modules. Only the
folder named by the current sources' key is ever used, so a stale build cannot be imported: it is
reported on stderr and pure Python runs instead.

``KILN_PARSER`` (read by :class:`sandbox.EnvReader`): ``auto`` (default: compiled when fresh),
``python`` (always pure), ``compiled`` (a missing or stale build is a ``config_error``).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox import EnvReader

SETTING = "KILN_PARSER"
CHOICES = ("auto", "python", "compiled")
BUILD_COMMAND = "make parser-compiled"
BUILD_ROOT_NAME = ".parser-compiled"
# Written last into a build's folder (which is itself renamed into place whole), so a folder
# without it is a build that did not finish.
COMPLETE_MARK = "COMPLETE"


@dataclass(frozen=True)
class ParserChoice:
    """The implementation picked, why, and the build's folder when it is the compiled one."""

    implementation: str  # "compiled" or "python"
    reason: str
    build_dir: Path | None = None
    stale: bool = False  # a build exists, but of other sources: said on stderr


_active: ParserChoice | None = None


def source_dir() -> Path:
    """The pure-Python ``parser`` package (a sibling of ``app``, checkout or site-packages)."""
    return Path(__file__).resolve().parents[1] / "parser"


def build_root(sources: Path | None = None) -> Path:
    """The folder holding compiled builds: ``.parser-compiled`` beside the ``parser`` package."""
    return (sources or source_dir()).parent / BUILD_ROOT_NAME


def build_key(sources: Path | None = None) -> str:
    """A digest of every ``parser/*.py`` (names and bytes) and of the interpreter's ABI tag.

    A build made from other sources, or for another Python, has another key: it is never used.
    """
    digest = hashlib.sha256(sys.implementation.cache_tag.encode())
    for path in sorted((sources or source_dir()).glob("*.py")):
        digest.update(b"\0" + path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:24]


def fresh_build(sources: Path | None = None) -> Path | None:
    """The finished build of the current sources, or ``None``."""
    folder = build_root(sources) / build_key(sources)
    return folder if (folder / COMPLETE_MARK).is_file() else None


def choose(env: Mapping[str, str] | None = None, sources: Path | None = None) -> ParserChoice:
    """The implementation ``KILN_PARSER`` and the builds on disk ask for (nothing imported)."""
    setting = EnvReader(env).text(SETTING, "auto").lower()  # text() refuses nothing
    if setting not in CHOICES:
        raise _config_error(f"{SETTING}={setting!r} must be one of {', '.join(CHOICES)}")
    if setting == "python":
        return ParserChoice("python", f"{SETTING}=python")
    build = fresh_build(sources)
    if build is not None:
        return ParserChoice("compiled", f"fresh mypyc build {build.name}", build)
    why, stale = _missing_build(sources)
    if setting == "compiled":
        raise _config_error(
            f"{SETTING}=compiled but {why}: build it with `{BUILD_COMMAND}` (needs a C "
            f"compiler and Python's headers), or set {SETTING}=auto or {SETTING}=python"
        )
    return ParserChoice("python", why, stale=stale)


def _missing_build(sources: Path | None) -> tuple[str, bool]:
    """Why no compiled parser is used, and whether a build of other sources lies there."""
    root = build_root(sources)
    if root.is_dir() and any(root.iterdir()):
        return f"the compiled parser in {root} is stale (the parser's sources changed since)", True
    return "no compiled parser is built", False


def _config_error(message: str) -> Exception:
    """A ``config_error``. ``app.errors`` imports ``parser`` (its tree holds ``ParseError``), so
    it is imported only here, on the way out, never before the choice took effect."""
    from app.errors import ConfigError

    return ConfigError(message)


def activate(env: Mapping[str, str] | None = None) -> ParserChoice:
    """Pick the parser once per process and make ``import parser`` load it.

    Raises :class:`~app.errors.ConfigError` for a bad ``KILN_PARSER``, for ``compiled`` without
    a fresh build, and when ``parser`` was imported before the choice could take effect.
    """
    global _active
    if _active is not None:
        return _active
    choice = choose(env)
    loaded = sys.modules.get("parser")
    if loaded is not None and implementation_of(loaded.__file__) != choice.implementation:
        raise _config_error(
            f"the parser was imported before kiln chose its implementation ({choice.reason}); "
            f"call app.parser_choice.activate() first"
        )
    if choice.build_dir is not None:
        sys.meta_path.insert(0, CompiledParserFinder(choice.build_dir))
    if choice.stale:
        print(
            f"kiln: {choice.reason}; using pure Python. Rebuild: {BUILD_COMMAND}", file=sys.stderr
        )
    _active = choice
    return choice


class CompiledParserFinder(importlib.abc.MetaPathFinder):
    """Finds ``parser`` (and mypyc's runtime module) in a compiled build, before anything else.

    A finder rather than an entry at the front of ``sys.path``: pytest puts the checkout back in
    front of ``sys.path`` as it imports test packages, and the editable install has a finder of
    its own. The submodules follow: the compiled package's ``__path__`` is the build's folder.
    """

    def __init__(self, folder: Path) -> None:
        """Serve ``parser`` from ``folder`` (a build: ``parser/`` and ``*__mypyc*.so``)."""
        self.folder = str(folder)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        """The build's spec for ``parser`` and ``<hash>__mypyc``; ``None`` for any other name."""
        if fullname != "parser" and not fullname.endswith("__mypyc"):
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [self.folder])


def implementation_of(module_file: str | None) -> str:
    """``compiled`` for an extension module's file, ``python`` otherwise."""
    return "compiled" if (module_file or "").endswith((".so", ".pyd")) else "python"


def activate_or_exit(program: str, env: Mapping[str, str] | None = None) -> ParserChoice:
    """:func:`activate` for an entry point: a ``config_error`` is said on stderr, exit code 2."""
    try:
        return activate(env)
    except Exception as exc:
        from app.errors import ConfigError  # only now: see _config_error

        if not isinstance(exc, ConfigError):
            raise
        print(f"{program}: {exc} ({exc.code})", file=sys.stderr)
        raise SystemExit(2) from exc
