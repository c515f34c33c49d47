"""The files a template's image starts with, read from the checkout's ``images/<name>/workspace``.

Validation needs the whole project (template files plus generated ones) and the fixes restore a
missing entrypoint from here. Lock files and ``node_modules`` are left out: they are large and
no check reads them. The folder is the one the image builder uses (``KILN_IMAGES_DIR``, else the
checkout's ``images/``), so what is validated is what the sandbox image holds.
"""

from __future__ import annotations

import functools
from pathlib import Path

from app.errors import ConfigError
from sandbox import EnvReader, default_images_dir, get_template

SKIPPED_NAMES = frozenset({"package-lock.json", "node_modules"})


def read_template_workspace(name: str, images_dir: Path | None = None) -> dict[str, str]:
    """Path -> content of the text files of template ``name``'s workspace.

    Raises ``KeyError`` for an unknown template and ``FileNotFoundError`` when its folder is
    missing.
    """
    template = get_template(name)
    folder = images_dir or EnvReader(None, ConfigError).path(
        "KILN_IMAGES_DIR", default_images_dir()
    )
    root = folder / template.name / "workspace"
    return dict(_read_tree(root))


@functools.cache
def _read_tree(root: Path) -> tuple[tuple[str, str], ...]:
    if not root.is_dir():
        raise FileNotFoundError(f"no template workspace folder at {str(root)!r}")
    files = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and not SKIPPED_NAMES & set(relative.parts):
            files.append((relative.as_posix(), path.read_text(encoding="utf-8")))
    return tuple(files)
