"""Compile ``parser/*.py`` with mypyc into ``.parser-compiled/<key>/`` (``make parser-compiled``).

The sources are copied to a temporary folder and compiled there, so nothing is written beside
the checkout's sources (the pure parser stays importable, git stays clean). Only the extension
modules are kept, in a folder named by :func:`app.parser_choice.build_key` of the copy that was
compiled; the folder is renamed into place whole, with its completion mark inside, and builds
of other sources are then removed. Nothing is done when the current sources' build exists.

    python scripts/build_parser.py [--if-possible]

``--if-possible`` (what ``scripts/setup.sh`` passes): without a C compiler or Python's headers,
say so in one line and exit 0; the parser then stays pure Python.

A finished build is also kept outside the checkout, in
``$XDG_CACHE_HOME/kiln/parser-compiled/<key>-mypy<version>`` (``~/.cache`` by default): a fresh
clone of the same sources (every CI run) installs it in a fraction of a second instead of
compiling for half a minute. The key already names the sources and the interpreter; the folder
names mypyc's version too, since another mypyc makes other code. A user without a home, or an
unwritable cache, builds without it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.parser_choice import COMPLETE_MARK, build_key, build_root, fresh_build, source_dir


def missing_toolchain() -> str | None:
    """What stops a C build here (no compiler, no ``Python.h``), or ``None``."""
    compiler = os.environ.get("CC") or "cc"
    if shutil.which(compiler) is None and shutil.which("gcc") is None:
        return f"no C compiler ({compiler} or gcc)"
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.is_file():
        return f"no Python headers ({headers})"
    return None


def compile_copy(sources: Path, work: Path) -> Path:
    """Copy ``sources`` into ``work/parser`` and compile it there; returns the copy."""
    copy = work / "parser"
    copy.mkdir()
    for path in sources.glob("*.py"):
        shutil.copy2(path, copy / path.name)
    mypyc = Path(sys.executable).with_name("mypyc")
    done = subprocess.run(
        [str(mypyc), "parser"], cwd=work, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        print(done.stdout[-4000:] + done.stderr[-4000:], file=sys.stderr)
        raise SystemExit(f"build_parser: mypyc failed (exit {done.returncode})")
    return copy


def install(work: Path, copy: Path, root: Path) -> Path:
    """Move the extension modules into ``root/<key>`` whole; remove every other build."""
    key = build_key(copy)
    staging = _staging(root, key)
    (staging / "parser").mkdir()
    for shared in work.glob("*__mypyc*.so"):  # the runtime every module's shim loads
        shutil.copy2(shared, staging / shared.name)
    for module in copy.glob("*.so"):
        shutil.copy2(module, staging / "parser" / module.name)
    (staging / COMPLETE_MARK).write_text(f"{key}\n")
    return _put_in_place(staging, root, key)


def install_kept(kept: Path, root: Path, key: str) -> Path:
    """Copy a kept build into ``root/<key>`` whole; remove every other build."""
    staging = _staging(root, key)
    shutil.copytree(kept, staging, dirs_exist_ok=True)
    return _put_in_place(staging, root, key)


def kept_build(key: str, environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where the build of ``key`` by this mypyc is kept outside the checkout, or ``None`` when
    there is no cache folder (no ``XDG_CACHE_HOME`` and no home)."""
    base = environ.get("XDG_CACHE_HOME") or ""
    if not base:
        home = environ.get("HOME") or ""
        if not home or home == "/nonexistent":
            return None
        base = str(Path(home) / ".cache")
    return Path(base) / "kiln" / "parser-compiled" / f"{key}-mypy{metadata.version('mypy')}"


def keep(target: Path, kept: Path) -> None:
    """Keep ``target`` at ``kept`` (whole, by rename; older builds there are removed); an
    unwritable cache only says so."""
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{kept.name}-", dir=kept.parent))
        shutil.copytree(target, staging, dirs_exist_ok=True)
        if kept.exists():
            shutil.rmtree(staging)
        else:
            staging.rename(kept)
        for other in kept.parent.iterdir():
            if other != kept and not other.name.startswith("."):
                shutil.rmtree(other, ignore_errors=True)
    except OSError as exc:
        print(f"compiled parser not kept in {kept.parent}: {exc}", file=sys.stderr)


def _staging(root: Path, key: str) -> Path:
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    staging.chmod(0o755)  # mkdtemp's 0700 would hide the build from other users of the checkout
    return staging


def _put_in_place(staging: Path, root: Path, key: str) -> Path:
    target = root / key
    if target.exists():  # a concurrent build of the same sources finished first
        shutil.rmtree(staging)
    else:
        staging.rename(target)
    for other in root.iterdir():
        if other != target and not other.name.startswith("."):
            shutil.rmtree(other, ignore_errors=True)
    return target


def main() -> int:
    """Build unless up to date; returns the exit code."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--if-possible", action="store_true", help="skip without a C toolchain")
    opts = args.parse_args()
    if (existing := fresh_build()) is not None:
        print(f"compiled parser is up to date ({existing})")
        return 0
    if (missing := missing_toolchain()) is not None:
        print(f"compiled parser not built: {missing}; the parser stays pure Python")
        return 0 if opts.if_possible else 1
    root = build_root()
    root.mkdir(exist_ok=True)
    key = build_key()
    kept = kept_build(key)
    if kept is not None and (kept / COMPLETE_MARK).is_file():
        print(f"compiled parser installed from {kept}: {install_kept(kept, root, key)}")
        return 0
    with tempfile.TemporaryDirectory(prefix="kiln-parser-") as tmp:
        work = Path(tmp)
        target = install(work, compile_copy(source_dir(), work), root)
    print(f"compiled parser built: {target}")
    if kept is not None:
        keep(target, kept)
    return 0


if __name__ == "__main__":
    sys.exit(main())
