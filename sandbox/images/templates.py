"""The sandbox templates: one image per framework, each ready to run its dev server."""

from __future__ import annotations

from dataclasses import dataclass

WORKSPACE = "/workspace"
SANDBOX_UID = 1000


# How every template builds (its package.json's "build" script): post-generation runs it, and a
# run's session starts it ahead as soon as an answer's files are complete (sandbox.session).
BUILD_COMMAND = ("npm", "run", "build")


@dataclass(frozen=True, slots=True)
class Template:
    """A framework's image and what the rest of kiln needs to know about it."""

    name: str
    dev_port: int
    entrypoints: tuple[str, ...]
    # Files the template owns; writes to them are merged (package.json) or refused with a warning.
    config_files: tuple[str, ...]
    dev_command: tuple[str, ...]

    @property
    def image(self) -> str:
        """The local image tag of this template."""
        return f"kiln/sandbox-{self.name}:latest"


TEMPLATES: dict[str, Template] = {
    "vite-react": Template(
        name="vite-react",
        dev_port=5173,
        entrypoints=("index.html", "src/main.jsx", "src/App.jsx"),
        config_files=("package.json", "vite.config.js", "package-lock.json"),
        # `npm run dev` under kiln's supervisor (images/vite-react/kiln-dev.mjs): it starts the
        # dev server over after an install and after it exits.
        dev_command=("node", "/usr/local/lib/kiln/kiln-dev.mjs"),
    ),
    "vanilla": Template(
        name="vanilla",
        dev_port=8080,
        entrypoints=("index.html",),
        config_files=("package.json", "package-lock.json", "server.js"),
        dev_command=("npm", "run", "dev"),
    ),
    "nextjs": Template(
        name="nextjs",
        dev_port=3000,
        entrypoints=("app/layout.jsx", "app/page.jsx"),
        config_files=("package.json", "next.config.mjs", "package-lock.json"),
        dev_command=("npm", "run", "dev"),
    ),
}
DEFAULT_TEMPLATE = "vite-react"


def get_template(name: str) -> Template:
    """The template called ``name``; raises ``KeyError`` naming the known ones."""
    try:
        return TEMPLATES[name]
    except KeyError:
        raise KeyError(f"unknown template {name!r}; known: {', '.join(TEMPLATES)}") from None
